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

// Attention of q [B, heads, T, D] to a shared prefix's keys and values
// [1, kv, P, D] (no mask: every new token follows the whole prefix) and,
// causally, to its own row's k and v [B, heads, T, D]; the two halves merged
// by their log-sum-exp, which equals one softmax over [P + T] keys. Every row
// and query head of a kv group is folded into one query axis for the prefix
// half, so the prefix is neither copied per row nor repeated per head, and
// the kernel runs without a mask.
at::Tensor SharedPrefixAttention(const at::Tensor& q, const at::Tensor& past_k,
                                 const at::Tensor& past_v, const at::Tensor& k,
                                 const at::Tensor& v, double scaling) {
  const int64_t b = q.size(0), heads = q.size(1), t = q.size(2),
                d = q.size(3);
  const int64_t kv = past_k.size(1), rep = heads / kv;
  // [B, kv, rep, T, D] -> [1, kv, rep * B * T, D]
  const at::Tensor folded = q.reshape({b, kv, rep, t, d})
                                .permute({1, 2, 0, 3, 4})
                                .reshape({1, kv, rep * b * t, d});
  auto [o1, lse1] = at::_scaled_dot_product_flash_attention_for_cpu(
      folded, past_k, past_v, /*dropout_p=*/0.0, /*is_causal=*/false,
      std::nullopt, scaling);
  o1 = o1.reshape({kv, rep, b, t, d}).permute({2, 0, 1, 3, 4}).reshape(
      {b, heads, t, d});
  lse1 = lse1.reshape({kv, rep, b, t}).permute({2, 0, 1, 3}).reshape(
      {b, heads, t, 1});
  auto [o2, lse2] = at::_scaled_dot_product_flash_attention_for_cpu(
      q, k, v, /*dropout_p=*/0.0, /*is_causal=*/true, std::nullopt, scaling);
  lse2 = lse2.unsqueeze(-1);
  const at::Tensor top = at::maximum(lse1, lse2);
  const at::Tensor w1 = (lse1 - top).exp(), w2 = (lse2 - top).exp();
  return ((o1.to(at::kFloat) * w1 + o2.to(at::kFloat) * w2) / (w1 + w2))
      .to(q.scalar_type());
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
                       Attention attention, CpuGemm gemm)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      attention_(attention) {
  c10::InferenceMode guard;
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

int64_t PrefixState::bytes() const {
  int64_t total = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    total += keys[i].numel() * static_cast<int64_t>(keys[i].element_size());
    total += values[i].numel() * static_cast<int64_t>(values[i].element_size());
  }
  return total;
}

PrefixState PrefixState::Truncated(int64_t n) const {
  PrefixState out;
  out.length = std::min(n, length);
  out.depth = depth;
  for (size_t i = 0; i < keys.size(); ++i) {
    out.keys.push_back(keys[i].slice(2, 0, out.length));
    out.values.push_back(values[i].slice(2, 0, out.length));
  }
  return out;
}

Qwen3Model::Context Qwen3Model::MakeContext(int64_t t, const PrefixState* past,
                                            PrefixState* record) const {
  const int64_t p = past == nullptr ? 0 : past->length;
  // Rotary tables for positions p..p+t-1, in float32 as transformers
  // computes them, then in the model's dtype: [T, D].
  const at::Tensor positions = at::arange(p, p + t, at::kFloat).to(device());
  const at::Tensor freqs = at::outer(positions, inv_freq_);
  const at::Tensor emb = at::cat({freqs, freqs}, -1);
  Context context;
  context.cos = emb.cos().to(dtype());
  context.sin = emb.sin().to(dtype());
  // New token i (position p+i) sees every past key and new keys up to i.
  // Right padding: a real query never sees a later key, so this mask alone
  // keeps pads out of every real row.
  if (attention_ == Attention::kSdpa && p == 0) {
    context.causal_only = true;
  } else if (attention_ == Attention::kSdpa && device().is_cpu()) {
    context.split_past = true;
  } else {
    context.masked =
        at::ones({t, p + t},
                 at::TensorOptions().dtype(at::kBool).device(device()))
            .triu(p + 1);
    if (attention_ == Attention::kSdpa) {
      context.allowed = context.masked.logical_not();
    }
  }
  context.past = past;
  context.record = record;
  return context;
}

