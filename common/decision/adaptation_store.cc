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

void AdaptationStore::Add(const std::string& tenant, const std::string& key,
                          const Matrix& features) {
  absl::MutexLock lock(&mu_);
  if (known_.insert(key).second) order_.push_back(key);
  Accumulate(features, &layers_[tenant][key]);
}

AdaptationStats AdaptationStore::ViewOf(const std::string& tenant,
                                        const std::string& key) const {
  AdaptationStats view;
  if (const auto it = base_.find(key); it != base_.end()) view = it->second;
  const auto layers = layers_.find(tenant);
  if (layers == layers_.end()) return view;
  const auto it = layers->second.find(key);
  if (it == layers->second.end() || it->second.n == 0) return view;
  const AdaptationStats& own = it->second;
  // A layer of another width was started again from its features.
  if (view.sum.size() != own.sum.size()) return own;
  for (size_t j = 0; j < own.sum.size(); ++j) {
    view.sum[j] += own.sum[j];
    view.sumsq[j] += own.sumsq[j];
  }
  view.n += own.n;
  return view;
}

AdaptationStats AdaptationStore::With(const std::string& tenant,
                                      const std::string& key,
                                      const Matrix& features) const {
  AdaptationStats stats;
  {
    absl::MutexLock lock(&mu_);
    stats = ViewOf(tenant, key);
  }
  Accumulate(features, &stats);
  return stats;
}

void AdaptationStore::Set(const std::string& key, AdaptationStats stats) {
  absl::MutexLock lock(&mu_);
  if (known_.insert(key).second) order_.push_back(key);
  base_[key] = std::move(stats);
  for (auto& [tenant, layer] : layers_) layer.erase(key);
}

std::vector<std::pair<std::string, AdaptationStats>> AdaptationStore::All(
    const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::string, AdaptationStats>> out;
  for (const std::string& key : order_) {
    out.emplace_back(key, ViewOf(tenant, key));
  }
  return out;
}

}  // namespace mesa_anyjev::decision
