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
  const int64_t b = q.size(0), heads = q.size(1), t = q.size(2), d = q.size(3);
  const int64_t kv = past_k.size(1), rep = heads / kv;
  // [B, kv, rep, T, D] -> [1, kv, rep * B * T, D]
  const at::Tensor folded = q.reshape({b, kv, rep, t, d})
                                .permute({1, 2, 0, 3, 4})
                                .reshape({1, kv, rep * b * t, d});
  auto [o1, lse1] = at::_scaled_dot_product_flash_attention_for_cpu(
      folded, past_k, past_v, /*dropout_p=*/0.0, /*is_causal=*/false,
      std::nullopt, scaling);
  o1 = o1.reshape({kv, rep, b, t, d})
           .permute({2, 0, 1, 3, 4})
           .reshape({b, heads, t, d});
  lse1 = lse1.reshape({kv, rep, b, t})
             .permute({2, 0, 1, 3})
             .reshape({b, heads, t, 1});
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

Qwen3Model::Context Qwen3Model::MakeContext(int64_t b, int64_t t,
                                            const PrefixState* past,
                                            int64_t extension,
                                            PrefixState* record) const {
  const int64_t p = past == nullptr ? 0 : past->length;
  const auto bools = at::TensorOptions().dtype(at::kBool).device(device());
  Context context;
  context.past = past;
  context.record = record;
  // Rows after an extension row attend to its tokens only when there are any.
  context.extension = b > 1 ? extension : 0;
  // Rotary tables in float32 as transformers computes them, then in the
  // model's dtype: [T, D] for positions p..p+t-1, or [B, 1, T, D] when the
  // rows after an extension start e positions later than row 0.
  at::Tensor positions = at::arange(t, at::kFloat).to(device()) + p;
  if (context.extension > 0) {
    at::Tensor start = at::full({b, 1}, context.extension, at::kFloat);
    start[0] = 0;
    positions = positions.unsqueeze(0) + start.to(device());
  }
  const at::Tensor freqs = positions.unsqueeze(-1) * inv_freq_;
  const at::Tensor emb = at::cat({freqs, freqs}, -1);
  context.cos = emb.cos().to(dtype());
  context.sin = emb.sin().to(dtype());
  if (context.extension > 0) {
    context.cos = context.cos.unsqueeze(1);
    context.sin = context.sin.unsqueeze(1);
  }
  if (attention_ == Attention::kSdpa && p == 0 && context.extension == 0) {
    context.causal_only = true;
    return context;
  }
  if (attention_ == Attention::kSdpa && device().is_cpu()) {
    context.split_past = true;
    return context;
  }
  // Keys are [past P | extension E | own T]. New token i sees every past
  // key, its own keys up to i, and (rows after the extension row) the E
  // extension keys. Right padding: a real query never sees a later key, so
  // this mask alone keeps pads out of every real row.
  const at::Tensor own = at::ones({t, t}, bools).triu(1);
  if (context.extension == 0) {
    context.masked = at::cat({at::zeros({t, p}, bools), own}, -1);
  } else {
    const int64_t e = context.extension;
    at::Tensor ext = at::zeros({b, t, e}, bools);
    ext[0] = true;  // row 0's own tokens are its extension
    context.masked =
        at::cat({at::zeros({b, t, p}, bools), ext, own.expand({b, t, t})},
                -1)
            .unsqueeze(1);  // [B, 1, T, P + E + T]
  }
  if (attention_ == Attention::kSdpa) {
    context.allowed = context.masked.logical_not();
  }
  return context;
}

