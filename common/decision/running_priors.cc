// Running batch-prior accumulators (see running_priors.h).
#include "common/decision/running_priors.h"

#include "absl/strings/match.h"
#include "common/decision/contextual.h"

namespace mesa_anyjev::decision {
namespace {

bool SameShape(const Matrix& a, const Matrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols();
}

}  // namespace

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

}  // namespace mesa_anyjev::decision
