// numpy's legacy permutation (see legacy_random_state.h).
#include "common/decision/legacy_random_state.h"

#include <numeric>
#include <utility>

namespace mesa_anyjev::decision {

uint64_t LegacyRandomState::Interval(uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  uint64_t value = 0;
  if (max <= 0xffffffffULL) {
    do {
      value = static_cast<uint64_t>(engine_()) & mask;
    } while (value > max);
  } else {
    // Two 32-bit draws, high word first (numpy's legacy next_uint64).
    do {
      const uint64_t hi = engine_();
      const uint64_t lo = engine_();
      value = ((hi << 32) | lo) & mask;
    } while (value > max);
  }
  return value;
}

std::vector<int> LegacyRandomState::Permutation(int n) {
  std::vector<int> out(n);
  std::iota(out.begin(), out.end(), 0);
  for (int i = n - 1; i >= 1; --i) {
    const int j = static_cast<int>(Interval(static_cast<uint64_t>(i)));
    std::swap(out[i], out[j]);
  }
  return out;
}

}  // namespace mesa_anyjev::decision
