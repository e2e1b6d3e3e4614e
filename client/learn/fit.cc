// learn fit (see fit.h).
#include "client/learn/fit.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "client/learn/cell.h"
#include "common/decision/py_format.h"
#include "common/questions/question_lock.h"

namespace mesa_anyjev::learn {
namespace {

using Json = nlohmann::ordered_json;

FitReport Refused(FitReport report, std::string status, std::string detail) {
  report.status = std::move(status);
  report.detail = std::move(detail);
  return report;
}

// The final fit's per_question entry in the manifest (docs/bundles.md).
Json PerQuestion(const questions::QuestionEntry& entry, decision::Level level,
                 const FitReport& report, double min_weight,
                 const Json& artifacts) {
  const std::string& key = entry.question.key();
  Json q;
  q["key"] = key;
  q["level"] = decision::LevelName(level);
  q["n_calib"] = report.n_labels;
  q["class_counts"] = CountsJson(report.class_counts);
  q["min_weight"] = min_weight;
  q["layer_abs"] = nullptr;
  q["method"] = nullptr;
  q["temperature"] = nullptr;
  const Json* art = nullptr;
  if (level == decision::Level::kL2 && artifacts.contains("heads") &&
      artifacts["heads"].contains(key)) {
    art = &artifacts["heads"][key];
    q["layer_abs"] = art->value("layer_abs", Json(nullptr));
    q["method"] = art->value("method", Json(nullptr));  // "head:lda", ...
  } else if (artifacts.contains("artifacts") &&
             artifacts["artifacts"].contains(key)) {
    art = &artifacts["artifacts"][key];
    q["method"] = art->value("method", Json(nullptr));
  }
  if (art != nullptr && art->contains("temperature")) {
    q["temperature"] = (*art)["temperature"];
  }
  return q;
}

}  // namespace

Json PooledLoco(const Json& cell, int n_folds) {
  Json pooled;
  for (const char* key :
       {"acc", "ece", "brier", "nll", "cov@5%", "cov@10%", "n", "n_neg"}) {
    pooled[key] = cell.at(key);
  }
  pooled["n_folds"] = n_folds;
  return pooled;
}

absl::StatusOr<FitReport> FitQuestion(Provider& provider,
                                      const LabelStore& store,
                                      const questions::QuestionEntry& entry,
                                      const policy::Thresholds& thresholds,
                                      const FitOptions& options) {
  const decision::Question& question = entry.question;
  const bool noul = question.kind() == decision::QuestionKind::kNoul;
  const LabelledSet set =
      LabelledStates(store, question, thresholds.min_weight);
  FitReport report;
  report.question_id = entry.id();
  report.level = decision::LevelName(options.level);
  report.n_labels = static_cast<int>(set.size());
  report.class_counts = ClassCounts(set.labels);

  if (options.level != decision::Level::kL1 &&
      options.level != decision::Level::kL2) {
    return Refused(std::move(report), "unsupported",
                   absl::StrCat("level '", report.level, "'"));
  }
  if (options.level == decision::Level::kL2 && !provider.info().hidden_states) {
    return Refused(std::move(report), "unsupported",
                   absl::StrCat("L2 needs hidden states; backend ",
                                provider.info().model, " has none (D11)"));
  }
  const int minimum =
      options.level == decision::Level::kL1 ? kMinLabelsL1 : kMinLabelsL2;
  if (report.n_labels < minimum) {
    return Refused(
        std::move(report), "insufficient_labels",
        absl::StrCat(report.n_labels, " < ", minimum, " labels at min_weight ",
                     decision::PyFloatRepr(thresholds.min_weight)));
  }
  if (noul) {
    const bool thin =
        report.class_counts.size() < 2 ||
        std::any_of(report.class_counts.begin(), report.class_counts.end(),
                    [](const auto& e) { return e.second < kMinTrainPerClass; });
    if (thin) {
      return Refused(
          std::move(report), "insufficient_negatives",
          absl::StrCat("class counts ", PyCounts(report.class_counts),
                       "; need >= ", kMinTrainPerClass, " per class (A2)"));
    }
  }

  if (options.loco) {
    absl::StatusOr<LocoOutcome> loco = LeaveOneCardOut(
        provider, question, set, options.level, options.progress);
    if (!loco.ok()) return loco.status();
    report.folds = loco->folds;
    report.skipped_folds = loco->skipped_folds;
    if (loco->n_folds == 0) {
      return Refused(std::move(report), "no_folds",
                     "every leave-one-card-out fold was skipped");
    }
    absl::StatusOr<Json> pooled = Cell(loco->decisions, loco->labels, noul);
    if (!pooled.ok()) return pooled.status();
    report.loco = PooledLoco(*pooled, loco->n_folds);
  }

  if (options.progress) {
    const int folds = static_cast<int>(
        std::set<std::string>(set.cards.begin(), set.cards.end()).size());
    const int n = options.loco ? folds : 0;
    options.progress("final fit on every label", n, n);
  }
  absl::StatusOr<Json> artifacts = provider.FitArtifact(
      question, RenderStates(set.states), set.labels, options.level);
  if (!artifacts.ok()) {
    return absl::Status(artifacts.status().code(),
                        absl::StrCat("final fit of ", entry.id(), ": ",
                                     artifacts.status().message()));
  }
  report.status = "fitted";
  report.artifacts = *artifacts;
  Json fitted_on;
  fitted_on["backend_kind"] = provider.info().kind;
  fitted_on["served_model"] = provider.info().served_model.empty()
                                  ? Json(nullptr)
                                  : Json(provider.info().served_model);
  Json extra;
  extra["fitted_on"] = std::move(fitted_on);
  extra["per_question"][entry.id()] = PerQuestion(
      entry, options.level, report, thresholds.min_weight, *artifacts);
  Json validation;
  validation["loco"] = report.loco;
  validation["folds"] = report.folds;
  validation["skipped_folds"] = report.skipped_folds;
  extra["validation"][entry.id()] = std::move(validation);
  extra["questions_lock_sha"] =
      questions::LockSha(questions::QuestionSet::Reference());
  report.manifest_extra = std::move(extra);
  return report;
}

Json ReportJson(const FitReport& report) {
  Json j;
  j["question_id"] = report.question_id;
  j["level"] = report.level;
  j["status"] = report.status;
  j["n_labels"] = report.n_labels;
  j["class_counts"] = CountsJson(report.class_counts);
  Json folds = Json::object();
  for (const auto& [card, cell] : report.folds.items()) {
    Json reduced;
    for (const char* key : {"n", "acc", "ece", "cov@5%", "n_neg"}) {
      reduced[key] = cell.value(key, Json(nullptr));
    }
    reduced["prior_frozen"] = cell.value("prior_frozen", Json(nullptr));
    folds[card] = std::move(reduced);
  }
  j["folds"] = std::move(folds);
  j["skipped_folds"] = report.skipped_folds;
  j["loco"] = report.loco;
  j["version"] =
      report.version.has_value() ? Json(*report.version) : Json(nullptr);
  j["artifact_path"] =
      report.artifact_path.empty() ? Json(nullptr) : Json(report.artifact_path);
  j["detail"] = report.detail;
  return j;
}

}  // namespace mesa_anyjev::learn
