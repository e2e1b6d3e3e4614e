// Heads, routing and adaptation statistics (see head_store.h).
#include "common/decision/head_store.h"

#include <algorithm>
#include <set>

namespace mesa_anyjev::decision {

void HeadStore::Put(const std::string& key,
                    std::shared_ptr<const HeadEntry> entry) {
  absl::MutexLock lock(&mu_);
  if (!heads_.contains(key)) order_.push_back(key);
  heads_[key] = std::move(entry);
}

void HeadStore::Remove(const std::string& key) {
  absl::MutexLock lock(&mu_);
  if (heads_.erase(key) > 0) {
    order_.erase(std::find(order_.begin(), order_.end(), key));
  }
}

bool HeadStore::Has(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  return heads_.contains(key);
}

std::optional<RoutedHead> HeadStore::Route(const Question& question) const {
  absl::MutexLock lock(&mu_);
  if (const auto it = heads_.find(question.key()); it != heads_.end()) {
    return RoutedHead{it->second, true, {}};
  }
  for (const std::string& key : order_) {
    const std::shared_ptr<const HeadEntry>& entry = heads_.at(key);
    if (!entry->options.has_value() || entry->kind != question.kind() ||
        static_cast<int>(entry->options->size()) != question.k()) {
      continue;
    }
    const std::vector<std::string>& opts = *entry->options;
    if (opts == question.options()) return RoutedHead{entry, false, {}};
    const std::string listing = entry->head.params.value("listing", "");
    if (listing == "random" &&
        std::set<std::string>(opts.begin(), opts.end()) ==
            std::set<std::string>(question.options().begin(),
                                  question.options().end())) {
      RoutedHead routed{entry, false, {}};
      for (const std::string& option : question.options()) {
        routed.index_map.push_back(static_cast<int>(
            std::find(opts.begin(), opts.end(), option) - opts.begin()));
      }
      return routed;
    }
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, std::shared_ptr<const HeadEntry>>>
HeadStore::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::string, std::shared_ptr<const HeadEntry>>> out;
  for (const std::string& key : order_) out.emplace_back(key, heads_.at(key));
  return out;
}

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

AdaptationStats HeadStore::AddFeatures(const std::string& key,
                                       const Matrix& features) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = adapt_.try_emplace(key);
  if (inserted) adapt_order_.push_back(key);
  Accumulate(features, &it->second);
  return it->second;
}

AdaptationStats HeadStore::WithFeatures(const std::string& key,
                                        const Matrix& features) const {
  AdaptationStats stats;
  {
    absl::MutexLock lock(&mu_);
    if (const auto it = adapt_.find(key); it != adapt_.end()) {
      stats = it->second;
    }
  }
  Accumulate(features, &stats);
  return stats;
}

void HeadStore::SetAdaptation(const std::string& key, AdaptationStats stats) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = adapt_.try_emplace(key);
  if (inserted) adapt_order_.push_back(key);
  it->second = std::move(stats);
}

std::vector<std::pair<std::string, AdaptationStats>> HeadStore::Adaptations()
    const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::string, AdaptationStats>> out;
  for (const std::string& key : adapt_order_) {
    out.emplace_back(key, adapt_.at(key));
  }
  return out;
}

}  // namespace mesa_anyjev::decision
