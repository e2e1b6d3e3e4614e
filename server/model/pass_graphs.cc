#include "server/model/pass_graphs.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "server/model/attention.h"
#include "server/model/cuda/cuda_calls.h"
#include "server/model/qwen3_model.h"

namespace mesa_anyjev::model {

struct PassGraphs::Entry {
  GraphShape shape;
  GraphLayout layout;
  at::Tensor buffer;  // [layout.size] int64 on the device: the static inputs
  // Static outputs: [R, L] float32, [R, top_k] float32 and int64.
  at::Tensor labels, top_values, top_ids;
  std::unique_ptr<cuda::Graph> graph;  // CUDA only
};

PassGraphs::PassGraphs(const Qwen3Model& model, KvPool& pool,
                       int64_t scratch_slot, int64_t max_tokens)
    : model_(model),
      pool_(pool),
      scratch_slot_(scratch_slot),
      max_tokens_(max_tokens) {}

PassGraphs::~PassGraphs() = default;

void PassGraphs::Body(Entry& e) const {
  const GraphShape& s = e.shape;
  const GraphLayout& l = e.layout;
  const at::Tensor& b = e.buffer;
  PackedPass packed;
  packed.tokens = b.narrow(0, l.tokens, s.tokens);
  packed.positions = b.narrow(0, l.positions, s.tokens);
  packed.writes.slots = b.narrow(0, l.slots, s.tokens);
  packed.writes.copy_from = b.narrow(0, l.copy_from, s.tokens);
  packed.writes.copy_to = b.narrow(0, l.copy_to, s.tokens);
  packed.outputs = b.narrow(0, l.rows, s.rows);
  const AttentionPlan plan = AttentionPlan::VarlenOn(
      b.narrow(0, l.cu_q, s.tokens + 2), b.narrow(0, l.cu_k, s.tokens + 2),
      b.narrow(0, l.keys, s.keys), s.tokens, s.keys);
  packed.attention = &plan;
  packed.final_norm = true;
  const ForwardResult result = model_.Forward(packed, pool_);
  const at::Tensor logprobs = model_.LogSoftmax(result.final);
  e.labels = logprobs.gather(
      1, b.narrow(0, l.labels, s.rows * s.labels).view({s.rows, s.labels}));
  if (s.top_k > 0) {
    std::tie(e.top_values, e.top_ids) = logprobs.topk(s.top_k);
  }
}

PassGraphs::Entry& PassGraphs::EntryFor(const GraphShape& shape) {
  for (const auto& e : entries_) {
    if (e->shape == shape) return *e;
  }
  auto e = std::make_unique<Entry>();
  e->shape = shape;
  e->layout = GraphLayout::Of(shape);
  const at::Device device = model_.device();
  const std::vector<int64_t> pads = PadsOnly(shape, scratch_slot_);
  e->buffer = at::tensor(pads, at::kLong).to(device);
  if (device.is_cuda()) {
    // Graphs of every shape share one memory pool, safe as they replay one
    // at a time and their static outputs stay held.
    e->graph = cuda::Graph::Capture(device.index(), [&] { Body(*e); });
  }
  entries_.push_back(std::move(e));
  return *entries_.back();
}

std::optional<PassGraphs::Outputs> PassGraphs::Run(
    const PassArrays& pass, const VarlenLayout& attention, int32_t top_k) {
  const std::optional<GraphShape> shape =
      FitGraphShape(pass, attention, max_tokens_, top_k);
  if (!shape.has_value()) return std::nullopt;
  c10::InferenceMode guard;
  Entry& e = EntryFor(*shape);
  // One copy of the padded arrays into the static buffer, then the graph
  // (or, on the CPU, the body itself).
  const std::vector<int64_t> padded =
      PadForGraph(pass, attention, *shape, scratch_slot_);
  const bool cuda = e.buffer.is_cuda();
  at::Tensor host = at::empty({e.layout.size},
                              at::TensorOptions(at::kLong).pinned_memory(cuda));
  std::copy(padded.begin(), padded.end(), host.data_ptr<int64_t>());
  e.buffer.copy_(host, /*non_blocking=*/true);
  if (cuda) {
    e.graph->Replay();
  } else {
    Body(e);
  }
  const int64_t rows = static_cast<int64_t>(pass.rows.size());
  Outputs out;
  out.labels = e.labels.narrow(0, 0, rows).narrow(1, 0, pass.label_width).cpu();
  if (top_k > 0) {
    out.top_values = e.top_values.narrow(0, 0, rows).cpu();
    out.top_ids = e.top_ids.narrow(0, 0, rows).cpu();
  }
  return out;
}

}  // namespace mesa_anyjev::model
