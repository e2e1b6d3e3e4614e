// Python number and JSON formatting (see py_format.h).
#include "common/decision/py_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mesa_anyjev::decision {

std::string PyFloatRepr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0.0) return std::signbit(x) ? "-0.0" : "0.0";
  // Shortest round-trip digits and exponent: "d.ddde[+-]XX".
  char buf[64];
  const auto result =
      std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string sci(buf, result.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e_at = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e_at + 1);
  std::string digits = sci.substr(0, e_at);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  // Python: scientific when the decimal point position (exponent + 1) is
  // <= -4 or > 16.
  if (exponent < -4 || exponent >= 16) {
    std::string mantissa = digits.substr(0, 1);
    if (digits.size() > 1) absl::StrAppend(&mantissa, ".", digits.substr(1));
    return absl::StrCat(sign, mantissa, "e", exponent < 0 ? "-" : "+",
                        absl::StrFormat("%02d", std::abs(exponent)));
  }
  if (exponent < 0) {
    return absl::StrCat(sign, "0.", std::string(-exponent - 1, '0'), digits);
  }
  const size_t int_digits = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= int_digits) {
    return absl::StrCat(sign, digits,
                        std::string(int_digits - digits.size(), '0'), ".0");
  }
  return absl::StrCat(sign, digits.substr(0, int_digits), ".",
                      digits.substr(int_digits));
}

std::string PyFormatG(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return absl::StrFormat("%g", x);
}

std::string PyJsonString(std::string_view utf8) {
  std::string out = "\"";
  for (const char c : utf8) {
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      case '\b':
        out.append("\\b");
        break;
      case '\f':
        out.append("\\f");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

double PyRound(double x) { return std::nearbyint(x); }

double NumpyRound(double x, int decimals) {
  const double f = std::pow(10.0, decimals);
  return std::nearbyint(x * f) / f;
}

}  // namespace mesa_anyjev::decision
