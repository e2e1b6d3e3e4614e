#include "server/model/qwen3_model.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "server/model/kernels/qk_norm_rope.h"
#include "server/model/kernels/rms_norm.h"
#include "server/model/kernels/silu_mul.h"
#include "server/model/stages.h"

namespace mesa_anyjev::model {

Qwen3Model::Qwen3Model(Qwen3Config config, Qwen3Weights weights, CpuGemm gemm,
                       config::KernelSet kernels)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      kernels_(kernels) {
  c10::InferenceMode guard;
  const at::Tensor& embed = weights_.embed_tokens;
  if (gemm == CpuGemm::kAuto) {
    gemm = CpuGemm::kAten;
    if (embed.device().is_cpu() && embed.scalar_type() == at::kFloat &&
        !weights_.layers.empty()) {
      const Qwen3LayerWeights& w0 = weights_.layers.front();
      gemm = ChooseCpuGemm(at::cat({w0.gate_proj, w0.up_proj}, 0), &gemm_note_);
    }
  }
  for (Qwen3LayerWeights& w : weights_.layers) {
    linears_.push_back(
        {PackedLinear(at::cat({w.q_proj, w.k_proj, w.v_proj}, 0), gemm),
         PackedLinear(w.o_proj, gemm),
         PackedLinear(at::cat({w.gate_proj, w.up_proj}, 0), gemm),
         PackedLinear(w.down_proj, gemm)});
    w.q_proj = w.k_proj = w.v_proj = w.o_proj = at::Tensor();
    w.gate_proj = w.up_proj = w.down_proj = at::Tensor();
  }
  lm_head_ = PackedLinear(weights_.lm_head, gemm);
  if (lm_head_.packed()) {
    gemm_ = CpuGemm::kOneDnn;
    if (weights_.lm_head.is_same(weights_.embed_tokens)) {
      extra_weight_bytes_ =
          weights_.lm_head.numel() *
          static_cast<int64_t>(weights_.lm_head.element_size());
    }
  }
  weights_.lm_head = at::Tensor();
  const int64_t d = config_.head_dim;
  inv_freq_ = 1.0 / at::pow(config_.rope_theta,
                            at::arange(0, d, 2, at::kFloat).to(device()) /
                                static_cast<double>(d));
}

KvPool Qwen3Model::NewKvPool(int64_t slots) const {
  return KvPool(config_.num_hidden_layers, slots, config_.num_key_value_heads,
                config_.head_dim,
                at::TensorOptions().dtype(dtype()).device(device()));
}

int64_t Qwen3Model::KvBytesPerToken() const {
  return 2 * config_.num_hidden_layers * config_.num_key_value_heads *
         config_.head_dim * static_cast<int64_t>(c10::elementSize(dtype()));
}

at::Tensor Qwen3Model::SelfAttention(int32_t index, const at::Tensor& x,
                                     const Context& context) const {
  const Qwen3LayerWeights& w = weights_.layers[static_cast<size_t>(index)];
  const int64_t n = x.size(0), d = config_.head_dim;
  const int64_t heads = config_.num_attention_heads;
  const int64_t kv = config_.num_key_value_heads;
  const double eps = config_.rms_norm_eps;
  // [N, (heads + 2 kv) * D] -> q [N, heads, D], k and v [N, kv, D], q and k
  // normalised per head, then rotated at each token's position.
  const LayerLinears& linear = linears_[static_cast<size_t>(index)];
  Stages stage("mesa.qkv_proj");
  const at::Tensor qkv = linear.qkv_proj(x);
  KvPool& pool = *context.pool;
  stage.Next("mesa.qk_norm_rotary");
  // Our kernel writes k and v into the pool as it rotates them; the ATen
  // path leaves that to the pool's Update.
  const kernels::KvTarget target{context.pass->writes.slots, pool.keys(index),
                                 pool.values(index)};
  const bool fused = kernels_.qk_norm_rope;
  const kernels::QkvHeads heads_of =
      kernels::QkNormRope(qkv, heads, kv, w.q_norm, w.k_norm, eps,
                          context.rotary, fused ? &target : nullptr, fused);
  stage.Next("mesa.kv_write");
  if (fused) {
    pool.ApplyCopies(index, context.pass->writes);
  } else {
    pool.Update(index, context.pass->writes, heads_of.k, heads_of.v);
  }
  const at::Tensor& q = heads_of.q;
  stage.Next("mesa.attention");
  const at::Tensor out =
      (*context.pass->attention)(q, pool.keys(index), pool.values(index),
                                 1.0 / std::sqrt(static_cast<double>(d)));
  // [N, heads, D] -> [N, heads * D] -> [N, H]
  stage.Next("mesa.o_proj");
  return linear.o_proj(out.reshape({n, heads * d}));
}

at::Tensor Qwen3Model::Layer(int32_t index, const at::Tensor& x,
                             const Context& context) const {
  const Qwen3LayerWeights& w = weights_.layers[static_cast<size_t>(index)];
  const double eps = config_.rms_norm_eps;
  // The residual adds and the gate land in place in fresh outputs: the
  // same values, and a pass allocates (and touches) a third less.
  Stages stage("mesa.input_norm");
  const at::Tensor normed =
      kernels::RmsNorm(x, w.input_layernorm, eps, kernels_.add_rms_norm);
  const at::Tensor attended = SelfAttention(index, normed, context);
  // x += attended, in place (x is this pass's, no one else's), then its
  // norm: one kernel when fused.
  stage.Next("mesa.post_norm");
  const at::Tensor n = kernels::AddRmsNorm(
      attended, x, w.post_attention_layernorm, eps, kernels_.add_rms_norm);
  const at::Tensor& h = x;
  const LayerLinears& linear = linears_[static_cast<size_t>(index)];
  stage.Next("mesa.gate_up_proj");
  const at::Tensor gate_up = linear.gate_up_proj(n);
  stage.Next("mesa.activation");
  const at::Tensor activated = kernels::SiluMul(gate_up, kernels_.silu_mul);
  stage.Next("mesa.down_proj");
  const at::Tensor down = linear.down_proj(activated);
  stage.Next("mesa.residual_add");
  return down.add_(h);
}

ForwardResult Qwen3Model::Forward(const PackedPass& pass, KvPool& pool) const {
  c10::InferenceMode guard;
  const int32_t n = static_cast<int32_t>(config_.num_hidden_layers);
  int32_t deepest = pass.final_norm ? n : 0;
  for (int32_t layer : pass.layers) deepest = std::max(deepest, layer);
  TORCH_CHECK(deepest <= n, "the pass asks for layer ", deepest, " of ", n);
  // Rotary tables in float32 as transformers computes them, then in the
  // model's dtype.
  Context context;
  Stages stage("mesa.rotary_tables");
  context.rotary = kernels::MakeRotary(pass.positions, inv_freq_, dtype(),
                                       /*tables=*/!kernels_.qk_norm_rope);
  context.pass = &pass;
  context.pool = &pool;

  ForwardResult result;
  std::vector<at::Tensor> captured(pass.layers.size());
  auto capture = [&](int32_t layer, const at::Tensor& rows) {
    for (size_t i = 0; i < pass.layers.size(); ++i) {
      if (pass.layers[i] == layer) captured[i] = rows;
    }
  };
  stage.Next("mesa.embedding");
  at::Tensor x = at::embedding(weights_.embed_tokens, pass.tokens);  // [N, H]
  stage.Next("mesa.gather_outputs");
  capture(0, x.index_select(0, pass.outputs));
  for (int32_t i = 0; i < deepest; ++i) {
    stage.End();
    x = Layer(i, x, context);
    stage.Next("mesa.gather_outputs");
    if (i + 1 < n) capture(i + 1, x.index_select(0, pass.outputs));
  }
  result.layers_run = deepest;
  if (deepest == n) {
    const at::Tensor rows = x.index_select(0, pass.outputs);
    stage.Next("mesa.final_norm");
    result.final = kernels::RmsNorm(rows, weights_.norm, config_.rms_norm_eps,
                                    kernels_.add_rms_norm);
    capture(n, result.final);
  }
  stage.Next("mesa.gather_outputs");
  if (!captured.empty()) {
    for (at::Tensor& c : captured) c = c.to(at::kFloat);
    result.hidden = at::stack(captured, 1);
  } else {
    result.hidden =
        at::empty({pass.outputs.size(0), 0, config_.hidden_size}, at::kFloat);
  }
  return result;
}

at::Tensor Qwen3Model::LogSoftmax(const at::Tensor& final) const {
  c10::InferenceMode guard;
  Stages stage("mesa.lm_head");
  const at::Tensor logits = lm_head_(final).to(at::kFloat);
  stage.Next("mesa.log_softmax");
  return at::log_softmax(logits, -1);
}

}  // namespace mesa_anyjev::model
