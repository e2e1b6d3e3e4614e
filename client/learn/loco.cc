// Leave-one-card-out (see loco.h).
#include "client/learn/loco.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "client/learn/cell.h"

namespace mesa_anyjev::learn {
namespace {

// < 2 classes, or a class under `minimum`.
bool Thin(const std::map<int, int>& counts, int minimum) {
  if (counts.size() < 2) return true;
  return std::any_of(counts.begin(), counts.end(),
                     [&](const auto& e) { return e.second < minimum; });
}

}  // namespace

std::vector<std::string> RenderStates(
    const std::vector<nlohmann::ordered_json>& states) {
  std::vector<std::string> out;
  out.reserve(states.size());
  for (const auto& state : states) out.push_back(RenderState(state));
  return out;
}

absl::StatusOr<LocoOutcome> LeaveOneCardOut(Provider& provider,
                                            const decision::Question& question,
                                            const LabelledSet& set,
                                            decision::Level level,
                                            const FoldProgress& progress) {
  const bool noul = question.kind() == decision::QuestionKind::kNoul;
  const std::vector<std::string> rendered = RenderStates(set.states);
  const std::set<std::string> cards(set.cards.begin(), set.cards.end());
  LocoOutcome out;
  int fold = 0;
  for (const std::string& card : cards) {
    if (progress) progress(card, fold, static_cast<int>(cards.size()));
    ++fold;
    std::vector<std::string> train_states, test_states;
    std::vector<int> train_labels, test_labels;
    for (size_t i = 0; i < set.size(); ++i) {
      const bool held_out = set.cards[i] == card;
      (held_out ? test_states : train_states).push_back(rendered[i]);
      (held_out ? test_labels : train_labels).push_back(set.labels[i]);
    }
    if (noul) {
      const std::map<int, int> train = ClassCounts(train_labels);
      const std::map<int, int> test = ClassCounts(test_labels);
      if (Thin(train, kMinTrainPerClass)) {
        out.skipped_folds[card] =
            absl::StrCat("insufficient_train_per_class ", PyCounts(train));
        continue;
      }
      if (Thin(test, kMinHeldoutPerClass)) {
        out.skipped_folds[card] =
            absl::StrCat("insufficient_heldout_per_class ", PyCounts(test));
        continue;
      }
    }
    absl::StatusOr<nlohmann::ordered_json> artifacts =
        provider.FitArtifact(question, train_states, train_labels, level);
    if (!artifacts.ok()) {
      out.skipped_folds[card] =
          absl::StrCat("fit failed: ", artifacts.status().message());
      continue;
    }
    absl::StatusOr<std::vector<decision::Decision>> decided =
        provider.DecideWith(*artifacts, test_states, question, level);
    if (!decided.ok()) {
      return absl::Status(
          decided.status().code(),
          absl::StrCat("fold ", card, ": ", decided.status().message()));
    }
    absl::StatusOr<nlohmann::ordered_json> cell =
        FoldCell(*decided, test_labels, noul);
    if (!cell.ok()) return cell.status();
    out.folds[card] = *std::move(cell);
    ++out.n_folds;
    for (auto& d : *decided) out.decisions.push_back(std::move(d));
    out.labels.insert(out.labels.end(), test_labels.begin(), test_labels.end());
  }
  return out;
}

}  // namespace mesa_anyjev::learn
