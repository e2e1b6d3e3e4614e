// Every attention route over one pass of the engine's shape (a prefix chunk,
// its suffixes sharing its context, a suffix of a context cached before the
// pass, a prompt alone) against the eager route, on the CPU. The CUDA
// routes (the variable-length kernel, and the cascade that attends each
// shared context once and merges by log-sum-exp) run here with
// VarlenReference standing in for the kernel, so their planning and the
// merge are checked where there is no GPU; the GPU check runs them with the
// kernel itself.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "server/model/attention.h"

namespace mesa_anyjev::model {
namespace {

std::vector<int64_t> Range(int64_t first, int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

// Slots are scattered over a pool of 64: contexts need not be contiguous.
PassKeys EnginePass() {
  PassKeys keys;
  std::vector<int64_t> a = Range(40, 9);  // a prefix of 9, computed here
  a.insert(a.begin(), {3, 7, 11});        // after 3 cached positions
  keys.contexts.push_back(a);
  keys.contexts.push_back(Range(20, 6));  // a prefix cached before the pass
  keys.segments = {
      {9, 3, 0, {}},                // the chunk: rows 0..8, context a
      {2, 12, 0, {50, 51}},         // a's suffixes
      {1, 12, 0, {52}},             //
      {3, 12, 0, {53, 54, 55}},     //
      {4, 6, 1, {60, 61, 62, 63}},  // a suffix of the cached prefix
      {2, 0, -1, {30, 31}},         // a prompt alone
  };
  return keys;
}

at::Tensor Run(AttentionRoute route, const PassKeys& keys, const at::Tensor& q,
               const at::Tensor& k, const at::Tensor& v) {
  PassUpload upload;
  AttentionPlan plan(PlanAttentionBuckets(route, keys), q.device(),
                     q.scalar_type(), upload);
  upload.Upload(q.device());
  plan.Bind(upload);
  return plan(q, k, v, 1.0 / std::sqrt(static_cast<double>(q.size(2))));
}

// One-token suffixes after a cached prefix, each its own sequence: the
// variable-length kernel's max_seqlen_q 1, which the load's probe covers
// (VarlenAttentionWorks) because flash attention answers it otherwise.
PassKeys OneQueryEach() {
  PassKeys keys;
  keys.contexts.push_back(Range(20, 12));
  keys.segments = {{1, 12, 0, {40}}, {1, 12, 0, {41}}, {1, 12, 0, {42}}};
  return keys;
}

TEST_CASE("every attention route equals eager on the engine's pass shape",
          "[attention]") {
  at::manual_seed(3);
  for (const PassKeys& keys : {EnginePass(), OneQueryEach()}) {
    int64_t rows = 0;
    for (const SegmentKeys& s : keys.segments) rows += s.length;
    const at::Tensor q = at::randn({rows, 4, 16});
    const at::Tensor k = at::randn({64, 2, 16});
    const at::Tensor v = at::randn({64, 2, 16});
    const at::Tensor eager = Run(AttentionRoute::kEager, keys, q, k, v);
    for (AttentionRoute route :
         {AttentionRoute::kCpuFlash, AttentionRoute::kSdpa,
          AttentionRoute::kVarlen, AttentionRoute::kCascade}) {
      INFO("route " << static_cast<int>(route));
      const at::Tensor got = Run(route, keys, q, k, v);
      CHECK((got - eager).abs().max().item<double>() < 1e-5);
    }
  }
}

TEST_CASE("the cascade plans each shared context once", "[attention]") {
  const CascadeLayout c =
      PlanAttentionBuckets(AttentionRoute::kCascade, EnginePass()).cascade;
  // Own: every segment, the chunk over its whole context (12 keys), the
  // suffixes over their own tokens only.
  CHECK(c.own.cu_q == std::vector<int64_t>{0, 9, 11, 12, 15, 19, 21});
  CHECK(c.own.cu_k == std::vector<int64_t>{0, 12, 14, 15, 18, 22, 24});
  // Shared: context a's 12 keys once for its 6 suffix rows, the cached
  // prefix's 6 keys for its suffix's 4 rows.
  CHECK(c.shared.cu_q == std::vector<int64_t>{0, 6, 10});
  CHECK(c.shared.cu_k == std::vector<int64_t>{0, 12, 18});
  CHECK(c.shared_rows == Range(9, 10));
  CHECK(c.shared.max_k == 12);
}

TEST_CASE("VarlenReference's log-sum-exp is of the scores it attends to",
          "[attention]") {
  at::manual_seed(5);
  const at::Tensor q = at::randn({3, 2, 8});
  const at::Tensor k = at::randn({5, 1, 8});
  const at::Tensor v = at::randn({5, 1, 8});
  const at::Tensor cu_q = at::tensor(std::vector<int32_t>{0, 3});
  const at::Tensor cu_k = at::tensor(std::vector<int32_t>{0, 5});
  const auto [out, lse] = VarlenReference(q, k, v, cu_q, cu_k, 0.5, true);
  // Row 0 sees keys 0..2 (aligned to the end), head 0.
  const at::Tensor s =
      (at::matmul(k.select(1, 0), q[0][0]) * 0.5).narrow(0, 0, 3);
  CHECK(std::abs(lse[0][0].item<double>() -
                 at::logsumexp(s, 0).item<double>()) < 1e-5);
  const at::Tensor want =
      at::matmul(at::softmax(s, 0), v.select(1, 0).narrow(0, 0, 3));
  CHECK((out[0][0] - want).abs().max().item<double>() < 1e-5);
}

}  // namespace
}  // namespace mesa_anyjev::model
