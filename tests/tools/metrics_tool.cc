// metrics_tool: common/eval as a command, for tests/e2e/test_eval_metrics.py,
// which checks it against scikit-learn and against Python written from the
// definitions in docs/learning.md. Reads JSON cases on stdin:
//
//   {"cases": [{"probs": [[...], ...], "labels": [...],
//               "probs_flipped": [[...], ...] (optional),
//               "risks": [0.05, 0.1] (optional)}, ...]}
//
// and writes {"results": [...]}, one per case: {"n", "acc", "macro_f1",
// "brier", "nll", "ece", "flip", "cov@5%", "aurc", "coverage" {risk: cov},
// "bins" [[count, conf, acc]], "curve" [[coverage, risk]]}, or {"error":
// message} when the metrics refuse the input.
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/eval/metrics.h"

namespace {

using mesa_anyjev::eval::ProbRows;
using nlohmann::json;

json RunCase(const json& c) {
  const ProbRows probs = c.at("probs").get<ProbRows>();
  const std::vector<int> labels = c.at("labels").get<std::vector<int>>();
  ProbRows flipped;
  const bool has_flipped = c.contains("probs_flipped");
  if (has_flipped) flipped = c.at("probs_flipped").get<ProbRows>();
  auto summary = mesa_anyjev::eval::Summarize(probs, labels,
                                              has_flipped ? &flipped : nullptr);
  if (!summary.ok())
    return {{"error", std::string(summary.status().message())}};
  json out = {{"n", summary->n},
              {"acc", summary->acc},
              {"macro_f1", summary->macro_f1},
              {"brier", summary->brier},
              {"nll", summary->nll},
              {"ece", summary->ece},
              {"cov@5%", summary->cov5},
              {"aurc", summary->aurc},
              {"flip", nullptr}};
  if (summary->flip.has_value()) out["flip"] = *summary->flip;
  out["coverage"] = json::object();
  for (double risk : c.value("risks", std::vector<double>{})) {
    auto cov = mesa_anyjev::eval::CoverageAtRisk(probs, labels, risk);
    if (cov.ok()) out["coverage"][std::to_string(risk)] = *cov;
  }
  const auto bins = mesa_anyjev::eval::ReliabilityBins(probs, labels);
  const auto curve = mesa_anyjev::eval::RiskCoverage(probs, labels);
  if (!bins.ok() || !curve.ok()) return {{"error", "curves refused"}};
  out["bins"] = json::array();
  for (const auto& bin : *bins) {
    out["bins"].push_back({bin.count, bin.confidence, bin.accuracy});
  }
  out["curve"] = json::array();
  for (const auto& point : *curve) {
    out["curve"].push_back({point.coverage, point.risk});
  }
  return out;
}

}  // namespace

int main() {
  const std::string input((std::istreambuf_iterator<char>(std::cin)), {});
  json request;
  try {
    request = json::parse(input);
  } catch (const json::exception& e) {
    std::cerr << "metrics_tool: not JSON: " << e.what() << "\n";
    return 2;
  }
  json results = json::array();
  for (const json& c : request.at("cases")) results.push_back(RunCase(c));
  std::cout << json{{"results", results}}.dump() << "\n";
  return 0;
}
