// Running batch-prior accumulators (see running_priors.h).
#include "common/decision/running_priors.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/decision/contextual.h"

namespace mesa_anyjev::decision {
namespace {

bool SameShape(const Matrix& a, const Matrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols();
}

}  // namespace

absl::StatusOr<PriorAccumulator> MakePriorAccumulator(const std::string& field,
                                                      int64_t shifts, int64_t k,
                                                      const double* sum,
                                                      int64_t size, int64_t n) {
  auto invalid = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
  };
  if (shifts < 1 || shifts > kMaxPriorDim) {
    return invalid(
        absl::StrCat("shifts=", shifts, " is outside [1, ", kMaxPriorDim, "]"));
  }
  if (k < 1 || k > kMaxPriorDim) {
    return invalid(
        absl::StrCat("k=", k, " is outside [1, ", kMaxPriorDim, "]"));
  }
  if (size != shifts * k) {
    return invalid(
        absl::StrCat("sum has ", size, " values; shifts * k = ", shifts * k));
  }
  // n bounds the sums, and doubles count states exactly up to 2^53.
  if (n < 1 || n > (int64_t{1} << 53)) {
    return invalid(absl::StrCat("n=", n, " is outside [1, 2^53]"));
  }
  PriorAccumulator out;
  out.sum = Matrix(shifts, k);
  out.n = n;
  const double bound = static_cast<double>(n) * (1.0 + 1e-9);
  for (int64_t i = 0; i < size; ++i) {
    if (!std::isfinite(sum[i]) || sum[i] < 0.0 || sum[i] > bound) {
      return invalid(absl::StrCat("sum[", i, "]=", sum[i],
                                  " is not a sum of n=", n, " probabilities"));
    }
    out.sum(i / k, i % k) = sum[i];
  }
  return out;
}

std::optional<Matrix> RunningPriors::AddAndPrior(const std::string& key,
                                                 const Matrix& batch_sum,
                                                 int64_t n, int64_t min_n) {
  absl::MutexLock lock(&mu_);
  PriorAccumulator& entry = entries_[key];
  if (!SameShape(entry.sum, batch_sum)) {
    entry.sum = Matrix::Zero(batch_sum.rows(), batch_sum.cols());
    entry.n = 0;
  }
  entry.sum += batch_sum;
  entry.n += n;
  if (entry.n < min_n) return std::nullopt;
  return BatchPrior(entry.sum / static_cast<double>(entry.n));
}

std::optional<Matrix> RunningPriors::Prior(const std::string& key,
                                           int64_t min_n) const {
  absl::MutexLock lock(&mu_);
  const auto it = entries_.find(key);
  if (it == entries_.end() || it->second.n < min_n) return std::nullopt;
  return BatchPrior(it->second.sum / static_cast<double>(it->second.n));
}

std::optional<PriorAccumulator> RunningPriors::Get(
    const std::string& key) const {
  absl::MutexLock lock(&mu_);
  const auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void RunningPriors::Merge(const std::string& key,
                          const PriorAccumulator& other) {
  absl::MutexLock lock(&mu_);
  const auto it = entries_.find(key);
  if (it == entries_.end()) {
    entries_[key] = other;
  } else if (SameShape(it->second.sum, other.sum)) {
    it->second.sum += other.sum;
    it->second.n += other.n;
  }
}

void RunningPriors::Add(const std::string& key, const Matrix& delta_sum,
                        int64_t delta_n) {
  absl::MutexLock lock(&mu_);
  PriorAccumulator& entry = entries_[key];
  if (!SameShape(entry.sum, delta_sum)) {
    entry.sum = Matrix::Zero(delta_sum.rows(), delta_sum.cols());
    entry.n = 0;
  }
  entry.sum += delta_sum;
  entry.n += delta_n;
}

void RunningPriors::AddChange(const std::string& key,
                              const std::optional<PriorAccumulator>& before,
                              const PriorAccumulator& after) {
  Matrix delta = after.sum;
  int64_t n = after.n;
  if (before.has_value() && SameShape(before->sum, delta)) {
    delta -= before->sum;
    n -= before->n;
  }
  if (n > 0) Add(key, delta, n);
}

PriorTable RunningPriors::Table() const {
  absl::MutexLock lock(&mu_);
  return PriorTable(entries_.begin(), entries_.end());
}

void RunningPriors::Reset(const std::string& key) {
  absl::MutexLock lock(&mu_);
  entries_.erase(key);
}

void RunningPriors::ResetPrefix(const std::string& prefix) {
  absl::MutexLock lock(&mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (absl::StartsWith(it->first, prefix)) {
      entries_.erase(it++);
    } else {
      ++it;
    }
  }
}

void RunningPriors::ResetAll() {
  absl::MutexLock lock(&mu_);
  entries_.clear();
}

RunningPriors& TenantPriors::Of(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<RunningPriors>& priors = by_tenant_[tenant];
  if (priors == nullptr) priors = std::make_unique<RunningPriors>();
  return *priors;
}

const RunningPriors* TenantPriors::Find(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  const auto it = by_tenant_.find(tenant);
  return it != by_tenant_.end() ? it->second.get() : nullptr;
}

}  // namespace mesa_anyjev::decision
