#include "server/model/graph_pass.h"

#include <algorithm>

namespace mesa_anyjev::model {
namespace {

int64_t PowerOfTwoAtLeast(int64_t n, int64_t floor) {
  int64_t p = floor;
  while (p < n) p *= 2;
  return p;
}

// Copies `values` to `out` at `offset`, then `fill` up to `size` entries.
void Put(std::vector<int64_t>& out, int64_t offset,
         const std::vector<int64_t>& values, int64_t size, int64_t fill) {
  std::copy(values.begin(), values.end(), out.begin() + offset);
  std::fill(out.begin() + offset + static_cast<int64_t>(values.size()),
            out.begin() + offset + size, fill);
}

}  // namespace

GraphLayout GraphLayout::Of(const GraphShape& s) {
  GraphLayout l{};
  int64_t at = 0;
  auto take = [&at](int64_t n) {
    const int64_t offset = at;
    at += n;
    return offset;
  };
  l.tokens = take(s.tokens);
  l.positions = take(s.tokens);
  l.slots = take(s.tokens);
  l.rows = take(s.rows);
  l.labels = take(s.rows * s.labels);
  l.copy_from = take(s.tokens);
  l.copy_to = take(s.tokens);
  l.cu_q = take(s.tokens + 2);
  l.cu_k = take(s.tokens + 2);
  l.keys = take(s.keys);
  l.size = at;
  return l;
}

std::optional<GraphShape> FitGraphShape(const PassArrays& pass,
                                        const VarlenLayout& attention,
                                        int64_t max_tokens, int32_t top_k) {
  const int64_t n = static_cast<int64_t>(pass.tokens.size());
  const int64_t r = static_cast<int64_t>(pass.rows.size());
  const int64_t sequences = static_cast<int64_t>(attention.cu_q.size()) - 1;
  if (n == 0 || r == 0 || n > max_tokens) return std::nullopt;
  GraphShape shape;
  shape.tokens = PowerOfTwoAtLeast(n, 64);
  if (shape.tokens > max_tokens) return std::nullopt;
  shape.rows = std::min(PowerOfTwoAtLeast(r, 8), shape.tokens);
  if (r > shape.rows) return std::nullopt;
  // The pad sequence attends to as many scratch keys as it has rows.
  shape.keys = PowerOfTwoAtLeast(
      static_cast<int64_t>(attention.keys.size()) + shape.tokens - n, 1024);
  shape.labels = PowerOfTwoAtLeast(pass.label_width, 4);
  shape.top_k = top_k;
  // Sequences: the pass's and the pad one, within T + 1 (a sequence has at
  // least one token, so a pass of n tokens has at most n).
  if (sequences + 1 > shape.tokens + 1 ||
      static_cast<int64_t>(pass.copy_from.size()) > shape.tokens) {
    return std::nullopt;
  }
  return shape;
}

std::vector<int64_t> PadForGraph(const PassArrays& pass,
                                 const VarlenLayout& attention,
                                 const GraphShape& shape,
                                 int64_t scratch_slot) {
  const GraphLayout l = GraphLayout::Of(shape);
  const int64_t n = static_cast<int64_t>(pass.tokens.size());
  const int64_t pads = shape.tokens - n;
  std::vector<int64_t> out(static_cast<size_t>(l.size), 0);
  Put(out, l.tokens, pass.tokens, shape.tokens, 0);
  Put(out, l.positions, pass.positions, shape.tokens, 0);
  Put(out, l.slots, pass.slots, shape.tokens, scratch_slot);
  Put(out, l.rows, pass.rows, shape.rows, pass.rows.front());
  for (int64_t row = 0; row < shape.rows; ++row) {
    const int64_t from =
        std::min<int64_t>(row, static_cast<int64_t>(pass.rows.size()) - 1);
    for (int64_t k = 0; k < shape.labels; ++k) {
      const int64_t kk =
          std::min(k, std::max<int64_t>(pass.label_width - 1, 0));
      out[static_cast<size_t>(l.labels + row * shape.labels + k)] =
          pass.label_width == 0
              ? 0
              : pass.labels[static_cast<size_t>(from * pass.label_width + kk)];
    }
  }
  Put(out, l.copy_from, pass.copy_from, shape.tokens, scratch_slot);
  Put(out, l.copy_to, pass.copy_to, shape.tokens, scratch_slot);
  // The pass's sequences, then the pad sequence (its rows over as many
  // scratch keys, so causally each sees one at least), then empty ones.
  std::vector<int64_t> cu_q = attention.cu_q, cu_k = attention.cu_k;
  if (pads > 0) {
    cu_q.push_back(cu_q.back() + pads);
    cu_k.push_back(cu_k.back() + pads);
  }
  Put(out, l.cu_q, cu_q, shape.tokens + 2, cu_q.back());
  Put(out, l.cu_k, cu_k, shape.tokens + 2, cu_k.back());
  Put(out, l.keys, attention.keys, shape.keys, scratch_slot);
  return out;
}

std::vector<int64_t> PadsOnly(const GraphShape& shape, int64_t scratch_slot) {
  PassArrays none;
  none.rows = {0};
  VarlenLayout empty;
  std::vector<int64_t> out = PadForGraph(none, empty, shape, scratch_slot);
  return out;
}

}  // namespace mesa_anyjev::model
