// The batch prior's running accumulators (docs/decision.md, L0: shifts and
// priors): per question key, the sum of raw readouts per (shift, position)
// [P, K] and the number of states added. Safe under concurrent callers: adding
// a batch and reading the prior it produces is one step, so a call's prior
// always includes its own batch (the transductive rule) and every batch is
// counted once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/decision/numpy_ops.h"

namespace mesa_anyjev::decision {

struct PriorAccumulator {
  Matrix sum;  // [P, K]
  int64_t n = 0;
};

// A run's accumulators held by the caller instead of the decider, by listing
// key ("<question key>|<listing>"): ordered, so it serialises the same way
// every time (docs/operations.md, several daemons).
using PriorTable = std::map<std::string, PriorAccumulator>;

// An accumulator that came from outside (a request, a daemon's reply), with
// its bounds checked: 1..kMaxPriorDim shifts and options, `sum` holding
// shifts * k finite values in [0, n] (each is a sum of n probabilities), and
// n >= 1. INVALID_ARGUMENT names `field` and the limit.
inline constexpr int64_t kMaxPriorDim = 256;
absl::StatusOr<PriorAccumulator> MakePriorAccumulator(const std::string& field,
                                                      int64_t shifts, int64_t k,
                                                      const double* sum,
                                                      int64_t size, int64_t n);

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
  // Adds what a call added to its copy: `after` less `before` (the copy it
  // started from), so calls that ran side by side on copies all count.
  void AddChange(const std::string& key,
                 const std::optional<PriorAccumulator>& before,
                 const PriorAccumulator& after);
  // Every accumulator, by key.
  PriorTable Table() const;
  void Reset(const std::string& key);
  // Every key that starts with `prefix`.
  void ResetPrefix(const std::string& prefix);
  void ResetAll();

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, PriorAccumulator> entries_
      ABSL_GUARDED_BY(mu_);
};

// Running priors kept apart per tenant (docs/operations.md, "Tenants and
// roles"): a tenant's calls read and add to its own accumulators only, and
// its ResetPriors clears only those; "" is every caller's when auth is off.
class TenantPriors {
 public:
  // The tenant's accumulators, made empty on first use; they live as long
  // as this object (tenants come from the tokens file: a bounded set).
  RunningPriors& Of(const std::string& tenant);
  // The tenant's, or null when it has none yet.
  const RunningPriors* Find(const std::string& tenant) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<RunningPriors>> by_tenant_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace mesa_anyjev::decision
