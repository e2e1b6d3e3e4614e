// The keys each query of a forward pass sees: one form, made once by the
// planner where the KV blocks are known (server/engine/pass_planner.h) and
// read as it is by attention (attention_buckets.h plans the CPU and masked
// routes from it, the CUDA variable-length route gathers from it) and by the
// KV writes. Plain C++, so the planning on both sides is unit tested.
//
// A pass is a list of segments, each a run of consecutive tokens of one
// prompt at positions [start, start + length); their query rows follow each
// other in the pass, segment after segment. Keys are slots of the KV pool
// (block * block_tokens + offset). A segment sees the first `start` slots
// of its context (the earlier positions of its prompt: a prompt group's
// prefix, kept once per pass however many segments read it) and then its
// own tokens' slots, causally. A prefix's own chunk lies inside its context
// (`own` empty: its tokens' slots are context[start, start + length)); a
// suffix's tokens have blocks of their own (`own`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mesa_anyjev::model {

struct SegmentKeys {
  int64_t length = 0;  // its tokens, and its query rows
  int64_t start = 0;   // position of its first token
  // Index into PassKeys::contexts; -1 only with start == 0 and `own` set.
  int32_t context = -1;
  // Slots of its own tokens (length of them), or empty when they are
  // context[start, start + length).
  std::vector<int64_t> own;
};

struct PassKeys {
  // Each context's slots of positions [0, n): the keys a prompt group's
  // segments share.
  std::vector<std::vector<int64_t>> contexts;
  std::vector<SegmentKeys> segments;

  // The slot of token `t` (0 <= t < length) of segment `s`: where its key
  // and value are written.
  int64_t OwnSlot(const SegmentKeys& s, int64_t t) const {
    return s.own.empty() ? contexts[static_cast<size_t>(s.context)]
                                   [static_cast<size_t>(s.start + t)]
                         : s.own[static_cast<size_t>(t)];
  }
  // The slot of key `j` (0 <= j < start + length) that segment `s` sees.
  int64_t VisibleSlot(const SegmentKeys& s, int64_t j) const {
    return j < s.start ? contexts[static_cast<size_t>(s.context)]
                                 [static_cast<size_t>(j)]
                       : OwnSlot(s, j - s.start);
  }
};

}  // namespace mesa_anyjev::model
