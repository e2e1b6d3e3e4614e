// The pieces `decide` shares between its modes (see decide_run.h).
#include "client/commands/decide_run.h"

#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/commands/level_advice.h"
#include "common/decision/py_json.h"
#include "common/text/strict_json.h"

namespace mesa_anyjev::client {

using decision::Question;

// One line of --states-file: a JSON string (the text), or an object with
// "text" (a string) or "json" (any JSON, rendered as a dict state) and an
// optional "id" echoed in the output.
absl::StatusOr<StateInput> StateFromLine(const std::string& line,
                                         const std::string& where) {
  auto parsed = text::ParseStrictOrderedJson(line, {});
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", parsed.status().message()));
  }
  StateInput state;
  if (parsed->is_string()) {
    state.text = parsed->get<std::string>();
    state.json = *parsed;
    return state;
  }
  const bool object = parsed->is_object();
  const bool has_text = object && parsed->contains("text");
  const bool has_json = object && parsed->contains("json");
  if (!object || has_text == has_json) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": a JSON string, or an object with \"text\" or \"json\" (and an "
        "optional \"id\") is required"));
  }
  for (const auto& [key, value] : parsed->items()) {
    if (key != "text" && key != "json" && key != "id") {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": unknown key \"", key, "\" (text, json or id)"));
    }
  }
  if (has_text) {
    if (!(*parsed)["text"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".text: a string is required"));
    }
    state.text = (*parsed)["text"].get<std::string>();
    state.json = state.text;
  } else {
    state.json = (*parsed)["json"];
    state.text = decision::PyJsonDumpsIndent2(state.json);
  }
  if (parsed->contains("id")) state.id = (*parsed)["id"];
  return state;
}

int DecideRun::CheckWidth(const Question& question) const {
  if (question.kind() == decision::QuestionKind::kChoice &&
      question.k() > provider_.info().max_choice_k &&
      level_ != decision::Level::kL2) {
    std::cerr << "mesa-anyjev decide: " << question.id()
              << ": K=" << question.k()
              << " exceeds max_choice_k=" << provider_.info().max_choice_k
              << "; ask the twin\n";
    return 1;
  }
  return 0;
}

int DecideRun::CheckWidths() const {
  for (const Question& question : questions_) {
    if (const int code = CheckWidth(question); code != 0) return code;
  }
  return 0;
}

std::optional<policy::DecisionRecord> DecideRun::Record(
    const decision::Decision& decision, size_t q,
    const nlohmann::ordered_json& state) const {
  const ProviderInfo& info = provider_.info();
  policy::RecordSource source;
  source.model = info.model;
  if (!info.served_model.empty()) source.served_model = info.served_model;
  auto record = policy::DecisionRecord::FromDecision(decision, questions_[q],
                                                     state, source);
  if (!record.ok()) {
    std::cerr << "mesa-anyjev decide: " << record.status().message() << "\n";
    return std::nullopt;
  }
  if (const auto below = ServedBelow(*record, level_)) {
    std::cerr << "mesa-anyjev decide: " << *below << "\n";
    Remedy(questions_[q].id());
    return std::nullopt;
  }
  return *std::move(record);
}

int DecideRun::Failed(const absl::Status& status, const std::string& prefix,
                      const std::string& question_id) const {
  std::cerr << "mesa-anyjev decide: " << prefix << status.message() << "\n";
  if (absl::IsFailedPrecondition(status)) {
    std::string named = question_id;
    for (const Question& question : questions_) {
      if (absl::StrContains(status.message(),
                            absl::StrCat("(key ", question.key(), ")"))) {
        named = question.id();
        break;
      }
    }
    Remedy(named);
  }
  return 1;
}

int DecideRun::Decide(const std::vector<StateInput>& states,
                      std::vector<std::vector<policy::DecisionRecord>>* records,
                      std::vector<int64_t>* missing) {
  std::vector<std::string> texts;
  for (const StateInput& state : states) texts.push_back(state.text);
  records->assign(states.size(), {});
  missing->clear();
  for (size_t q = 0; q < questions_.size(); ++q) {
    const Question& question = questions_[q];
    if (const int code = CheckWidth(question); code != 0) return code;
    const int64_t missing_before = provider_.missing_label_events();
    auto decided = provider_.DecideBatch(texts, question, level_);
    if (!decided.ok()) {
      return Failed(decided.status(), question.id() + ": ", question.id());
    }
    missing->push_back(provider_.missing_label_events() - missing_before);
    for (size_t s = 0; s < states.size(); ++s) {
      auto record = Record((*decided)[s], q, states[s].json);
      if (!record.has_value()) return 1;
      (*records)[s].push_back(*std::move(record));
    }
  }
  return 0;
}

void DecideRun::Remedy(const std::string& question_id) const {
  const std::string remedy = LevelRemedy(
      question_id, level_, provider_.info().kind, options_.replay_flags);
  if (!remedy.empty()) std::cerr << remedy << "\n";
}

}  // namespace mesa_anyjev::client
