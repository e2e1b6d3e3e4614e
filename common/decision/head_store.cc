// Heads and routing (see head_store.h).
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

}  // namespace mesa_anyjev::decision
