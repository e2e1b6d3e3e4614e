// The L2 heads a decider holds and how a question finds one
// (docs/decision.md, Routing and adaptation; anyjev Decider.route): by exact
// key; else, in insertion order, a head of the same kind and K whose option
// tuple equals the question's ("reworded"), or whose option set does when it
// was fit on random listings (probabilities mapped back by option text).
// Also the label-free adaptation statistics per asked key. Safe under
// concurrent callers: heads are immutable once stored and swapped whole.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/decision/linear_head.h"
#include "common/decision/question.h"

namespace mesa_anyjev::decision {

struct HeadEntry {
  LinearHead head;
  int layer_abs = 0;
  std::string question_id;
  // The layout it was fit on; unset kind or options (a file without them)
  // never route by rewording.
  std::optional<QuestionKind> kind;
  std::optional<std::string> text;
  std::optional<std::vector<std::string>> options;
  // 16 hex of sha256 over the entry's exported JSON: the same after an
  // export and a reload.
  std::string version;
};

struct RoutedHead {
  std::shared_ptr<const HeadEntry> entry;
  bool exact = false;
  // index_map[i] = the head's column for the question's option i; empty
  // when the orders agree.
  std::vector<int> index_map;
};

// Label-free adaptation statistics of one asked key: float64 sums.
struct AdaptationStats {
  std::vector<double> sum;
  std::vector<double> sumsq;
  int64_t n = 0;
};

class HeadStore {
 public:
  // Stores (or replaces, keeping its place in the routing order) the head
  // of `key`.
  void Put(const std::string& key, std::shared_ptr<const HeadEntry> entry);
  // Drops the head of `key`; callers holding its entry keep it.
  void Remove(const std::string& key);
  std::optional<RoutedHead> Route(const Question& question) const;
  bool Has(const std::string& key) const;
  // Heads in insertion order.
  std::vector<std::pair<std::string, std::shared_ptr<const HeadEntry>>> All()
      const;

  // Adds the rows of `features` [N, d] (float64 sums) to the key's
  // statistics, then returns the totals.
  AdaptationStats AddFeatures(const std::string& key, const Matrix& features);
  // What AddFeatures would return, with nothing stored.
  AdaptationStats WithFeatures(const std::string& key,
                               const Matrix& features) const;
  void SetAdaptation(const std::string& key, AdaptationStats stats);
  std::vector<std::pair<std::string, AdaptationStats>> Adaptations() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<const HeadEntry>> heads_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::string> adapt_order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, AdaptationStats> adapt_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mesa_anyjev::decision
