#include "server/model/qwen3_model.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace mesa_anyjev::model {
namespace {

// transformers' Qwen3RMSNorm: float32 statistics, weight applied in the
// input's dtype.  x: [..., d], weight: [d].
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor variance = x32.pow(2).mean(-1, /*keepdim=*/true);
  return weight * (x32 * at::rsqrt(variance + eps)).to(x.scalar_type());
}

// [..., D] -> [..., D] with halves swapped and the first negated.
at::Tensor RotateHalf(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

// [B, kv, T, D] -> [B, kv * rep, T, D], each kv head repeated rep times.
at::Tensor RepeatKv(const at::Tensor& x, int64_t rep) {
  if (rep == 1) return x;
  const auto b = x.size(0), kv = x.size(1), t = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({b, kv, rep, t, d}).reshape({b, kv * rep, t, d});
}

// Rows of x [B, T, H] at positions last[b] -> [B, H].
at::Tensor GatherLast(const at::Tensor& x, const at::Tensor& last) {
  const at::Tensor index =
      last.view({-1, 1, 1}).expand({x.size(0), 1, x.size(2)});
  return x.gather(1, index).squeeze(1);
}

}  // namespace

const char* AttentionName(Attention attention) {
  return attention == Attention::kSdpa ? "sdpa" : "eager";
}

Qwen3Model::Qwen3Model(Qwen3Config config, Qwen3Weights weights,
                       Attention attention)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      attention_(attention) {
  const int64_t d = config_.head_dim;
  inv_freq_ = 1.0 / at::pow(config_.rope_theta,
                            at::arange(0, d, 2, at::kFloat).to(device()) /
                                static_cast<double>(d));
}

at::Tensor Qwen3Model::SelfAttention(const Qwen3LayerWeights& w,
                                     const at::Tensor& x, const at::Tensor& cos,
                                     const at::Tensor& sin,
                                     const at::Tensor& causal) const {
  const int64_t b = x.size(0), t = x.size(1), d = config_.head_dim;
  const int64_t heads = config_.num_attention_heads;
  const int64_t kv = config_.num_key_value_heads;
  const double eps = config_.rms_norm_eps;
  // [B, T, heads*D] -> [B, heads, T, D], q/k normalised per head.
  at::Tensor q =
      RmsNorm(at::linear(x, w.q_proj).view({b, t, heads, d}), w.q_norm, eps)
          .transpose(1, 2);
  at::Tensor k =
      RmsNorm(at::linear(x, w.k_proj).view({b, t, kv, d}), w.k_norm, eps)
          .transpose(1, 2);
  at::Tensor v = at::linear(x, w.v_proj).view({b, t, kv, d}).transpose(1, 2);
  q = q * cos + RotateHalf(q) * sin;
  k = k * cos + RotateHalf(k) * sin;
  k = RepeatKv(k, heads / kv);
  v = RepeatKv(v, heads / kv);
  const double scaling = 1.0 / std::sqrt(static_cast<double>(d));
  at::Tensor out;
  if (attention_ == Attention::kSdpa) {
    out = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{},
                                           /*dropout_p=*/0.0,
                                           /*is_causal=*/true, scaling);
  } else {
    at::Tensor scores = at::matmul(q, k.transpose(2, 3)) * scaling;
    scores =
        scores.masked_fill(causal, -std::numeric_limits<float>::infinity());
    at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
    out = at::matmul(probs, v);
  }
  // [B, heads, T, D] -> [B, T, heads*D] -> [B, T, H]
  return at::linear(out.transpose(1, 2).reshape({b, t, heads * d}), w.o_proj);
}

at::Tensor Qwen3Model::Block(const Qwen3LayerWeights& w, const at::Tensor& x,
                             const at::Tensor& cos, const at::Tensor& sin,
                             const at::Tensor& causal) const {
  const double eps = config_.rms_norm_eps;
  at::Tensor h = x + SelfAttention(w, RmsNorm(x, w.input_layernorm, eps), cos,
                                   sin, causal);
  const at::Tensor n = RmsNorm(h, w.post_attention_layernorm, eps);
  return h + at::linear(at::silu(at::linear(n, w.gate_proj)) *
                            at::linear(n, w.up_proj),
                        w.down_proj);
}

ForwardResult Qwen3Model::Forward(const ForwardRequest& request) const {
  c10::InferenceMode guard;
  const int32_t n = static_cast<int32_t>(config_.num_hidden_layers);
  const int64_t b = request.tokens.size(0), t = request.tokens.size(1);
  int32_t depth = request.final_norm ? n : 0;
  for (int32_t layer : request.layers) depth = std::max(depth, layer);

  std::vector<int64_t> last_index(request.lengths.size());
  for (size_t i = 0; i < last_index.size(); ++i)
    last_index[i] = request.lengths[i] - 1;
  const at::Tensor last = at::tensor(last_index, at::kLong).to(device());

  // Rotary tables for positions 0..T-1, computed in float32 as transformers
  // does, then cast to the model's dtype: [T, D].
  const at::Tensor positions = at::arange(t, at::kFloat).to(device());
  const at::Tensor freqs = at::outer(positions, inv_freq_);
  const at::Tensor emb = at::cat({freqs, freqs}, -1);
  const at::Tensor cos = emb.cos().to(dtype());
  const at::Tensor sin = emb.sin().to(dtype());
  // Right padding: a real query never sees a later key, so the causal mask
  // alone keeps pads out of every real row.
  const at::Tensor causal =
      at::ones({t, t}, at::TensorOptions().dtype(at::kBool).device(device()))
          .triu(1);

  ForwardResult result;
  std::vector<at::Tensor> captured(request.layers.size());
  auto capture = [&](int32_t layer, const at::Tensor& state) {
    for (size_t i = 0; i < request.layers.size(); ++i) {
      if (request.layers[i] == layer) captured[i] = state;
    }
  };
  at::Tensor x = at::embedding(weights_.embed_tokens, request.tokens);
  capture(0, GatherLast(x, last));
  for (int32_t i = 0; i < depth; ++i) {
    x = Block(weights_.layers[static_cast<size_t>(i)], x, cos, sin, causal);
    if (i + 1 < n) capture(i + 1, GatherLast(x, last));
  }
  result.blocks_run = depth;
  if (depth == n) {
    result.final =
        RmsNorm(GatherLast(x, last), weights_.norm, config_.rms_norm_eps);
    capture(n, result.final);
  }
  if (!captured.empty()) {
    for (at::Tensor& c : captured) c = c.to(at::kFloat);
    result.hidden = at::stack(captured, 1);
  } else {
    result.hidden = at::empty({b, 0, config_.hidden_size}, at::kFloat);
  }
  return result;
}

at::Tensor Qwen3Model::LogSoftmax(const at::Tensor& final) const {
  c10::InferenceMode guard;
  return at::log_softmax(at::linear(final, weights_.lm_head).to(at::kFloat),
                         -1);
}

}  // namespace mesa_anyjev::model
