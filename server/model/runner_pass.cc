// ModelRunner's pass: one function per named stage of the pass anatomy
// (stages.h; docs/model.md, "Pass anatomy"), so a row of its table points
// here: Plan ("mesa.plan"), InputsToDevice ("mesa.inputs_to_device"), Graph
// ("mesa.graph"), the forward's own stages (qwen3_model.cc), Outputs
// ("mesa.outputs") and OutputsToHost ("mesa.outputs_to_host").
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cstring>
#include <tuple>

#include "server/model/attention.h"
#include "server/model/attention_buckets.h"
#include "server/model/pass_upload.h"
#include "server/model/runner_state.h"
#include "server/model/stages.h"

namespace mesa_anyjev::model {
namespace {

// The pass's arrays staged for the one host-to-device copy (the attention
// plan stages its own beside them), and read as views of it once there.
struct Staged {
  PassUpload upload;
  PassUpload::Handle tokens, positions, rows, slots, copy_from, copy_to, labels;
};

// Its outputs on the device, before they come back.
struct DeviceOutputs {
  at::Tensor hidden, labels, top_values, top_ids;
};

std::vector<float> FloatsOf(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  const float* p = c.data_ptr<float>();
  return std::vector<float>(p, p + c.numel());
}

std::vector<int64_t> LongsOf(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

// mesa.plan: the arrays and the attention's gathers staged on the host.
AttentionPlan Plan(const ModelRunner::State& s, const PassPlan& plan,
                   Staged& staged) {
  Stages stage("mesa.plan");
  const PassArrays& a = plan.arrays;
  PassUpload& up = staged.upload;
  staged.tokens = up.Stage(a.tokens);
  staged.positions = up.Stage(a.positions);
  staged.rows = up.Stage(a.rows);
  staged.slots = up.Stage(a.slots);
  staged.copy_from = up.Stage(a.copy_from);
  staged.copy_to = up.Stage(a.copy_to);
  staged.labels = up.Stage(a.labels);
  return AttentionPlan(s.paths.route, plan.keys, s.model->device(),
                       s.model->dtype(), up);
}

// mesa.inputs_to_device: one copy, then the forward's views of it.
PackedPass InputsToDevice(const ModelRunner::State& s, Staged& staged,
                          AttentionPlan& attention) {
  Stages stage("mesa.inputs_to_device");
  PassUpload& up = staged.upload;
  up.Upload(s.model->device());
  attention.Bind(up);
  PackedPass packed;
  packed.tokens = up.View(staged.tokens);
  packed.positions = up.View(staged.positions);
  packed.outputs = up.View(staged.rows);
  packed.writes.slots = up.View(staged.slots);
  if (staged.copy_from.size > 0) {
    packed.writes.copy_from = up.View(staged.copy_from);
    packed.writes.copy_to = up.View(staged.copy_to);
  }
  packed.attention = &attention;
  return packed;
}

// mesa.outputs: lm_head and the log-softmax over the output rows, a chunk
// of rows at a time (their float32 logits stay bounded), read at each
// row's labels and the top_k on the device.
DeviceOutputs Outputs(const ModelRunner::State& s, const ForwardResult& result,
                      const at::Tensor& labels, int32_t top_k) {
  Stages stage("mesa.outputs");
  const int64_t rows = result.final.size(0);
  DeviceOutputs out;
  std::vector<at::Tensor> label_parts, value_parts, id_parts;
  // A pass may read no rows (its suffixes wait for the next): one empty
  // chunk then keeps the outputs' shapes.
  for (int64_t r0 = 0; r0 < rows || r0 == 0; r0 += s.paths.chunk_rows) {
    const int64_t n = std::min(s.paths.chunk_rows, rows - r0);
    const at::Tensor logprobs =
        s.model->LogSoftmax(result.final.narrow(0, r0, n));
    label_parts.push_back(logprobs.gather(1, labels.narrow(0, r0, n)));
    if (top_k > 0) {
      auto [values, ids] = logprobs.topk(top_k);
      value_parts.push_back(values);
      id_parts.push_back(ids);
    }
  }
  out.labels = label_parts.size() == 1 ? label_parts[0] : at::cat(label_parts);
  if (top_k > 0) {
    out.top_values =
        value_parts.size() == 1 ? value_parts[0] : at::cat(value_parts);
    out.top_ids = id_parts.size() == 1 ? id_parts[0] : at::cat(id_parts);
  }
  return out;
}

// mesa.outputs_to_host: what was asked for, and only that, comes back.
PassOutput OutputsToHost(const DeviceOutputs& device) {
  Stages stage("mesa.outputs_to_host");
  PassOutput out;
  if (device.hidden.defined()) out.hidden = FloatsOf(device.hidden.cpu());
  if (device.labels.defined()) out.labels = FloatsOf(device.labels.cpu());
  if (device.top_values.defined()) {
    out.top_values = FloatsOf(device.top_values.cpu());
    out.top_ids = LongsOf(device.top_ids.cpu());
  }
  return out;
}

// mesa.graph: a small logprobs pass from its shape's CUDA graph; nullopt
// when graphs are off, the pass is not one, or it fits no shape.
std::optional<PassOutput> Graph(ModelRunner::State& s, const PassPlan& plan) {
  if (s.graphs == nullptr || !plan.read.logprobs) return std::nullopt;
  Stages stage("mesa.graph");
  const VarlenLayout sequences =
      PlanAttentionBuckets(AttentionRoute::kVarlen, plan.keys).varlen;
  std::optional<PassGraphs::Outputs> replayed =
      s.graphs->Run(plan.arrays, sequences, plan.read.top_k);
  if (!replayed.has_value()) return std::nullopt;
  stage.End();
  return OutputsToHost(
      {{}, replayed->labels, replayed->top_values, replayed->top_ids});
}

// The pass through the forward as it comes.
PassOutput Eager(ModelRunner::State& s, const PassPlan& plan) {
  Staged staged;
  AttentionPlan attention = Plan(s, plan, staged);
  PackedPass packed = InputsToDevice(s, staged, attention);
  packed.layers = plan.read.layers;
  packed.final_norm = plan.read.final_norm;
  const ForwardResult result = s.model->Forward(packed, s.pool);
  if (!plan.read.logprobs) return OutputsToHost({result.hidden, {}, {}, {}});
  const int64_t rows = static_cast<int64_t>(plan.arrays.rows.size());
  const at::Tensor labels =
      staged.upload.View(staged.labels).view({rows, plan.arrays.label_width});
  return OutputsToHost(Outputs(s, result, labels, plan.read.top_k));
}

}  // namespace

std::shared_ptr<void> ModelRunner::OpenStage(const char* name) {
  return std::make_shared<Stages>(name);
}

absl::StatusOr<PassOutput> ModelRunner::RunPass(
    const PassPlan& plan, std::optional<InjectedFault> fault) {
  State& s = *state_;
  Stages stage("mesa.pass");
  // libtorch reports errors (a device out of memory, say) as exceptions;
  // they end the calls in this pass (pass_failure.h).
  try {
    if (fault.has_value()) ThrowInjected(*fault);
    c10::InferenceMode guard;
    std::optional<PassOutput> out = Graph(s, plan);
    if (!out.has_value()) out = Eager(s, plan);
    if (s.graphs != nullptr) out->notes = s.graphs->TakeNotes();
    return *std::move(out);
  } catch (const std::exception& e) {
    return PassFailure(
        e,
        {static_cast<int64_t>(plan.arrays.tokens.size()),
         static_cast<int64_t>(plan.keys.segments.size()), s.batch_tokens},
        s.paths.device_name);
  }
}

}  // namespace mesa_anyjev::model
