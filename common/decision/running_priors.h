// The batch prior's running accumulators (decision-method.md 5.3): per
// question key, the sum of raw readouts per (shift, position) [P, K] and the
// number of states added. Safe under concurrent callers: adding a batch and
// reading the prior it produces is one step, so a call's prior always
// includes its own batch (the transductive rule) and every batch is counted
// once.
#pragma once

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/decision/numpy_ops.h"

namespace mesa_anyjev::decision {

struct PriorAccumulator {
  Matrix sum;  // [P, K]
  int64_t n = 0;
};

class RunningPriors {
 public:
  // Adds `batch_sum` (the sum of n readouts) to the key's accumulator, then
  // returns the batch prior of the total when it counts at least `min_n`
  // states. An accumulator of another shape (a different shift count) is
  // replaced.
  std::optional<Matrix> AddAndPrior(const std::string& key,
                                    const Matrix& batch_sum, int64_t n,
                                    int64_t min_n);
  // The key's batch prior when it counts at least `min_n` states.
  std::optional<Matrix> Prior(const std::string& key, int64_t min_n) const;
  // A copy of the key's accumulator.
  std::optional<PriorAccumulator> Get(const std::string& key) const;
  // Adds another accumulator of the same shape, or takes it when the key has
  // none; one of another shape is dropped (the key keeps its own).
  void Merge(const std::string& key, const PriorAccumulator& other);
  // Adds delta_sum and delta_n; replaces an accumulator of another shape.
  void Add(const std::string& key, const Matrix& delta_sum, int64_t delta_n);
  void Reset(const std::string& key);
  // Every key that starts with `prefix`.
  void ResetPrefix(const std::string& prefix);
  void ResetAll();

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, PriorAccumulator> entries_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace mesa_anyjev::decision
