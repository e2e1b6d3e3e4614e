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
//
// A case {"compare": {"a": rows, "b": rows, "labels": [...], "resamples",
// "seed"}} runs eval::CompareModels instead (common/eval/agreement.h) and
// answers its figures; {"wilson": [k, n]} answers [lo, hi]; {"percentile":
// [values, q]} answers numpy.percentile's value.
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/eval/agreement.h"
#include "common/eval/metrics.h"

namespace {

using mesa_anyjev::eval::ProbRows;
using nlohmann::json;

json Diff(const mesa_anyjev::eval::PairedDifference& d) {
  return {{"value", d.value}, {"lo", d.interval.lo}, {"hi", d.interval.hi}};
}

json Figures(const mesa_anyjev::eval::ModelFigures& f) {
  return {{"acc", f.acc}, {"nll", f.nll}, {"ece", f.ece}};
}

json CompareCase(const json& c) {
  mesa_anyjev::eval::BootstrapOptions options;
  options.resamples = c.at("resamples").get<int32_t>();
  options.seed = c.at("seed").get<uint32_t>();
  auto got = mesa_anyjev::eval::CompareModels(
      c.at("a").get<ProbRows>(), c.at("b").get<ProbRows>(),
      c.at("labels").get<std::vector<int>>(), options);
  if (!got.ok()) return {{"error", std::string(got.status().message())}};
  return {{"n", got->n},
          {"flips", got->flips},
          {"flip_rate", got->flip_rate},
          {"flip_lo", got->flip_interval.lo},
          {"flip_hi", got->flip_interval.hi},
          {"mean_abs_dp", got->mean_abs_dp},
          {"p95_abs_dp", got->p95_abs_dp},
          {"a", Figures(got->a)},
          {"b", Figures(got->b)},
          {"acc", Diff(got->acc)},
          {"nll", Diff(got->nll)},
          {"ece", Diff(got->ece)}};
}

json RunCase(const json& c) {
  if (c.contains("compare")) return CompareCase(c.at("compare"));
  if (c.contains("wilson")) {
    const auto w =
        mesa_anyjev::eval::WilsonInterval(c.at("wilson").at(0).get<int64_t>(),
                                          c.at("wilson").at(1).get<int64_t>());
    return json::array({w.lo, w.hi});
  }
  if (c.contains("percentile")) {
    return mesa_anyjev::eval::Percentile(
        c.at("percentile").at(0).get<std::vector<double>>(),
        c.at("percentile").at(1).get<double>());
  }
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
