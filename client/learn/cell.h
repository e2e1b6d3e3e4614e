// The metrics of a set of decisions against their gold labels: the bench's
// cell (the reference's `_cell`), which leave-one-card-out folds, pooled
// LOCO, learn fit and bench all share, so one pooling rule holds
// (docs/reference.md, One fitting path).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/decision/decision.h"
#include "common/eval/metrics.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::learn {

// Each decision's probabilities (rows of differing width are padded by the
// metrics).
eval::ProbRows ProbsOf(const std::vector<decision::Decision>& decisions);

// {label: count}, labels ascending.
std::map<int, int> ClassCounts(const std::vector<int>& labels);
// As Python prints such a dict: "{0: 8, 1: 4}".
std::string PyCounts(const std::map<int, int>& counts);
// The same as a JSON object {"0": 8, "1": 4}.
nlohmann::ordered_json CountsJson(const std::map<int, int>& counts);

// summarize(...) (acc, macro_f1, brier, nll, ece, flip, cov@5%, aurc, n)
// plus cov@10%, class_counts, n_neg (labels != 0 for a noul, 0 for a
// choice), levels (the sorted set of served levels) and mean_p_true (noul;
// null otherwise). flip: for a noul the mean diagnostics.order_flip_l0 over
// the decisions that have one (null if none); for a choice the reversal
// probe when `flipped` (mapped back to the original order) is given.
absl::StatusOr<nlohmann::ordered_json> Cell(
    const std::vector<decision::Decision>& decisions,
    const std::vector<int>& labels, bool noul,
    const eval::ProbRows* flipped = nullptr);

// A fold's cell: Cell plus blocks_executed (the max) and prior_frozen
// (every prior_method starts "frozen:").
absl::StatusOr<nlohmann::ordered_json> FoldCell(
    const std::vector<decision::Decision>& decisions,
    const std::vector<int>& labels, bool noul);

}  // namespace mesa_anyjev::learn
