// The plan of a pass's attention as plain data (no libtorch, so the unit
// tests reach it): which kernel route runs, which segments share an item,
// which items are padded into one bucket and to what shape, and which rows of
// the pass each bucket answers. server/model/attention.h turns it into
// gather indices and masks on the device.
//
// An item is query rows of the pass against one list of key slots. The
// segments of one context (a prompt group's prefix chunk and its suffixes,
// which share the prefix's keys: pass_keys.h) form one item while its padded
// area stays within kGroupSlack of what its rows see, so the prefix is
// gathered and read once for all of them. A bucket is items padded to [B, Tq]
// queries x [B, Tk] keys: one kernel call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/pass_keys.h"

namespace mesa_anyjev::model {

// A group's item (its rows x all its keys) may cost this much more than what
// its rows see: past that its suffixes split, each part reading the prefix
// again (docs/benchmarks.md: the slack that ran fastest).
inline constexpr double kGroupSlack = 1.2;
// A bucket's padded [B, Tq, Tk] may cost this much more than its items'
// Tq x Tk (causal ones, whose kernel skips what is masked, more), and no
// more than this many elements per head.
inline constexpr double kMaskedPadSlack = 1.1;
inline constexpr double kCausalPadSlack = 1.5;
inline constexpr int64_t kMaxBucketElements = int64_t{1} << 21;

enum class Attention { kEager, kSdpa };
// "eager", "sdpa".
const char* AttentionName(Attention attention);
// The names above -> Attention; anything else is INVALID_ARGUMENT.
absl::StatusOr<Attention> ParseAttention(const std::string& name);

// How a pass's attention runs.
enum class AttentionRoute {
  kEager,     // transformers' eager math; mask: true = may not attend
  kSdpa,      // at::scaled_dot_product_attention; mask: true = may attend
  kCpuFlash,  // sdpa's CPU flash kernel, kv heads as they are; additive mask
              // in the queries' dtype
  kVarlen,    // the CUDA variable-length kernel: no buckets, no mask
  kCascade,   // the same kernel twice: each context's keys once for all the
              // suffixes that share it, each segment's own keys causally,
              // the two merged by log-sum-exp (no buckets, no mask)
};

// "eager", "sdpa", "cpu flash", "varlen", "cascade".
const char* AttentionRouteName(AttentionRoute route);

// `varlen`: the load-time probe found the CUDA variable-length kernel works
// (it is asked only for sdpa on CUDA); it wins over the other flags.
// `cascade`: with varlen, attend each shared context once (probed too).
AttentionRoute ChooseRoute(Attention kind, bool on_cpu, bool varlen,
                           bool cascade = false);

// What one query row of an item sees of its keys: [0, shared) and
// [own, own + owned).
struct VisibleKeys {
  int64_t shared = 0, own = 0, owned = 0;
};

// Query rows [row0, row0 + rows) of the pass against the key slots `keys`:
// the group's shared keys first, then each segment's own keys.
struct AttentionItem {
  int64_t row0 = 0, rows = 0;
  std::vector<int64_t> keys;
  std::vector<VisibleKeys> see;  // one per row
  int64_t visible = 0;           // the sum of what its rows see
  int64_t segments = 0;
  int32_t context = -1;  // the context whose later segments may join
  int64_t shared = 0;    // how many of keys they share

  int64_t area() const { return rows * static_cast<int64_t>(keys.size()); }
};

// Items padded to [B, Tq] queries x [B, Tk] keys: one kernel call.
struct PlannedBucket {
  std::vector<AttentionItem> items;  // B of them, longest queries first
  int64_t tq = 0, tk = 0;
  int64_t area = 0;  // the items' own rows x keys, summed
  // Every item is one segment attending to its own tokens only: the kernel's
  // causal mask holds for right-padded rows, and none is built.
  bool causal = false;
  bool rows_in_order = false;  // its rows are the pass's 0, 1, ..., n - 1
  int64_t first_row = -1;      // one item: its rows are q[first_row, + tq)

  int64_t b() const { return static_cast<int64_t>(items.size()); }
};

// The CUDA variable-length kernel's arguments: every segment's queries and
// keys back to back, with cumulative lengths.
struct VarlenLayout {
  std::vector<int64_t> cu_q{0}, cu_k{0}, keys;
  int64_t max_q = 0, max_k = 0;
};

// kCascade's two calls. `own`: every segment's rows, causally over the
// keys it does not share (a suffix's own tokens; a prefix chunk's whole
// context, whose last keys are its own). `shared`: for each context read by
// suffixes, the rows of those suffixes (`shared_rows`, rows of the pass in
// order) over the context's keys they all see, without a mask. A row of
// `shared_rows` merges its two results by their log-sum-exps.
struct CascadeLayout {
  VarlenLayout own, shared;
  std::vector<int64_t> shared_rows;
};

struct AttentionBuckets {
  AttentionRoute route = AttentionRoute::kEager;
  std::vector<PlannedBucket> buckets;  // the masked ones, then the causal
  bool in_order = false;               // one bucket holding every row in order
  VarlenLayout varlen;                 // kVarlen only (and then no buckets)
  CascadeLayout cascade;               // kCascade only
};

AttentionBuckets PlanAttentionBuckets(AttentionRoute route,
                                      const PassKeys& keys);

// The planning steps, for the tests.
// The segments' items, in order: the segments of one context join its open
// item while the padded area stays within kGroupSlack of what their rows
// see.
std::vector<AttentionItem> MakeItems(const PassKeys& keys);
// Longest queries first; a bucket grows while its padding stays within the
// slack (more for causal ones, whose kernel skips what is masked) and its
// elements per head within kMaxBucketElements.
std::vector<PlannedBucket> PackBuckets(std::vector<AttentionItem> items,
                                       bool causal);

// A bucket's gather indices. Pads repeat a real query and a real, written
// key, so nothing uninitialised is ever read.
struct BucketIndices {
  std::vector<int64_t> q_index;    // [B * Tq] rows of q
  std::vector<int64_t> key_slots;  // [B * Tk] pool slots
  std::vector<int64_t> keep;       // [n] the real rows of the padded [B * Tq]
  std::vector<int64_t> out_rows;   // [n] their rows in q
};
BucketIndices GatherIndices(const PlannedBucket& bucket);

// Writes `allowed` [B, Tq, Tk] (zeroed by the caller): true where a query
// may attend. A pad query sees key 0 only, so its softmax has no NaN.
void FillAllowed(const PlannedBucket& bucket, bool* allowed);

}  // namespace mesa_anyjev::model