at::Tensor Qwen3Model::SelfAttention(int32_t index, const at::Tensor& x,
                                     const Context& context) const {
  const Qwen3LayerWeights& w = weights_.layers[static_cast<size_t>(index)];
  const int64_t b = x.size(0), t = x.size(1), d = config_.head_dim;
  const int64_t heads = config_.num_attention_heads;
  const int64_t kv = config_.num_key_value_heads, rep = heads / kv;
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

  // The past, and with a record the past plus row 0's real tokens [1, kv, S,
  // D]: what is kept for the cache, and what rows after an extension row
  // follow.
  const bool has_past = context.past != nullptr && context.past->length > 0;
  at::Tensor past_k, past_v, shared_k, shared_v;
  if (has_past) {
    shared_k = past_k = context.past->keys[static_cast<size_t>(index)];
    shared_v = past_v = context.past->values[static_cast<size_t>(index)];
  }
  if (context.record != nullptr) {
    const int64_t e =
        context.record->length - (has_past ? context.past->length : 0);
    const at::Tensor ek = k.slice(0, 0, 1).slice(2, 0, e);
    const at::Tensor ev = v.slice(0, 0, 1).slice(2, 0, e);
    shared_k = has_past ? at::cat({past_k, ek}, 2) : ek.contiguous();
    shared_v = has_past ? at::cat({past_v, ev}, 2) : ev.contiguous();
    context.record->keys.push_back(shared_k);
    context.record->values.push_back(shared_v);
  }

  at::Tensor out;
  if (context.causal_only) {
    out = at::scaled_dot_product_attention(q, RepeatKv(k, rep),
                                           RepeatKv(v, rep), std::nullopt,
                                           /*dropout_p=*/0.0,
                                           /*is_causal=*/true, scaling);
  } else if (context.split_past) {
    // With an extension, row 0 follows the past and the other rows follow
    // the past and row 0; without one, every row follows the past.
    const int64_t first = context.extension > 0 ? 1 : 0;
    const at::Tensor& follow_k = first == 1 ? shared_k : past_k;
    const at::Tensor& follow_v = first == 1 ? shared_v : past_v;
    std::vector<at::Tensor> parts;
    if (first == 1) {
      const at::Tensor q0 = q.slice(0, 0, 1);
      const at::Tensor k0 = RepeatKv(k.slice(0, 0, 1), rep);
      const at::Tensor v0 = RepeatKv(v.slice(0, 0, 1), rep);
      parts.push_back(
          has_past ? SharedPrefixAttention(q0, past_k, past_v, k0, v0, scaling)
                   : at::scaled_dot_product_attention(
                         q0, k0, v0, std::nullopt, /*dropout_p=*/0.0,
                         /*is_causal=*/true, scaling));
    }
    if (b > first) {
      parts.push_back(
          SharedPrefixAttention(q.slice(0, first), follow_k, follow_v,
                                RepeatKv(k.slice(0, first), rep),
                                RepeatKv(v.slice(0, first), rep), scaling));
    }
    out = parts.size() == 1 ? parts[0] : at::cat(parts, 0);
  } else {
    // One masked attention over [past | extension | own] keys per row.
    std::vector<at::Tensor> keys, values;
    if (has_past) {
      keys.push_back(past_k.expand({b, kv, past_k.size(2), d}));
      values.push_back(past_v.expand({b, kv, past_v.size(2), d}));
    }
    if (context.extension > 0) {
      const int64_t e = context.extension;
      keys.push_back(k.slice(0, 0, 1).slice(2, 0, e).expand({b, kv, e, d}));
      values.push_back(v.slice(0, 0, 1).slice(2, 0, e).expand({b, kv, e, d}));
    }
    keys.push_back(k);
    values.push_back(v);
    k = RepeatKv(keys.size() == 1 ? k : at::cat(keys, 2), rep);
    v = RepeatKv(values.size() == 1 ? v : at::cat(values, 2), rep);
    if (attention_ == Attention::kSdpa) {
      // A boolean mask for SDPA says where attention is allowed.
      out = at::scaled_dot_product_attention(q, k, v, context.allowed,
                                             /*dropout_p=*/0.0,
                                             /*is_causal=*/false, scaling);
    } else {
      at::Tensor scores = at::matmul(q, k.transpose(2, 3)) * scaling;
      scores = scores.masked_fill(context.masked,
                                  -std::numeric_limits<float>::infinity());
      at::Tensor probs =
          at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
      out = at::matmul(probs, v);
    }
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
  return Forward(request, nullptr, nullptr);
}

ForwardResult Qwen3Model::Forward(const ForwardRequest& request,
                                  const PrefixState* prefix,
                                  PrefixState* record) const {
  const int32_t n = static_cast<int32_t>(config_.num_hidden_layers);
  int32_t depth = request.final_norm ? n : 0;
  for (int32_t layer : request.layers) depth = std::max(depth, layer);
  return Run(request, depth, prefix, record);
}

ForwardResult Qwen3Model::Run(const ForwardRequest& request, int32_t depth,
                              const PrefixState* prefix,
                              PrefixState* record) const {
  c10::InferenceMode guard;
  const int32_t n = static_cast<int32_t>(config_.num_hidden_layers);
  const int64_t b = request.tokens.size(0), t = request.tokens.size(1);
  TORCH_CHECK(prefix == nullptr || prefix->depth >= depth,
              "prefix state covers ", prefix == nullptr ? 0 : prefix->depth,
              " blocks, the request needs ", depth);
  TORCH_CHECK(request.extends_prefix == (record != nullptr),
              "an extension row and a record go together");
  int64_t extension = 0;
  if (record != nullptr) {
    extension = request.lengths.at(0);
    *record = PrefixState();
    record->length = (prefix == nullptr ? 0 : prefix->length) + extension;
    record->depth = depth;
  }

  std::vector<int64_t> last_index(request.lengths.size());
  for (size_t i = 0; i < last_index.size(); ++i) {
    last_index[i] = request.lengths[i] - 1;
  }
  // Results are for the rows after an extension row.
  const int64_t skip = request.extends_prefix ? 1 : 0;
  const at::Tensor last =
      at::tensor(last_index, at::kLong).to(device()).slice(0, skip);
  const Context context = MakeContext(b, t, prefix, extension, record);

  ForwardResult result;
  std::vector<at::Tensor> captured(request.layers.size());
  auto capture = [&](int32_t layer, const at::Tensor& state) {
    for (size_t i = 0; i < request.layers.size(); ++i) {
      if (request.layers[i] == layer) captured[i] = state;
    }
  };
  auto rows = [&](const at::Tensor& x) {
    return GatherLast(x.slice(0, skip), last);
  };
  at::Tensor x = at::embedding(weights_.embed_tokens, request.tokens);
  capture(0, rows(x));
  for (int32_t i = 0; i < depth; ++i) {
    x = Block(i, x, context);
    if (i + 1 < n) capture(i + 1, rows(x));
  }
  result.blocks_run = depth;
  if (depth == n) {
    result.final = RmsNorm(rows(x), weights_.norm, config_.rms_norm_eps);
    capture(n, result.final);
  }
  if (!captured.empty()) {
    for (at::Tensor& c : captured) c = c.to(at::kFloat);
    result.hidden = at::stack(captured, 1);
  } else {
    result.hidden = at::empty({b - skip, 0, config_.hidden_size}, at::kFloat);
  }
  return result;
}

PrefixState Qwen3Model::Prefill(const at::Tensor& tokens, int32_t depth,
                                const PrefixState* past) const {
  ForwardRequest request;
  request.tokens = tokens;
  request.lengths = {tokens.size(1)};
  request.extends_prefix = true;
  PrefixState state;
  Run(request, depth, past, &state);
  return state;
}

at::Tensor Qwen3Model::LogSoftmax(const at::Tensor& final) const {
  c10::InferenceMode guard;
  return at::log_softmax(lm_head_(final).to(at::kFloat), -1);
}

}  // namespace mesa_anyjev::model
