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
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/decision/numpy_ops.h"

namespace mesa_anyjev::decision {

// One asked key's statistics: column sums and sums of squares, float64.
struct AdaptationStats {
  std::vector<double> sum;
  std::vector<double> sumsq;
  int64_t n = 0;
};

// A loaded file's statistics are the base every tenant starts from; each
// tenant's calls add to a layer of its own (issue 38: state a caller can
// change is its tenant's), so one tenant's traffic never moves the
// standardiser of another's routed heads. With auth off every call is
// tenant "", one layer, as before tenants.
class AdaptationStore {
 public:
  // Adds the rows of `features` [N, d] to the tenant's statistics of the
  // key (a total of another width starts again from them).
  void Add(const std::string& tenant, const std::string& key,
           const Matrix& features);
  // The tenant's statistics of the key (base + its layer) after Add, with
  // nothing stored.
  AdaptationStats With(const std::string& tenant, const std::string& key,
                       const Matrix& features) const;
  // Sets the key's base (a loaded file's); every tenant's layer of the key
  // is dropped, as the statistics a load replaces were.
  void Set(const std::string& key, AdaptationStats stats);
  // The tenant's statistics of every key, in the order keys were first
  // added or set.
  std::vector<std::pair<std::string, AdaptationStats>> All(
      const std::string& tenant) const;

 private:
  using Stats = absl::flat_hash_map<std::string, AdaptationStats>;
  // The tenant's view of one key (mu_ held).
  AdaptationStats ViewOf(const std::string& tenant,
                         const std::string& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> known_ ABSL_GUARDED_BY(mu_);  // order_'s
  Stats base_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Stats> layers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mesa_anyjev::decision
