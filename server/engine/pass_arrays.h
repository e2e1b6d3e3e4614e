// A planned pass as the forward's arrays (tokens, positions, KV slots, the
// rows whose outputs are owed, their label ids), staged for the one
// host-to-device copy, and the forward's outputs read back to the host. Only
// qwen3_backend.cc includes it: it carries ATen types.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "common/backend.h"
#include "server/engine/pass_planner.h"
#include "server/model/graph_pass.h"
#include "server/model/pass_upload.h"
#include "server/model/qwen3_model.h"

namespace mesa_anyjev::engine {

// A planned pass flattened for the forward (model::PassArrays: every
// segment's tokens in order with their positions and the slots their keys
// and values go to, the rows whose outputs are owed, and with logprobs each
// row's label ids, so lm_head's rows are read on the device and only what
// was asked for comes back), with the outputs' ids.
struct FlatPass : model::PassArrays {
  std::vector<int64_t> ids;
};

// Each output's label ids (by output id), for Logprobs; none for hidden
// states.
using LabelsOf = std::vector<const std::vector<TokenId>*>;

// `labels_of`: null for hidden states. Rows shorter than the widest repeat
// their last label id (an empty row: id 0).
FlatPass Flatten(const Pass& pass, const LabelsOf* labels_of);

// What a pass gives back, on the host: hidden states [R, layers, H], or
// log-probabilities at each row's labels [R, width] and the top_k.
struct PassOutputs {
  at::Tensor hidden, labels, top_values, top_ids;
};

// What is read off the forward's result on the device, then copied.
PassOutputs ReadOutputs(const model::Qwen3Model& m,
                        const model::ForwardResult& result,
                        const at::Tensor& labels, int32_t top_k);

// The pass's arrays staged in `upload` (the attention plan stages its own
// beside them); views of the one copy once uploaded.
struct StagedPass {
  model::PassUpload::Handle tokens, positions, rows, slots, copy_from, copy_to,
      labels;
};

StagedPass Stage(const FlatPass& flat, model::PassUpload& upload);

model::PackedPass Pack(const StagedPass& staged,
                       const model::PassUpload& upload);

}  // namespace mesa_anyjev::engine
