// The label-free adaptation statistics of L2 heads (docs/decision.md,
// Routing and adaptation): per asked question key, float64 sums of the
// hidden states its head read and their count, from which a head routed to
// that key re-estimates its standardiser. Safe under concurrent callers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/decision/numpy_ops.h"

namespace mesa_anyjev::decision {

// One asked key's statistics: column sums and sums of squares, float64.
struct AdaptationStats {
  std::vector<double> sum;
  std::vector<double> sumsq;
  int64_t n = 0;
};

class AdaptationStore {
 public:
  // Adds the rows of `features` [N, d] to the key's statistics (a total of
  // another width starts again from them).
  void Add(const std::string& key, const Matrix& features);
  // What the key's statistics would be after Add, with nothing stored.
  AdaptationStats With(const std::string& key, const Matrix& features) const;
  void Set(const std::string& key, AdaptationStats stats);
  // Every key's statistics, in the order keys were first added.
  std::vector<std::pair<std::string, AdaptationStats>> All() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, AdaptationStats> stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mesa_anyjev::decision
