// How the gateway backend's calls map onto POST /v1/completions: the body
// it sends for one prompt, and the label logprobs and top list it reads back
// from the answer's top_logprobs map (parsed by completion_answer.h). The
// transport, retries and breaker are GatewayBackend's.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/backend.h"
#include "common/text/bpe_tokenizer.h"

namespace mesa_anyjev::gateway {

// The logprob a label gets when the answer does not hold it.
inline constexpr double kMissingLogprob = -30.0;

// How label logprobs are read off an answer. kTokenIds: the request names
// the labels (vLLM's logprob_token_ids) and answers are keyed
// "token_id:<id>" (return_tokens_as_token_ids), so every label has its
// exact value. kTopK: labels are looked up by text in the top `logprobs`.
enum class LabelReadout { kTopK, kTokenIds };

// The prompt of the requests that only probe the server.
inline constexpr char kProbePrompt[] = "Answer Yes or No.";

// One greedy token after `prompt`, with that token's top `logprobs`: the
// body every request of the backend starts from.
std::string CompletionRequest(const std::string& model,
                              const std::string& prompt, int32_t logprobs);

// The request for one prompt's labels. kTokenIds asks for answers keyed by
// id and, where the call wants no top list (top_k 0), for the labels
// themselves by id in place of that list.
std::string LabelRequest(const std::string& model, const std::string& prompt,
                         int32_t logprobs, LabelReadout readout,
                         const std::vector<TokenId>& label_ids, int32_t top_k);

// The probe that tells whether a server takes logprob_token_ids: the two
// labels asked for by id. A server that does answers both under
// TokenIdKey.
std::string TokenIdsProbe(const std::string& model, TokenId yes, TokenId no);

// Each label's logprob in an answer's top_logprobs map, in the order of
// `label_ids`; nullopt for a label the answer does not hold.
std::vector<std::optional<double>> LabelLogprobs(
    const std::map<std::string, double>& top,
    const std::vector<TokenId>& label_ids, LabelReadout readout,
    const text::BpeTokenizer& tokenizer);

// The answer's top_logprobs map as ids, most likely first, at most `top_k`;
// a key that is no single token is dropped.
std::vector<TopToken> TopTokens(const std::map<std::string, double>& top,
                                int32_t top_k, LabelReadout readout,
                                const text::BpeTokenizer& tokenizer);

}  // namespace mesa_anyjev::gateway
