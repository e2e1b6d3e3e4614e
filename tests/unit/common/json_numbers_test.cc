// Numbers from outside JSON: only what the field must be, never a cast of a
// float out of range (undefined behaviour) or a wrapped unsigned.
#include "common/text/json_numbers.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace mesa_anyjev::text {
namespace {

using nlohmann::json;

TEST_CASE("JsonInteger takes integers in range only", "[json_numbers]") {
  CHECK(*JsonInteger(json(7), "n", 0, 10) == 7);
  CHECK(*JsonInteger(json(-3), "n", -5, 10) == -3);
  for (const char* text : {"1e106", "3.0", "-1", "11", "\"4\"", "null", "[1]",
                           "18446744073709551615", "9223372036854775808"}) {
    const auto got = JsonInteger(json::parse(text), "n_calib", 0, 10);
    CHECK_FALSE(got.ok());
    CHECK(got.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(got.status().message().find("n_calib") == 0);
  }
  CHECK(*JsonInteger(json::parse("9223372036854775807"), "n", 0, INT64_MAX) ==
        INT64_MAX);
}

TEST_CASE("JsonIntegerOr falls back only when the member is absent",
          "[json_numbers]") {
  CHECK(*JsonIntegerOr(json::parse(R"({})"), "bins", 5, 2, 10) == 5);
  CHECK(*JsonIntegerOr(json::parse(R"({"bins": 4})"), "bins", 5, 2, 10) == 4);
  CHECK_FALSE(
      JsonIntegerOr(json::parse(R"({"bins": 4.5})"), "bins", 5, 2, 10).ok());
  CHECK_FALSE(
      JsonIntegerOr(json::parse(R"({"bins": null})"), "bins", 5, 2, 10).ok());
}

TEST_CASE("JsonFinite refuses what is not a finite number", "[json_numbers]") {
  CHECK(*JsonFinite(json(0.25), "w") == 0.25);
  CHECK(*JsonFinite(json(3), "w") == 3.0);
  CHECK_FALSE(JsonFinite(json("1"), "w").ok());
  CHECK_FALSE(JsonFinite(json(nullptr), "w").ok());
  CHECK(*JsonFiniteOr(json::object(), "w", 1.5) == 1.5);
}

}  // namespace
}  // namespace mesa_anyjev::text
