// The /v1/completions mapping (see completions_mapping.h).
#include "common/gateway/completions_mapping.h"

#include <algorithm>
#include <set>

#include "absl/status/statusor.h"
#include "common/gateway/completion_answer.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::gateway {
namespace {

nlohmann::json Completion(const std::string& model, const std::string& prompt,
                          int32_t logprobs) {
  return {{"model", model},
          {"prompt", prompt},
          {"max_tokens", 1},
          {"temperature", 0.0},
          {"logprobs", logprobs}};
}

// A key of a top_k answer as a token id: its raw spelling, else a text
// that encodes to one id.
std::optional<TokenId> IdOfText(const std::string& key,
                                const text::BpeTokenizer& tokenizer) {
  if (const TokenId id = tokenizer.TokenToId(key); id >= 0) return id;
  absl::StatusOr<std::vector<TokenId>> ids = tokenizer.Encode(key);
  if (!ids.ok() || ids->size() != 1) return std::nullopt;
  return (*ids)[0];
}

}  // namespace

std::string CompletionRequest(const std::string& model,
                              const std::string& prompt, int32_t logprobs) {
  return Completion(model, prompt, logprobs).dump();
}

std::string LabelRequest(const std::string& model, const std::string& prompt,
                         int32_t logprobs, LabelReadout readout,
                         const std::vector<TokenId>& label_ids, int32_t top_k) {
  nlohmann::json request = Completion(model, prompt, logprobs);
  if (readout == LabelReadout::kTokenIds) {
    request["return_tokens_as_token_ids"] = true;
    // Asking for the labels by id replaces the natural top list, so a call
    // that wants that list reads its labels from it, by id.
    if (top_k == 0 && !label_ids.empty()) {
      request["logprobs"] = 1;
      request["logprob_token_ids"] =
          std::set<TokenId>(label_ids.begin(), label_ids.end());
    }
  }
  return request.dump();
}

std::string TokenIdsProbe(const std::string& model, TokenId yes, TokenId no) {
  nlohmann::json request = Completion(model, kProbePrompt, 1);
  request["logprob_token_ids"] = {yes, no};
  request["return_tokens_as_token_ids"] = true;
  return request.dump();
}

std::vector<std::optional<double>> LabelLogprobs(
    const std::map<std::string, double>& top,
    const std::vector<TokenId>& label_ids, LabelReadout readout,
    const text::BpeTokenizer& tokenizer) {
  std::vector<std::optional<double>> values;
  values.reserve(label_ids.size());
  for (TokenId id : label_ids) {
    if (readout == LabelReadout::kTokenIds) {
      const auto it = top.find(TokenIdKey(id));
      values.push_back(it != top.end() ? std::optional(it->second)
                                       : std::nullopt);
      continue;
    }
    const TokenId single[] = {id};
    absl::StatusOr<std::string> decoded = tokenizer.Decode(single);
    const std::string raw(tokenizer.IdToToken(id));
    values.push_back(LookupLabel(top, decoded.ok() ? *decoded : raw, raw));
  }
  return values;
}

std::vector<TopToken> TopTokens(const std::map<std::string, double>& top,
                                int32_t top_k, LabelReadout readout,
                                const text::BpeTokenizer& tokenizer) {
  std::vector<TopToken> tokens;
  for (const auto& [key, logprob] : top) {
    const std::optional<TokenId> id = readout == LabelReadout::kTokenIds
                                          ? TokenIdOfKey(key)
                                          : IdOfText(key, tokenizer);
    if (id.has_value()) tokens.push_back(TopToken{*id, logprob});
  }
  std::sort(tokens.begin(), tokens.end(),
            [](const TopToken& a, const TopToken& b) {
              return a.logprob > b.logprob;
            });
  if (static_cast<int32_t>(tokens.size()) > top_k) tokens.resize(top_k);
  return tokens;
}

}  // namespace mesa_anyjev::gateway
