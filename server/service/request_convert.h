// Proto <-> plain types for the Inference service, with every request limit
// checked here, before any work: a bad field gets INVALID_ARGUMENT naming the
// field, the limit and the value given.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/auth/tenant.h"
#include "common/backend.h"
#include "common/config/config.h"
#include "mesa/anyjev/v1/inference.pb.h"

namespace mesa_anyjev::service {

namespace v1 = ::mesa::anyjev::v1;

struct ParsedGroups {
  std::vector<PromptGroup> groups;
  int64_t n_prompts = 0;
  int64_t n_tokens = 0;  // prefix once per group + every suffix
};

absl::StatusOr<std::vector<std::vector<TokenId>>> ParseTokenizeRequest(
    const v1::TokenizeRequest& request, const text::Tokenizer& tokenizer,
    const config::LimitsConfig& limits);

// Prompt token ids must be the tokenizer's; label ids may be any row of the
// model's output layer (`label_vocab`, which can be larger: Qwen3 pads its
// 151,669 tokens to 151,936 rows). label_vocab 0: label_ids are ignored
// (HiddenStates).
absl::StatusOr<ParsedGroups> ParseGroups(
    const google::protobuf::RepeatedPtrField<v1::PromptGroup>& groups,
    const text::Tokenizer& tokenizer, const config::LimitsConfig& limits,
    int32_t label_vocab);

absl::Status CheckTopK(int32_t top_k, int32_t vocab_size,
                       const config::LimitsConfig& limits);

// Resolves and checks the requested layers; also refuses a response that
// would exceed the send cap.
absl::StatusOr<std::vector<int32_t>> ParseLayers(
    const google::protobuf::RepeatedField<int32_t>& layers,
    const Capabilities& capabilities, const config::LimitsConfig& limits,
    int64_t n_prompts, int64_t max_send_bytes);

void FillLogprobs(const std::vector<std::vector<PromptLogprobs>>& result,
                  v1::LogprobsResponse* response);
void FillHiddenStates(const HiddenStatesResult& result,
                      v1::HiddenStatesResponse* response);
void FillModelInfo(const ModelIdentity& identity,
                   const Capabilities& capabilities,
                   const config::LimitsConfig& limits, v1::ModelInfo* info);
// The model's device (when local) and the host's MemAvailable (when read).
void FillDeviceInfo(const std::optional<DeviceInfo>& device,
                    const absl::StatusOr<int64_t>& mem_available,
                    v1::ModelInfo* info);
// The caller as its token makes it (`tenant` null when auth is off) and the
// class this call ran at.
void FillCallerInfo(bool auth, const auth::Tenant* tenant, Priority priority,
                    v1::ModelInfo* info);

}  // namespace mesa_anyjev::service
