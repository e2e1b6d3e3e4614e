// Cells of decisions against labels (see cell.h).
#include "client/learn/cell.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mesa_anyjev::learn {

using Json = nlohmann::ordered_json;

eval::ProbRows ProbsOf(const std::vector<decision::Decision>& decisions) {
  eval::ProbRows rows;
  rows.reserve(decisions.size());
  for (const auto& d : decisions) rows.push_back(d.probs);
  return rows;
}

std::map<int, int> ClassCounts(const std::vector<int>& labels) {
  std::map<int, int> counts;
  for (int y : labels) ++counts[y];
  return counts;
}

std::string PyCounts(const std::map<int, int>& counts) {
  return absl::StrCat(
      "{",
      absl::StrJoin(counts, ", ",
                    [](std::string* out, const std::pair<const int, int>& e) {
                      absl::StrAppend(out, e.first, ": ", e.second);
                    }),
      "}");
}

Json CountsJson(const std::map<int, int>& counts) {
  Json j = Json::object();
  for (const auto& [label, n] : counts) j[std::to_string(label)] = n;
  return j;
}

absl::StatusOr<Json> Cell(const std::vector<decision::Decision>& decisions,
                          const std::vector<int>& labels, bool noul,
                          const eval::ProbRows* flipped) {
  const eval::ProbRows probs = ProbsOf(decisions);
  absl::StatusOr<eval::Summary> s =
      eval::Summarize(probs, labels, noul ? nullptr : flipped);
  if (!s.ok()) return s.status();
  absl::StatusOr<double> cov10 = eval::CoverageAtRisk(probs, labels, 0.10);
  if (!cov10.ok()) return cov10.status();
  Json cell;
  cell["acc"] = s->acc;
  cell["macro_f1"] = s->macro_f1;
  cell["brier"] = s->brier;
  cell["nll"] = s->nll;
  cell["ece"] = s->ece;
  cell["flip"] = nullptr;
  if (noul) {
    double sum = 0.0;
    int n = 0;
    for (const auto& d : decisions) {
      if (d.diagnostics.order_flip_l0.has_value()) {
        sum += *d.diagnostics.order_flip_l0;
        ++n;
      }
    }
    if (n > 0) cell["flip"] = sum / n;
  } else if (s->flip.has_value()) {
    cell["flip"] = *s->flip;
  }
  cell["cov@5%"] = s->cov5;
  cell["aurc"] = s->aurc;
  cell["n"] = s->n;
  cell["cov@10%"] = *cov10;
  const std::map<int, int> counts = ClassCounts(labels);
  cell["class_counts"] = CountsJson(counts);
  int n_neg = 0;
  if (noul) {
    for (int y : labels) n_neg += y != 0 ? 1 : 0;
  }
  cell["n_neg"] = n_neg;
  std::set<std::string> levels;
  for (const auto& d : decisions) levels.insert(decision::LevelName(d.level));
  cell["levels"] = Json(std::vector<std::string>(levels.begin(), levels.end()));
  cell["mean_p_true"] = nullptr;
  if (noul) {
    double sum = 0.0;
    for (const auto& d : decisions) sum += d.probs.empty() ? 0.0 : d.probs[0];
    cell["mean_p_true"] = sum / static_cast<double>(decisions.size());
  }
  return cell;
}

absl::StatusOr<Json> FoldCell(const std::vector<decision::Decision>& decisions,
                              const std::vector<int>& labels, bool noul) {
  absl::StatusOr<Json> cell = Cell(decisions, labels, noul);
  if (!cell.ok()) return cell.status();
  int blocks = 0;
  bool frozen = true;
  for (const auto& d : decisions) {
    blocks = std::max(blocks, d.diagnostics.blocks_executed);
    frozen = frozen && d.diagnostics.prior_method.starts_with("frozen:");
  }
  (*cell)["blocks_executed"] = blocks;
  (*cell)["prior_frozen"] = frozen;
  return cell;
}

}  // namespace mesa_anyjev::learn
