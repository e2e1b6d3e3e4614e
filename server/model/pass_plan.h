// One forward pass as the engine's planner makes it and the model runner
// runs it: the one form of a pass between the two (server/engine/
// pass_planner.h writes it, server/model/model_runner.h reads it). Plain
// C++, so both sides are unit tested without a model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/model/pass_keys.h"

namespace mesa_anyjev::model {

// A pass's arrays as the forward reads them: every segment's tokens in
// order with their positions and the pool slots their keys and values go
// to; the rows whose outputs are owed; with logprobs each row's label ids
// (rows shorter than the widest repeat their last id; an empty row: id 0),
// so lm_head's rows are read on the device and only what was asked for
// comes back; the pool slots copied before attention (PassLease::CopyRun).
struct PassArrays {
  std::vector<int64_t> tokens, positions, slots;  // [N]
  std::vector<int64_t> rows;                      // [R] rows with outputs
  std::vector<int64_t> labels;                    // [R, label_width]
  int64_t label_width = 0;
  std::vector<int64_t> copy_from, copy_to;
};

// What a pass reads: log-probabilities (at each row's labels and the
// top_k, after the final norm) or hidden states (after `layers`).
struct PassReading {
  bool logprobs = false;
  int32_t top_k = 0;
  std::vector<int32_t> layers;  // 0 = embeddings .. n = after the final norm
  bool final_norm = false;
  int32_t layers_run = 0;  // transformer layers the pass runs
};

struct PassPlan {
  PassKeys keys;  // what each segment attends to (aligned with its tokens)
  PassArrays arrays;
  PassReading read;
};

// What a pass gives back, on the host, row r for arrays.rows[r]:
// log-probabilities at its labels [R, label_width] and its top_k values
// and ids [R, top_k], or hidden states [R, layers, hidden].
struct PassOutput {
  std::vector<float> labels;
  std::vector<float> top_values;
  std::vector<int64_t> top_ids;
  std::vector<float> hidden;
  // What the runner did that the log should say (a CUDA graph's shape
  // turned off after its capture failed).
  std::vector<std::string> notes;
};

}  // namespace mesa_anyjev::model
