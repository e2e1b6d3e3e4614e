// Python's text forms of numbers and JSON strings, where the decision
// method's identities depend on them: score bins are named with format(x,
// "g"), floats and strings inside json.dumps (py_json.h) as Python writes
// them. Reproducing them byte for byte keeps keys, prompts and artifacts
// interchangeable with the anyjev package.
#pragma once

#include <string>
#include <string_view>

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

// Python's round(x) on a float: to the nearest integer, ties to even.
double PyRound(double x);

// numpy's np.round(x, decimals) for decimals >= 0: rint(x * 10^d) / 10^d.
double NumpyRound(double x, int decimals);

}  // namespace mesa_anyjev::decision
