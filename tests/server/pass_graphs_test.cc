// Small passes padded to a CUDA graph's fixed shape (server/model/
// graph_pass.h, pass_graphs.h) give what the pass gives unpadded: on the
// CPU, PassGraphs runs the padded body eagerly (only capture and replay are
// CUDA's), so the padding (pad tokens on the scratch slot, the pad sequence,
// empty sequences, pad rows, labels and copies) is checked here against the
// same pass through the forward as it comes, on a small random Qwen3.
#include "server/model/pass_graphs.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "server/model/attention.h"
#include "server/model/qwen3_model.h"

namespace mesa_anyjev::model {
namespace {

Qwen3Model TinyModel() {
  Qwen3Config c;
  c.vocab_size = 300;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.rope_theta = 10000.0;
  at::manual_seed(11);
  auto w = [](std::vector<int64_t> shape) { return at::randn(shape) * 0.2; };
  Qwen3Weights weights;
  weights.embed_tokens = w({300, 32});
  for (int i = 0; i < 2; ++i) {
    Qwen3LayerWeights l;
    l.input_layernorm = 1 + w({32});
    l.q_proj = w({32, 32});
    l.k_proj = w({16, 32});
    l.v_proj = w({16, 32});
    l.o_proj = w({32, 32});
    l.q_norm = 1 + w({8});
    l.k_norm = 1 + w({8});
    l.post_attention_layernorm = 1 + w({32});
    l.gate_proj = w({64, 32});
    l.up_proj = w({64, 32});
    l.down_proj = w({32, 64});
    weights.layers.push_back(l);
  }
  weights.norm = 1 + w({32});
  weights.lm_head = w({300, 32});
  return Qwen3Model(c, std::move(weights), CpuGemm::kAten);
}

// A pass of the engine's shape over a pool of 8 blocks of 4 (slots 0..31),
// the scratch block after them (32..35): a prefix chunk of 5 after 3
// cached positions, two suffixes of it, a prompt alone; one copy.
struct Case {
  PassKeys keys;
  PassArrays arrays;
};

Case EngineCase() {
  Case c;
  c.keys.contexts = {{0, 1, 2, 4, 5, 6, 7, 8}};
  c.keys.segments = {{5, 3, 0, {}},
                     {2, 8, 0, {12, 13}},
                     {1, 8, 0, {16}},
                     {3, 0, -1, {20, 21, 22}}};
  const std::vector<int64_t> tokens = {5, 9, 14, 200, 7, 33, 34, 70, 1, 2, 3};
  int64_t row = 0;
  for (const SegmentKeys& s : c.keys.segments) {
    for (int64_t t = 0; t < s.length; ++t) {
      c.arrays.tokens.push_back(tokens[static_cast<size_t>(row + t)]);
      c.arrays.positions.push_back(s.start + t);
      c.arrays.slots.push_back(c.keys.OwnSlot(s, t));
    }
    row += s.length;
    c.arrays.rows.push_back(row - 1);
  }
  c.arrays.label_width = 3;
  c.arrays.labels = {10, 11, 12, 20, 21, 20, 7, 7, 7, 0, 299, 5};
  c.arrays.copy_from = {24};
  c.arrays.copy_to = {25};
  return c;
}

// The pass through the forward as it comes, as the engine runs it.
std::vector<at::Tensor> Eager(const Qwen3Model& m, KvPool& pool, const Case& c,
                              int32_t top_k) {
  PassUpload upload;
  const auto stage = [&](const std::vector<int64_t>& v) {
    return upload.Stage(v);
  };
  const auto t = stage(c.arrays.tokens), p = stage(c.arrays.positions),
             s = stage(c.arrays.slots), r = stage(c.arrays.rows),
             f = stage(c.arrays.copy_from), o = stage(c.arrays.copy_to),
             l = stage(c.arrays.labels);
  AttentionPlan plan(AttentionRoute::kEager, c.keys, m.device(), m.dtype(),
                     upload);
  upload.Upload(m.device());
  plan.Bind(upload);
  PackedPass packed;
  packed.tokens = upload.View(t);
  packed.positions = upload.View(p);
  packed.writes.slots = upload.View(s);
  packed.outputs = upload.View(r);
  packed.writes.copy_from = upload.View(f);
  packed.writes.copy_to = upload.View(o);
  packed.attention = &plan;
  packed.final_norm = true;
  const at::Tensor lp = m.LogSoftmax(m.Forward(packed, pool).final);
  std::vector<at::Tensor> out = {lp.gather(1, upload.View(l).view({4, 3}))};
  if (top_k > 0) {
    auto [values, ids] = lp.topk(top_k);
    out.push_back(values);
    out.push_back(ids);
  }
  return out;
}

TEST_CASE("a pass padded for a graph gives what it gives unpadded",
          "[graphs]") {
  c10::InferenceMode guard;
  const Qwen3Model m = TinyModel();
  const Case c = EngineCase();
  for (const int32_t top_k : {0, 5}) {
    INFO("top_k " << top_k);
    // The same cached keys in both pools (positions 0..2 of the context,
    // the copy's source).
    KvPool eager_pool = m.NewKvPool(36), graph_pool = m.NewKvPool(36);
    at::manual_seed(2);
    for (int32_t layer = 0; layer < 2; ++layer) {
      const at::Tensor k = at::randn({36, 2, 8}), v = at::randn({36, 2, 8});
      for (KvPool* pool : {&eager_pool, &graph_pool}) {
        pool->keys(layer).copy_(k);
        pool->values(layer).copy_(v);
      }
    }
    const std::vector<at::Tensor> want = Eager(m, eager_pool, c, top_k);
    PassGraphs graphs(m, graph_pool, /*scratch_slot=*/32, /*max_tokens=*/64);
    const VarlenLayout sequences =
        PlanAttentionBuckets(AttentionRoute::kVarlen, c.keys).varlen;
    const auto got = graphs.Run(c.arrays, sequences, top_k);
    REQUIRE(got.has_value());
    CHECK((got->labels - want[0]).abs().max().item<double>() < 1e-5);
    if (top_k > 0) {
      CHECK((got->top_values - want[1]).abs().max().item<double>() < 1e-5);
      CHECK(at::equal(got->top_ids, want[2]));
    }
    // The pass's keys and values land where they belong, the pads only on
    // the scratch block.
    for (int32_t layer = 0; layer < 2; ++layer) {
      CHECK((graph_pool.keys(layer).narrow(0, 0, 32) -
             eager_pool.keys(layer).narrow(0, 0, 32))
                .abs()
                .max()
                .item<double>() < 1e-5);
    }
    // A second pass of the same shape reuses it.
    REQUIRE(graphs.Run(c.arrays, sequences, top_k).has_value());
    CHECK(graphs.captured() == 1);
  }
}

TEST_CASE(
    "a capture that throws leaves its shape to run eagerly, said once, and "
    "is not tried again",
    "[graphs]") {
  c10::InferenceMode guard;
  const Qwen3Model m = TinyModel();
  const Case c = EngineCase();
  KvPool pool = m.NewKvPool(36);
  int tries = 0;
  PassGraphs graphs(
      m, pool, /*scratch_slot=*/32, /*max_tokens=*/64,
      [&](int, const std::function<void()>&) -> std::unique_ptr<cuda::Graph> {
        ++tries;
        throw c10::Error({__func__, __FILE__, __LINE__},
                         "operation not permitted when stream "
                         "is capturing (a test's)");
      });
  const VarlenLayout sequences =
      PlanAttentionBuckets(AttentionRoute::kVarlen, c.keys).varlen;
  CHECK_FALSE(graphs.Run(c.arrays, sequences, 0).has_value());
  CHECK_FALSE(graphs.Run(c.arrays, sequences, 0).has_value());
  CHECK(tries == 1);
  CHECK(graphs.refused() == 1);
  CHECK(graphs.captured() == 0);
  const std::vector<std::string> notes = graphs.TakeNotes();
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::Contains("capturing the CUDA graph of a pass of "
                                       "64 tokens") &&
                           Catch::Contains("operation not permitted") &&
                           Catch::Contains("run eagerly"));
  CHECK(graphs.TakeNotes().empty());
}

TEST_CASE("shapes: the smallest power of two that holds the pass", "[graphs]") {
  const Case c = EngineCase();
  const VarlenLayout sequences =
      PlanAttentionBuckets(AttentionRoute::kVarlen, c.keys).varlen;
  const auto shape = FitGraphShape(c.arrays, sequences, 512, 0);
  REQUIRE(shape.has_value());
  CHECK(shape->tokens == 64);
  CHECK(shape->rows == 8);
  CHECK(shape->keys == 1024);
  CHECK(shape->labels == 4);
  // Over the limit, no outputs, more copies than tokens: eager.
  CHECK_FALSE(FitGraphShape(c.arrays, sequences, 8, 0).has_value());
  PassArrays no_rows = c.arrays;
  no_rows.rows.clear();
  CHECK_FALSE(FitGraphShape(no_rows, sequences, 512, 0).has_value());
  PassArrays copies = c.arrays;
  copies.copy_from.assign(65, 24);
  copies.copy_to.assign(65, 25);
  CHECK_FALSE(FitGraphShape(copies, sequences, 512, 0).has_value());
  // The padded buffer: the pass, then one pad sequence, then empty ones.
  const GraphLayout l = GraphLayout::Of(*shape);
  const std::vector<int64_t> b = PadForGraph(c.arrays, sequences, *shape, 32);
  CHECK(b.size() == static_cast<size_t>(l.size));
  const int64_t n = 11;
  CHECK(b[static_cast<size_t>(l.slots + n)] == 32);
  CHECK(b[static_cast<size_t>(l.cu_q + 5)] == 64);  // 4 sequences + pads
  CHECK(b[static_cast<size_t>(l.cu_q + 6)] == 64);  // then empty
  CHECK(b[static_cast<size_t>(l.cu_k + 5)] == sequences.cu_k.back() + (64 - n));
}

}  // namespace
}  // namespace mesa_anyjev::model
