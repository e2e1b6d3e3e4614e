// The one parser for JSON from outside (text/strict_json.h), the bounded
// Python-style rendering a state goes through after it, UTF-8 escaping for
// messages, and array decoding from heads files: each refuses what it must
// with a message that names the limit, and none recurses without bound.
#include "common/text/strict_json.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/status/status.h"
#include "common/decision/linear_head.h"
#include "common/decision/py_json.h"
#include "common/text/utf8.h"

namespace mesa_anyjev::text {
namespace {

using Catch::Matchers::Contains;

constexpr JsonLimits kLimits{.max_bytes = 1 << 20,
                             .max_bytes_name = "limits.max_text_bytes"};

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

TEST_CASE("strict JSON: UTF-8, duplicates, depth and size", "[json]") {
  CHECK(FirstInvalidUtf8("plain \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") < 0);
  CHECK(FirstInvalidUtf8("ab\xF4\x90\x80\x80") == 2);  // above U+10FFFF
  CHECK(FirstInvalidUtf8("\x80") == 0);                // lone continuation
  CHECK(Printable("ok \xC3\xA9\n\xFF\x7F") == "ok \xC3\xA9\\x0a\\xff\\x7f");
  CHECK(Printable(std::string(1000, 'a')) == std::string(256, 'a') + "...");
  CHECK(Printable("\xC3\xA9", 1) == "\\xc3...");  // cut inside a sequence
  // nlohmann's message quotes the last bytes read, possibly half a UTF-8
  // sequence; the error must still be valid UTF-8.
  const auto broken = ParseStrictJson("{\"a\":\"F32\"\xC3\xA9}", kLimits);
  REQUIRE_FALSE(broken.ok());
  CHECK(FirstInvalidUtf8(Message(broken.status())) < 0);
  CHECK(ParseStrictJson("{\"a\":{\"b\":1},\"c\":{\"b\":2}}", kLimits).ok());
  const auto duplicate =
      ParseStrictOrderedJson("{\"a\":[{\"b\":1,\"b\":2}]}", kLimits);
  REQUIRE(absl::IsInvalidArgument(duplicate.status()));
  CHECK_THAT(Message(duplicate.status()), Contains("duplicate key 'b'"));
  const JsonLimits shallow{
      .max_bytes = 100, .max_bytes_name = "x", .max_depth = 2};
  CHECK(absl::IsInvalidArgument(ParseStrictJson("[[[1]]]", shallow).status()));
  CHECK(ParseStrictJson("[[1]]", shallow).ok());
  CHECK(absl::IsInvalidArgument(ParseStrictJson("1e999", kLimits).status()));
  CHECK_THAT(Message(ParseStrictJson(std::string(101, ' '), shallow).status()),
             Contains("101 bytes exceed x=100"));
  CHECK_THAT(Message(ParseStrictJson("\"\xFF\"", kLimits).status()),
             Contains("invalid UTF-8 at byte offset 1"));
}

TEST_CASE("strict JSON: 50,000 nested brackets are refused, not recursed",
          "[json]") {
  const std::string deep = std::string(50'000, '[') + std::string(50'000, ']');
  const auto parsed = ParseStrictOrderedJson(deep, kLimits);
  REQUIRE(absl::IsInvalidArgument(parsed.status()));
  CHECK_THAT(Message(parsed.status()),
             Contains("nested deeper than 64 levels"));
  const std::string objects = [] {
    std::string s;
    for (int i = 0; i < 50'000; ++i) s += "{\"a\":";
    return s + "1" + std::string(50'000, '}');
  }();
  CHECK(absl::IsInvalidArgument(ParseStrictJson(objects, kLimits).status()));
  // At the limit itself it parses, and the rendering walks it.
  const std::string at_limit = std::string(64, '[') + std::string(64, ']');
  const auto ok = ParseStrictOrderedJson(at_limit, kLimits);
  REQUIRE(ok.ok());
  CHECK(decision::PyJsonDumpsIndent2(*ok).size() > 64 * 2);
}

TEST_CASE("rendering a state stops at its byte bound", "[json]") {
  // 60 levels of indentation over 1,000 leaves: about 130 KB from 2 KB.
  std::string text = std::string(60, '[') + "0";
  for (int i = 0; i < 999; ++i) text += ",0";
  text += std::string(60, ']');
  const auto value = ParseStrictOrderedJson(text, kLimits);
  REQUIRE(value.ok());
  const std::string full = decision::PyJsonDumpsIndent2(*value);
  CHECK(full.size() > 100'000);
  CHECK_FALSE(decision::PyJsonDumpsIndent2(*value, 20'000).has_value());
  const auto fits = decision::PyJsonDumpsIndent2(*value, full.size());
  REQUIRE(fits.has_value());
  CHECK(*fits == full);
}

TEST_CASE("arrays from heads files: shapes are checked before use", "[json]") {
  const auto decode = [](const std::string& json) {
    return decision::DecodeArray(nlohmann::ordered_json::parse(json));
  };
  // 8 bytes: two float32 values.
  CHECK(decode(R"({"dtype":"float32","shape":[2],"b64":"AACAPwAAAEA="})").ok());
  CHECK_THAT(
      Message(
          decode(R"({"dtype":"float32","shape":[-1,-2],"b64":"AACAPwAAAEA="})")
              .status()),
      Contains("non-negative integers"));
  CHECK_THAT(
      Message(
          decode(
              R"({"dtype":"float32","shape":[4294967296,4294967296],"b64":"AACAPwAAAEA="})")
              .status()),
      Contains("more values than the 8 bytes"));
  CHECK_FALSE(
      decode(R"({"dtype":"float32","shape":[2.5],"b64":"AACAPwAAAEA="})").ok());
  CHECK_FALSE(
      decode(R"({"dtype":"float32","shape":[3],"b64":"AACAPwAAAEA="})").ok());
  CHECK_THAT(
      Message(decode(R"({"dtype":"int8","shape":[2],"b64":"AACAPwAAAEA="})")
                  .status()),
      Contains("expected float32 or float64"));
}

}  // namespace
}  // namespace mesa_anyjev::text
