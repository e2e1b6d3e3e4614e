// Observations and their fit schedule (see observation_store.h).
#include "common/decision/observation_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/decision/py_format.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {

namespace {

// Labels index the options of the question they belong to (none known:
// nothing to check).
absl::Status CheckObservedLabels(const LoadedObservations& loaded,
                                 const Question* question) {
  if (question == nullptr) return absl::OkStatus();
  for (size_t i = 0; i < loaded.labels.size(); ++i) {
    if (loaded.labels[i] < 0 || loaded.labels[i] >= question->k()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "observations.", loaded.key, ".labels[", i, "]: ", loaded.labels[i],
          " is not an option index of a question with K=", question->k()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

ObservationStore::Observed* ObservationStore::Start(const std::string& key,
                                                    const Question& question,
                                                    int next_fit) {
  auto record = std::make_unique<Observed>(
      Observed{question, {}, {}, /*fits=*/0, next_fit, /*fitting=*/false});
  Observed* out = record.get();
  observed_.emplace(key, std::move(record));
  order_.push_back(key);
  return out;
}

std::optional<ObservationStore::FitDue> ObservationStore::Record(
    const Question& question, const std::string& state, int label,
    int first_fit) {
  absl::MutexLock lock(&mu_);
  const auto it = observed_.find(question.key());
  Observed* record = it != observed_.end()
                         ? it->second.get()
                         : Start(question.key(), question, first_fit);
  record->states.push_back(state);
  record->labels.push_back(label);
  if (static_cast<int>(record->labels.size()) < record->next_fit ||
      record->fitting) {
    return std::nullopt;
  }
  record->fitting = true;
  return FitDue{record->question, record->states, record->labels};
}

void ObservationStore::Fitted(const std::string& key, bool succeeded,
                              size_t n_labels, double refit_factor) {
  absl::MutexLock lock(&mu_);
  Observed& record = *observed_.at(key);
  record.fitting = false;
  if (!succeeded) return;
  record.fits += 1;
  record.next_fit = std::max(
      record.next_fit + 1,
      static_cast<int>(PyRound(static_cast<double>(n_labels) * refit_factor)));
}

absl::Status ObservationStore::Merge(
    const std::vector<LoadedObservations>& loaded) {
  absl::MutexLock lock(&mu_);
  for (const LoadedObservations& observations : loaded) {
    const auto it = observed_.find(observations.key);
    const Question* question = observations.question.has_value()
                                   ? &*observations.question
                               : it != observed_.end() ? &it->second->question
                                                       : nullptr;
    RETURN_IF_ERROR(CheckObservedLabels(observations, question));
  }
  for (const LoadedObservations& observations : loaded) {
    const auto it = observed_.find(observations.key);
    Observed* record = it != observed_.end() ? it->second.get() : nullptr;
    if (record == nullptr && !observations.question.has_value()) continue;
    if (record == nullptr) {
      record = Start(observations.key, *observations.question,
                     /*next_fit=*/30);
    }
    record->states.insert(record->states.end(), observations.states.begin(),
                          observations.states.end());
    record->labels.insert(record->labels.end(), observations.labels.begin(),
                          observations.labels.end());
    record->fits = observations.fits.value_or(record->fits);
    record->next_fit = observations.next_fit.value_or(record->next_fit);
  }
  return absl::OkStatus();
}

nlohmann::ordered_json ObservationStore::ToJson() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  absl::MutexLock lock(&mu_);
  for (const std::string& key : order_) {
    const Observed& record = *observed_.at(key);
    nlohmann::ordered_json entry;
    entry["question_id"] = record.question.id();
    entry["kind"] = QuestionKindName(record.question.kind());
    entry["text"] = record.question.text();
    entry["options"] = record.question.options();
    entry["states"] = record.states;
    entry["labels"] = record.labels;
    entry["fits"] = record.fits;
    entry["next_fit"] = record.next_fit;
    out[key] = std::move(entry);
  }
  return out;
}

}  // namespace mesa_anyjev::decision