at::Tensor Qwen3Model::SelfAttention(int32_t index, const at::Tensor& x,
                                     const Context& context) const {
  const Qwen3LayerWeights& w = weights_.layers[static_cast<size_t>(index)];
  const int64_t b = x.size(0), t = x.size(1), d = config_.head_dim;
  const int64_t heads = config_.num_attention_heads;
  const int64_t kv = config_.num_key_value_heads;
  const double eps = config_.rms_norm_eps;
  // [B, T, (heads + 2 kv) * D] -> q [B, heads, T, D], k and v [B, kv, T, D],
  // q and k normalised per head.
  const LayerLinears& linear = linears_[static_cast<size_t>(index)];
  const auto qkv = linear.qkv_proj(x).split({heads * d, kv * d, kv * d}, -1);
  at::Tensor q =
      RmsNorm(qkv[0].reshape({b, t, heads, d}), w.q_norm, eps).transpose(1, 2);
  at::Tensor k =
      RmsNorm(qkv[1].reshape({b, t, kv, d}), w.k_norm, eps).transpose(1, 2);
  at::Tensor v = qkv[2].reshape({b, t, kv, d}).transpose(1, 2);
  q = q * context.cos + RotateHalf(q) * context.sin;
  k = k * context.cos + RotateHalf(k) * context.sin;
  const double scaling = 1.0 / std::sqrt(static_cast<double>(d));
  const bool has_past = context.past != nullptr && context.past->length > 0;
  at::Tensor out;
  if (has_past && context.split_past) {
    const auto& past_k = context.past->keys[static_cast<size_t>(index)];
    const auto& past_v = context.past->values[static_cast<size_t>(index)];
    if (context.record != nullptr) {  // Prefill: one row, kept whole
      context.record->keys.push_back(at::cat({past_k, k}, 2));
      context.record->values.push_back(at::cat({past_v, v}, 2));
    }
    out = SharedPrefixAttention(q, past_k, past_v, RepeatKv(k, heads / kv),
                                RepeatKv(v, heads / kv), scaling);
    return linear.o_proj(out.transpose(1, 2).reshape({b, t, heads * d}));
  }
  if (has_past) {
    // [1, kv, P, D] shared by every row -> [B, kv, P + T, D]
    const auto& past_k = context.past->keys[static_cast<size_t>(index)];
    const auto& past_v = context.past->values[static_cast<size_t>(index)];
    k = at::cat({past_k.expand({b, kv, past_k.size(2), d}), k}, 2);
    v = at::cat({past_v.expand({b, kv, past_v.size(2), d}), v}, 2);
  }
  if (context.record != nullptr) {
    context.record->keys.push_back(k);
    context.record->values.push_back(v);
  }
  k = RepeatKv(k, heads / kv);
  v = RepeatKv(v, heads / kv);
  if (attention_ == Attention::kSdpa) {
    // A boolean mask for SDPA says where attention is allowed; the plain
    // causal case needs none.
    out = context.causal_only
              ? at::scaled_dot_product_attention(q, k, v, std::nullopt,
                                                 /*dropout_p=*/0.0,
                                                 /*is_causal=*/true, scaling)
              : at::scaled_dot_product_attention(q, k, v, context.allowed,
                                                 /*dropout_p=*/0.0,
                                                 /*is_causal=*/false, scaling);
  } else {
    at::Tensor scores = at::matmul(q, k.transpose(2, 3)) * scaling;
    scores = scores.masked_fill(context.masked,
                                -std::numeric_limits<float>::infinity());
    at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
    out = at::matmul(probs, v);
  }
  // [B, heads, T, D] -> [B, T, heads*D] -> [B, T, H]
  return linear.o_proj(out.transpose(1, 2).reshape({b, t, heads * d}));
}

at::Tensor Qwen3Model::Block(int32_t index, const at::Tensor& x,
                             const Context& context) const {
  const Qwen3LayerWeights& w = weights_.layers[static_cast<size_t>(index)];
  const double eps = config_.rms_norm_eps;
  at::Tensor h =
      x + SelfAttention(index, RmsNorm(x, w.input_layernorm, eps), context);
  const at::Tensor n = RmsNorm(h, w.post_attention_layernorm, eps);
  const LayerLinears& linear = linears_[static_cast<size_t>(index)];
  const auto gate_up = linear.gate_up_proj(n).chunk(2, -1);
  return h + linear.down_proj(at::silu(gate_up[0]) * gate_up[1]);
}

ForwardResult Qwen3Model::Forward(const ForwardRequest& request) const {
  return Forward(request, nullptr);
}

ForwardResult Qwen3Model::Forward(const ForwardRequest& request,
                                  const PrefixState* prefix) const {
  c10::InferenceMode guard;
  const int32_t n = static_cast<int32_t>(config_.num_hidden_layers);
  const int64_t b = request.tokens.size(0), t = request.tokens.size(1);
  int32_t depth = request.final_norm ? n : 0;
  for (int32_t layer : request.layers) depth = std::max(depth, layer);
  TORCH_CHECK(prefix == nullptr || prefix->depth >= depth,
              "prefix state covers ", prefix == nullptr ? 0 : prefix->depth,
              " blocks, the request needs ", depth);

  std::vector<int64_t> last_index(request.lengths.size());
  for (size_t i = 0; i < last_index.size(); ++i) {
    last_index[i] = request.lengths[i] - 1;
  }
  const at::Tensor last = at::tensor(last_index, at::kLong).to(device());
  const Context context = MakeContext(t, prefix, /*record=*/nullptr);

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
    x = Block(i, x, context);
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

PrefixState Qwen3Model::Prefill(const at::Tensor& tokens, int32_t depth,
                                const PrefixState* past) const {
  c10::InferenceMode guard;
  TORCH_CHECK(past == nullptr || past->depth >= depth,
              "past state covers fewer blocks than asked");
  PrefixState state;
  state.length = (past == nullptr ? 0 : past->length) + tokens.size(1);
  state.depth = depth;
  const Context context = MakeContext(tokens.size(1), past, &state);
  at::Tensor x = at::embedding(weights_.embed_tokens, tokens);
  for (int32_t i = 0; i < depth; ++i) x = Block(i, x, context);
  return state;
}

at::Tensor Qwen3Model::LogSoftmax(const at::Tensor& final) const {
  c10::InferenceMode guard;
  return at::log_softmax(lm_head_(final).to(at::kFloat), -1);
}

}  // namespace mesa_anyjev::model
