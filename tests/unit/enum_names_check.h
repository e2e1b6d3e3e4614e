// What every enum <-> name table must give (common/util/enum_names.h): each
// value its expected name, no two values one name, and where the enum parses,
// each name back to its value. `expected` lists every enumerator; their
// underlying values must be 0..n-1, so a list that skips one fails. An enum
// a config key names must offer the same names there (ConfigChoices).
#pragma once

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/config/config_schema.h"

namespace mesa_anyjev::testing {

template <typename E>
using ExpectedNames = std::vector<std::pair<E, std::string>>;

template <typename E, typename NameFn>
void CheckNames(const ExpectedNames<E>& expected, NameFn name) {
  std::set<int> values;
  std::set<std::string> names;
  for (const auto& [value, text] : expected) {
    INFO(text);
    CHECK(std::string(name(value)) == text);
    CHECK(values.insert(static_cast<int>(value)).second);
    CHECK(names.insert(text).second);
  }
  REQUIRE(!values.empty());
  CHECK(*values.begin() == 0);
  CHECK(*values.rbegin() == static_cast<int>(expected.size()) - 1);
}

template <typename E, typename NameFn, typename ParseFn>
void CheckRoundTrip(const ExpectedNames<E>& expected, NameFn name,
                    ParseFn parse) {
  CheckNames(expected, name);
  for (const auto& [value, text] : expected) {
    INFO(text);
    const auto parsed = parse(text);
    REQUIRE(parsed.ok());
    CHECK(*parsed == value);
    CHECK(std::string(name(*parsed)) == text);
  }
}

// The expected names, sorted, to hold against ConfigChoices.
template <typename E>
std::set<std::string> NamesOf(const ExpectedNames<E>& expected) {
  std::set<std::string> names;
  for (const auto& [value, text] : expected) names.insert(text);
  return names;
}

// The names the config validator admits for `key`, sorted.
inline std::set<std::string> ConfigChoices(const std::string& key) {
  const config::schema::Field* field = config::schema::FindField(key);
  REQUIRE(field != nullptr);
  return {field->choices.begin(), field->choices.end()};
}

// The message a name outside the table gets.
template <typename ParseFn>
std::string ParseError(ParseFn parse, const std::string& text) {
  const auto parsed = parse(text);
  REQUIRE_FALSE(parsed.ok());
  return std::string(parsed.status().message());
}

}  // namespace mesa_anyjev::testing
