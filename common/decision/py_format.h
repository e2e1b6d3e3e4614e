// Python's text forms of numbers and JSON, where the decision method's
// identities depend on them: a question key is the sha256 of Python's
// json.dumps(..., sort_keys=True, ensure_ascii=False), score bins are named
// with format(x, "g"), and dict states render as json.dumps(indent=2,
// ensure_ascii=False). Reproducing them byte for byte keeps keys, prompts and
// artifacts interchangeable with the anyjev package.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::decision {

// repr(float): the shortest digits that round-trip, in fixed notation for
// decimal exponents -4..15 (with ".0" on integral values), else "1.5e-07",
// "1e+16"; "inf", "-inf", "nan".
std::string PyFloatRepr(double x);

// format(x, "g"): six significant digits, trailing zeros removed ("0.75",
// "1", "1e-05").
std::string PyFormatG(double x);

// A JSON string literal as json.dumps(ensure_ascii=False) writes it: only
// '"', '\\' and control characters below U+0020 are escaped.
std::string PyJsonString(std::string_view utf8);

// json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False): the
// reference's rendering of a dict or list state. Object keys keep the order
// they were parsed in (ordered_json); floats use PyFloatRepr, so 1.0 stays
// "1.0" and 1e-05 stays "1e-05". NaN and infinities render as Python writes
// them (NaN, Infinity).
std::string PyJsonDumpsIndent2(const nlohmann::ordered_json& value);

// Python's round(x) on a float: to the nearest integer, ties to even.
double PyRound(double x);

// numpy's np.round(x, decimals) for decimals >= 0: rint(x * 10^d) / 10^d.
double NumpyRound(double x, int decimals);

}  // namespace mesa_anyjev::decision
