// Small logprobs passes replayed from CUDA graphs (engine.cuda_graph_tokens):
// a pass that fits a shape of graph_pass.h is padded to it, its arrays are
// copied in one copy into that shape's static buffer, and the graph captured
// for the shape (on first use, after one eager warm-up run on the capture
// stream) replays the forward, the final norm, lm_head, the log-softmax and
// its reading at the labels and the top_k. The launches of ~2,000 kernels
// become one. On the CPU the same padded body runs eagerly instead, so the
// padding is checked against the unpadded pass where there is no GPU
// (tests/server/pass_graphs_test.cc); only capture and replay are CUDA's.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/model/cuda/cuda_calls.h"
#include "server/model/graph_pass.h"
#include "server/model/kv_pool.h"

namespace mesa_anyjev::model {

class Qwen3Model;

class PassGraphs {
 public:
  // How a shape's body is captured: cuda::Graph::Capture on the model's
  // device by default, on CUDA only; a test gives its own, run on any
  // device.
  using Capture = std::function<std::unique_ptr<cuda::Graph>(
      int device, const std::function<void()>& body)>;

  // `scratch_slot`: a pool slot no block holds, where pads write and read.
  PassGraphs(const Qwen3Model& model, KvPool& pool, int64_t scratch_slot,
             int64_t max_tokens, Capture capture = nullptr);
  ~PassGraphs();
  PassGraphs(const PassGraphs&) = delete;
  PassGraphs& operator=(const PassGraphs&) = delete;

  // The pass's rows on the host: log-probabilities at each row's
  // `pass.label_width` labels [R, width], and the top_k values and ids
  // [R, top_k] (undefined when top_k is 0).
  struct Outputs {
    at::Tensor labels, top_values, top_ids;
  };
  // nullopt when the pass fits no shape, or its shape's capture failed:
  // run it eagerly. A capture that throws is ended (cuda_calls.h) and its
  // shape runs eagerly from then on; TakeNotes says so once.
  std::optional<Outputs> Run(const PassArrays& pass,
                             const VarlenLayout& attention, int32_t top_k);
  // What happened since the last call that the log should say.
  std::vector<std::string> TakeNotes();

  int64_t max_tokens() const { return max_tokens_; }
  // Shapes captured so far (CUDA), or bodies run (CPU).
  int64_t captured() const { return static_cast<int64_t>(entries_.size()); }
  // Shapes whose capture failed: they run eagerly.
  int64_t refused() const { return static_cast<int64_t>(refused_.size()); }

 private:
  struct Entry;
  // The shape's entry, captured on first use; null when its capture failed.
  Entry* EntryFor(const GraphShape& shape);
  // The forward and its readings over `entry`'s static buffer.
  void Body(Entry& entry) const;

  const Qwen3Model& model_;
  KvPool& pool_;
  const int64_t scratch_slot_;
  const int64_t max_tokens_;
  Capture capture_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<GraphShape> refused_;
  std::vector<std::string> notes_;
};

}  // namespace mesa_anyjev::model
