// Reading a /v1/completions answer (see completion_answer.h).
#include "common/gateway/completion_answer.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/text/strict_json.h"
#include "common/text/utf8.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::gateway {
namespace {

constexpr size_t kBodyExcerpt = 300;  // of a body quoted in an error

}  // namespace

absl::StatusOr<std::map<std::string, double>> ParseTopLogprobs(
    std::string_view body) {
  const auto json = text::ParseStrictJson(body, {});
  if (json.ok()) {
    try {
      const nlohmann::json& first =
          json->at("choices").at(0).at("logprobs").at("top_logprobs").at(0);
      if (first.is_object()) {
        std::map<std::string, double> top;
        for (const auto& [key, value] : first.items()) {
          if (value.is_number()) top[key] = value.get<double>();
        }
        return top;
      }
    } catch (const nlohmann::json::exception&) {
      // refused below, like any other shape
    }
  }
  return absl::InternalError(absl::StrCat(
      "gateway answer has no choices[0].logprobs.top_logprobs[0]: ",
      text::Printable(body, kBodyExcerpt)));
}

std::optional<double> LookupLabel(const std::map<std::string, double>& top,
                                  const std::string& decoded,
                                  const std::string& raw) {
  if (auto it = top.find(decoded); it != top.end()) return it->second;
  if (auto it = top.find(raw); it != top.end()) return it->second;
  return std::nullopt;
}

std::string TokenIdKey(int32_t id) { return absl::StrCat("token_id:", id); }

std::optional<int32_t> TokenIdOfKey(std::string_view key) {
  // Debian's Abseil takes absl::string_view, not std::string_view.
  absl::string_view rest(key.data(), key.size());
  if (!absl::ConsumePrefix(&rest, "token_id:")) return std::nullopt;
  int32_t id = -1;
  if (!absl::SimpleAtoi(rest, &id) || id < 0) return std::nullopt;
  return id;
}

}  // namespace mesa_anyjev::gateway
