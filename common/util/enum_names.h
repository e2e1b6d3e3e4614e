// One table per enum: each value beside its name, read both ways (a value's
// name, a name's value) and for the list an error message offers, so the
// name, the parse and the message can never disagree. A row's order is the
// order the message lists the names in.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mesa_anyjev::util {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `value`; `unknown` for a value the table lacks (a cast).
template <typename E, size_t N>
constexpr const char* NameIn(const EnumName<E> (&table)[N], E value,
                             const char* unknown = "?") {
  for (const EnumName<E>& row : table) {
    if (row.value == value) return row.name;
  }
  return unknown;
}

// The value named exactly `name`; nullopt for any other text.
template <typename E, size_t N>
constexpr std::optional<E> ValueIn(const EnumName<E> (&table)[N],
                                   std::string_view name) {
  for (const EnumName<E>& row : table) {
    if (name == row.name) return row.value;
  }
  return std::nullopt;
}

// The names in table order for a message: "a, b or c", or with
// last = ", " "a, b, c".
template <typename E, size_t N>
std::string NamesIn(const EnumName<E> (&table)[N],
                    std::string_view last = " or ") {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? last : std::string_view(", ");
    out += table[i].name;
  }
  return out;
}

// Whether `table` has one row for each value 0..`last` and no name twice.
// Each table sits beside a static_assert of it, so a value added before
// `last` without its row fails the build, as a switch's missing case did.
template <typename E, size_t N>
constexpr bool NamesEvery(const EnumName<E> (&table)[N], E last) {
  if (static_cast<size_t>(last) + 1 != N) return false;
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(table[i].value) >= N) return false;
    for (size_t j = 0; j < i; ++j) {
      if (table[j].value == table[i].value) return false;
      if (std::string_view(table[j].name) == table[i].name) return false;
    }
  }
  return true;
}

}  // namespace mesa_anyjev::util
