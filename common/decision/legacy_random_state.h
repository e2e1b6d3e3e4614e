// numpy's legacy RandomState(seed).permutation(n), bit for bit: MT19937
// seeded by init_genrand(seed), then a Fisher-Yates shuffle from the end
// drawing each index with random_interval (masked 32-bit draws, rejected
// above the bound). L2's fold assignment and random listing orders come
// from it (docs/decision.md, L2: heads).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace mesa_anyjev::decision {

class LegacyRandomState {
 public:
  explicit LegacyRandomState(uint32_t seed) : engine_(seed) {}

  // np.random.RandomState(seed).permutation(n) continued from this state.
  std::vector<int> Permutation(int n);

  // random_interval(max): uniform in [0, max].
  uint64_t Interval(uint64_t max);

 private:
  // std::mt19937 is MT19937 with numpy's init_genrand seeding and genrand
  // output.
  std::mt19937 engine_;
};

}  // namespace mesa_anyjev::decision
