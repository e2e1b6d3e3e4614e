// What a loaded ModelRunner holds (model_runner.h): shared by its two
// halves, runner_load.cc (the load, which resolves every path once) and
// runner_pass.cc (one pass). Only they include it: it carries ATen types.
#pragma once

#include <memory>

#include "server/model/kv_pool.h"
#include "server/model/model_runner.h"
#include "server/model/pass_graphs.h"
#include "server/model/qwen3_model.h"

namespace mesa_anyjev::model {

struct ModelRunner::State {
  std::unique_ptr<Qwen3Model> model;
  // Every pass's keys and values and the prefix cache's, allocated once;
  // with graphs one block more, the scratch a padded pass's pads use.
  KvPool pool;
  // Small logprobs passes replayed from CUDA graphs (null when off).
  std::unique_ptr<PassGraphs> graphs;
  RunnerPaths paths;
  ModelShape shape;
  KvGeometry kv;
  int64_t batch_tokens = 0;  // engine.batch_tokens, named in a failure
};

}  // namespace mesa_anyjev::model
