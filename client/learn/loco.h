// Leave-one-card-out evaluation (docs/learning.md): per
// card in sorted order, a fresh decider is fit on the other cards' labels
// and decides that card's states at the level; the pooled numbers are the
// metrics over the union of held-out decisions, never a mean of per-fold
// values. learn fit and the bench's L1/L2 cells both run this, so their
// figures agree.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/backends/provider.h"
#include "client/learn/label_store.h"
#include "common/decision/decision.h"
#include "common/decision/level.h"
#include "common/decision/question.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::learn {

using client::Provider;

inline constexpr int kMinTrainPerClass = 30;
inline constexpr int kMinHeldoutPerClass = 5;

struct LocoOutcome {
  nlohmann::ordered_json folds = nlohmann::ordered_json::object();
  nlohmann::ordered_json skipped_folds = nlohmann::ordered_json::object();
  std::vector<decision::Decision> decisions;  // every held-out decision
  std::vector<int> labels;                    // their gold labels
  int n_folds = 0;
};

// Called before each fold: (card, fold index, number of folds).
using FoldProgress = std::function<void(const std::string&, int, int)>;

// Noul folds are guarded first: a train side with < 2 classes or a class
// under kMinTrainPerClass is skipped as "insufficient_train_per_class
// {counts}", a held-out side under kMinHeldoutPerClass as
// "insufficient_heldout_per_class {counts}". A fit the provider refuses
// skips the fold as "fit failed: <why>". A held-out decide that fails is the
// error returned.
absl::StatusOr<LocoOutcome> LeaveOneCardOut(
    Provider& provider, const decision::Question& question,
    const LabelledSet& set, decision::Level level,
    const FoldProgress& progress = nullptr);

// Rendered state texts of a labelled set (RenderState of each).
std::vector<std::string> RenderStates(
    const std::vector<nlohmann::ordered_json>& states);

}  // namespace mesa_anyjev::learn
