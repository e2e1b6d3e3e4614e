// learn fit (docs/learning.md): one question's labelled states, the
// refusals with the reference's statuses and details, leave-one-card-out
// with pooled metrics, then a final fit on every label in a fresh decider.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "client/backends/provider.h"
#include "client/learn/label_store.h"
#include "client/learn/loco.h"
#include "client/policy/policy.h"
#include "common/decision/level.h"
#include "common/questions/question_set.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::learn {

inline constexpr int kMinLabelsL1 = 100;  // the plan: 100-500 for L1
inline constexpr int kMinLabelsL2 = 40;   // anyjev's floor is max(8, 2K)

struct FitReport {
  std::string question_id;
  std::string level;
  // fitted | insufficient_labels | insufficient_negatives | no_folds |
  // unsupported
  std::string status;
  int n_labels = 0;
  std::map<int, int> class_counts;
  nlohmann::ordered_json folds = nlohmann::ordered_json::object();
  nlohmann::ordered_json skipped_folds = nlohmann::ordered_json::object();
  nlohmann::ordered_json loco = nullptr;  // pooled LOCO, null without
  std::optional<int> version;             // set once a bundle is written
  std::string artifact_path;              // "" = null
  std::string detail;
  // fitted only: the final fit's heads/export file, and the manifest's fit
  // extra {fitted_on, per_question, validation, questions_lock_sha}.
  nlohmann::ordered_json artifacts = nullptr;
  nlohmann::ordered_json manifest_extra = nullptr;
};

struct FitOptions {
  decision::Level level = decision::Level::kL1;
  bool loco = true;
  // Each fold as it starts (card, i, n), then the final fit as
  // ("final fit on every label", n, n); n = 0 without LOCO.
  FoldProgress progress;
};

// fit_question. Refusals are reports (status and detail); an error is a
// provider that failed while deciding or in the final fit.
absl::StatusOr<FitReport> FitQuestion(Provider& provider,
                                      const LabelStore& store,
                                      const questions::QuestionEntry& entry,
                                      const policy::Thresholds& thresholds,
                                      const FitOptions& options);

// The pooled LOCO numbers: acc, ece, brier, nll, cov@5%, cov@10%,
// n, n_neg (summed), n_folds; from the cell over all held-out decisions.
nlohmann::ordered_json PooledLoco(const nlohmann::ordered_json& cell,
                                  int n_folds);

// The report as learn fit prints it: every field but the artifacts and
// manifest, folds reduced to {n, acc, ece, cov@5%, n_neg, prior_frozen}.
nlohmann::ordered_json ReportJson(const FitReport& report);

}  // namespace mesa_anyjev::learn
