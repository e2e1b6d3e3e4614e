// A small pass padded to a fixed shape, so a CUDA graph captured once for
// that shape replays it (server/model/pass_graphs.h): the host's launch cost
// of a forward (some 2,000 kernels through the dispatcher, a fixed ~12 ms on
// the H200 whatever the pass's size) is paid once per shape, not per pass.
// Plain C++: which bucket a pass takes and how it is padded are unit tested.
//
// The shape's static arrays, side by side in one int64 buffer (GraphLayout):
// tokens, positions and KV write slots [T]; output rows [R]; each row's
// label ids [R, L]; copies from and to [T]; the variable-length kernel's
// cumulative lengths [T + 2] each and key slots [K]. Padding never changes
// what a real row computes: pad tokens (id 0, position 0) write to and read
// from the pool's scratch slot only, as one extra sequence that attends to
// itself; sequences after it are empty; pad output rows repeat row 0, pad
// labels a row's first; pad copies copy the scratch slot onto itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "server/model/attention_buckets.h"
#include "server/model/pass_plan.h"

namespace mesa_anyjev::model {

struct GraphShape {
  int64_t tokens = 0, rows = 0, keys = 0, labels = 0;
  int32_t top_k = 0;
  bool operator==(const GraphShape&) const = default;
};

// Offsets of each array in a shape's buffer.
struct GraphLayout {
  int64_t tokens, positions, slots, rows, labels, copy_from, copy_to, cu_q,
      cu_k, keys, size;
  static GraphLayout Of(const GraphShape& shape);
};

// The smallest shape that holds the pass: powers of two, tokens from 64 to
// `max_tokens`, rows from 8, keys from 1,024 (the pad sequence's keys
// included), labels from 4; nullopt when none does (too many tokens, keys,
// copies, or no outputs), and the pass runs eagerly.
std::optional<GraphShape> FitGraphShape(const PassArrays& pass,
                                        const VarlenLayout& attention,
                                        int64_t max_tokens, int32_t top_k);

// The pass in `shape`'s layout, padded with `scratch_slot`.
std::vector<int64_t> PadForGraph(const PassArrays& pass,
                                 const VarlenLayout& attention,
                                 const GraphShape& shape, int64_t scratch_slot);

// A buffer of pads only (every token a pad), for capturing the shape.
std::vector<int64_t> PadsOnly(const GraphShape& shape, int64_t scratch_slot);

}  // namespace mesa_anyjev::model
