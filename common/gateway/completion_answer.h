// Reading a /v1/completions answer: what the gateway backend takes from it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace mesa_anyjev::gateway {

// choices[0].logprobs.top_logprobs[0] of a /v1/completions answer (token
// text -> logprob; entries that are not numbers are dropped), or INTERNAL
// quoting the start of the body.
absl::StatusOr<std::map<std::string, double>> ParseTopLogprobs(
    std::string_view body);

// A label's logprob in one top_logprobs map (token text -> logprob): under
// its decoded text, else under its raw spelling ("ĠA"); nullopt = missing.
std::optional<double> LookupLabel(const std::map<std::string, double>& top,
                                  const std::string& decoded,
                                  const std::string& raw);

// A token's key in an answer with return_tokens_as_token_ids: "token_id:<id>".
std::string TokenIdKey(int32_t id);
// The id of such a key, or nullopt for any other key.
std::optional<int32_t> TokenIdOfKey(std::string_view key);

}  // namespace mesa_anyjev::gateway
