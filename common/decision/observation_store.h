// The labelled states observe() has recorded, per question key, and when
// each key's head is fit next (docs/decision.md, observe): at max(fit_at, 8,
// 2K) labels first, then at max(next + 1, round(n x refit_factor)). One fit
// at a time per key: states recorded while one runs wait for the next
// threshold. Safe under concurrent callers.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/decision/question.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::decision {

// One question's observations as a heads/export file holds them. Without a
// question (a file that does not say it) they only join a record the store
// has.
struct LoadedObservations {
  std::string key;
  std::optional<Question> question;
  std::vector<std::string> states;
  std::vector<int> labels;
  std::optional<int> fits;
  std::optional<int> next_fit;
};

class ObservationStore {
 public:
  // What a head is fit on when a key reaches its next fit: the question as
  // first recorded and every state recorded so far.
  struct FitDue {
    Question question;
    std::vector<std::string> states;
    std::vector<int> labels;
  };

  // Records one labelled state of `question` (a key seen first fits at
  // `first_fit`); returns what to fit on when the key's count reaches its
  // next fit and no fit of it is running. Fitted must follow.
  std::optional<FitDue> Record(const Question& question,
                               const std::string& state, int label,
                               int first_fit);
  // Ends the fit Record started; after one that succeeded on n labels, the
  // next is at max(next + 1, round(n x refit_factor)).
  void Fitted(const std::string& key, bool succeeded, size_t n_labels,
              double refit_factor);

  // Adds a file's observations to the records (a key new to the store fits
  // first at 30); refused, with nothing changed, when a label is no option
  // index of its question.
  absl::Status Merge(const std::vector<LoadedObservations>& loaded);
  // Every record, {key: {question_id, kind, text, options, states, labels,
  // fits, next_fit}} in the order keys were first recorded.
  nlohmann::ordered_json ToJson() const;

 private:
  struct Observed {
    Question question;
    std::vector<std::string> states;
    std::vector<int> labels;
    int fits = 0;
    int next_fit = 30;
    bool fitting = false;
  };

  Observed* Start(const std::string& key, const Question& question,
                  int next_fit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<Observed>> observed_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace mesa_anyjev::decision
