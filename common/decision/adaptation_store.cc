// Label-free adaptation statistics (see adaptation_store.h).
#include "common/decision/adaptation_store.h"

namespace mesa_anyjev::decision {

namespace {

// `stats` with the rows of `features` added (column sums in row order); a
// total of another width starts again from the features.
void Accumulate(const Matrix& features, AdaptationStats* stats) {
  std::vector<double> sum(features.cols(), 0.0);
  std::vector<double> sumsq(features.cols(), 0.0);
  for (Eigen::Index i = 0; i < features.rows(); ++i) {
    for (Eigen::Index j = 0; j < features.cols(); ++j) {
      sum[j] += features(i, j);
      sumsq[j] += features(i, j) * features(i, j);
    }
  }
  if (stats->sum.size() != sum.size()) {
    stats->sum.assign(sum.size(), 0.0);
    stats->sumsq.assign(sum.size(), 0.0);
    stats->n = 0;
  }
  for (size_t j = 0; j < sum.size(); ++j) {
    stats->sum[j] += sum[j];
    stats->sumsq[j] += sumsq[j];
  }
  stats->n += features.rows();
}

}  // namespace

void AdaptationStore::Add(const std::string& key, const Matrix& features) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = stats_.try_emplace(key);
  if (inserted) order_.push_back(key);
  Accumulate(features, &it->second);
}

AdaptationStats AdaptationStore::With(const std::string& key,
                                      const Matrix& features) const {
  AdaptationStats stats;
  {
    absl::MutexLock lock(&mu_);
    if (const auto it = stats_.find(key); it != stats_.end()) {
      stats = it->second;
    }
  }
  Accumulate(features, &stats);
  return stats;
}

void AdaptationStore::Set(const std::string& key, AdaptationStats stats) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = stats_.try_emplace(key);
  if (inserted) order_.push_back(key);
  it->second = std::move(stats);
}

std::vector<std::pair<std::string, AdaptationStats>> AdaptationStore::All()
    const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::string, AdaptationStats>> out;
  for (const std::string& key : order_) out.emplace_back(key, stats_.at(key));
  return out;
}

}  // namespace mesa_anyjev::decision
