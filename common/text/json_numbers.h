// Numbers read out of JSON from outside. nlohmann's get<int>() casts
// whatever number it holds: a float outside the target's range is undefined
// behaviour (a fuzzed heads file with n_calib = 1e106 reached it), and an
// unsigned above INT64_MAX wraps. These accept a number only when it is
// what the field must be, and say which field when it is not.
#pragma once

#include <cmath>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace mesa_anyjev::text {

// An integer (JSON integer syntax, not 3.0) in [lo, hi].
template <class Json>
absl::StatusOr<int64_t> JsonInteger(const Json& v, absl::string_view field,
                                    int64_t lo, int64_t hi) {
  bool in_range = false;
  int64_t out = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.template get<uint64_t>();
    in_range = hi >= 0 && u <= static_cast<uint64_t>(hi) &&
               (lo <= 0 || u >= static_cast<uint64_t>(lo));
    out = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    out = v.template get<int64_t>();
    in_range = out >= lo && out <= hi;
  }
  if (!in_range) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": an integer in [", lo, ", ", hi,
                     "] is required, got ", v.dump().substr(0, 40)));
  }
  return out;
}

// The member `key` of `object` as above, or `fallback` when it is absent.
template <class Json>
absl::StatusOr<int64_t> JsonIntegerOr(const Json& object, const char* key,
                                      int64_t fallback, int64_t lo,
                                      int64_t hi) {
  if (!object.is_object() || !object.contains(key)) return fallback;
  return JsonInteger(object[key], key, lo, hi);
}

// A finite number.
template <class Json>
absl::StatusOr<double> JsonFinite(const Json& v, absl::string_view field) {
  if (!v.is_number() || !std::isfinite(v.template get<double>())) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": a finite number is required, got ", v.dump().substr(0, 40)));
  }
  return v.template get<double>();
}

template <class Json>
absl::StatusOr<double> JsonFiniteOr(const Json& object, const char* key,
                                    double fallback) {
  if (!object.is_object() || !object.contains(key)) return fallback;
  return JsonFinite(object[key], key);
}

}  // namespace mesa_anyjev::text
