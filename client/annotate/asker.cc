#include "client/annotate/asker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::annotate {

Asker::Asker(client::Provider* provider, decision::Level level, OnAsk on_ask)
    : provider_(provider), level_(level), on_ask_(std::move(on_ask)) {
  source_.model = provider_->info().model;
  if (!provider_->info().served_model.empty()) {
    source_.served_model = provider_->info().served_model;
  }
}

absl::StatusOr<Batch> Asker::Ask(const questions::QuestionEntry& entry,
                                 const std::vector<cards::State>& states) {
  Batch batch;
  if (states.empty()) return batch;
  const decision::Question& question = entry.question;
  const int cap = provider_->info().max_choice_k;
  if (question.kind() == decision::QuestionKind::kChoice &&
      question.k() > cap && level_ != decision::Level::kL2) {
    return absl::OutOfRangeError(
        absl::StrCat(entry.id(), ": K=", question.k(), " is over the backend's",
                     " max_choice_k=", cap, " below L2; ask its twin"));
  }
  std::vector<std::string> texts;
  texts.reserve(states.size());
  for (const cards::State& state : states) {
    texts.push_back(cards::RenderState(state));
  }
  if (on_ask_) on_ask_(entry.id(), states.size());
  const int64_t missing_before = provider_->missing_label_events();
  auto decided = provider_->DecideBatch(texts, question, level_);
  if (!decided.ok()) {
    return absl::Status(
        decided.status().code(),
        absl::StrCat(entry.id(), ": ", decided.status().message()));
  }
  if (decided->size() != states.size()) {
    return absl::InternalError(
        absl::StrCat(entry.id(), ": the backend answered ", decided->size(),
                     " decisions for ", states.size(), " states"));
  }
  batch.missing_labels =
      static_cast<int>(provider_->missing_label_events() - missing_before);
  missing_labels_ += batch.missing_labels;
  batch.records.reserve(states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    ASSIGN_OR_RETURN(auto record,
                     policy::DecisionRecord::FromDecision(
                         (*decided)[i], question, states[i], source_));
    batch.records.push_back(std::move(record));
  }
  return batch;
}

absl::StatusOr<const questions::QuestionEntry*> Question(std::string_view id) {
  auto entry = questions::QuestionSet::Reference().Find(id);
  if (!entry.ok()) return absl::InternalError(entry.status().message());
  return *entry;
}

}  // namespace mesa_anyjev::annotate
