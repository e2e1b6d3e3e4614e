// `mesa-anyjev decide`: one state and one or more questions at a level,
// through the configured backend. A table on a TTY, --json for machines.
// Exit 0 decided, 1 the backend refused or failed, 2 bad input.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/backends/provider.h"
#include "client/commands/bundle_access.h"
#include "client/commands/commands.h"
#include "client/commands/missing_labels.h"
#include "client/policy/decision_record.h"
#include "common/decision/py_json.h"
#include "common/questions/question_set.h"
#include "common/text/json_numbers.h"
#include "common/text/py_text.h"
#include "common/text/strict_json.h"
#include "common/util/files.h"

namespace mesa_anyjev::client {
namespace {

using decision::Question;

int UsageError(const std::string& message) {
  std::cerr << "mesa-anyjev decide: " << message << "\n";
  return 2;
}

// A question written out in a questions file: {"id", "kind", "text",
// "options"} (score: options = levels, or "bins" with "scale": [lo, hi]).
absl::StatusOr<Question> QuestionFromJson(const nlohmann::json& j,
                                          const std::string& where) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not an object"));
  }
  auto text_of = [&](const char* key) -> absl::StatusOr<std::string> {
    if (!j.contains(key) || !j[key].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".", key, ": a string is required"));
    }
    return j[key].get<std::string>();
  };
  auto kind = text_of("kind");
  if (!kind.ok()) return kind.status();
  auto text = text_of("text");
  if (!text.ok()) return text.status();
  const std::string id = j.value("id", "");
  std::vector<std::string> options;
  if (j.contains("options")) {
    if (!j["options"].is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".options: a list of strings is required"));
    }
    for (const auto& option : j["options"]) {
      if (!option.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".options: a list of strings is required"));
      }
      options.push_back(option.get<std::string>());
    }
  }
  absl::StatusOr<Question> out = absl::InvalidArgumentError(
      absl::StrCat(where, ".kind: '", *kind, "' is not choice, noul or score"));
  if (*kind == "noul") {
    out = Question::Noul(*text, id);
  } else if (*kind == "choice") {
    out = Question::Choice(*text, options, id);
  } else if (*kind == "score" && !options.empty()) {
    out = Question::ScoreLevels(*text, options, id);
  } else if (*kind == "score") {
    double lo = 0.0, hi = 1.0;
    if (j.contains("scale")) {
      const auto& scale = j["scale"];
      if (!scale.is_array() || scale.size() != 2 || !scale[0].is_number() ||
          !scale[1].is_number()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".scale: [lo, hi] numbers are required"));
      }
      lo = scale[0].get<double>();
      hi = scale[1].get<double>();
    }
    auto bins = text::JsonIntegerOr(j, "bins", 5, INT32_MIN, INT32_MAX);
    if (!bins.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".", bins.status().message()));
    }
    out = Question::ScoreBins(*text, static_cast<int>(*bins), lo, hi, id);
  }
  if (!out.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", out.status().message()));
  }
  return out;
}

absl::StatusOr<std::vector<Question>> LoadQuestions(
    const DecideCommandOptions& options) {
  std::vector<Question> questions;
  const questions::QuestionSet& set = questions::QuestionSet::Reference();
  for (const std::string& id : options.question_ids) {
    auto entry = set.Find(id);
    if (!entry.ok()) return entry.status();
    questions.push_back((*entry)->question);
  }
  if (!options.questions_file.empty()) {
    auto text = util::ReadFile(options.questions_file);
    if (!text.ok()) return text.status();
    const auto parsed = text::ParseStrictJson(*text, {});
    const nlohmann::json doc = parsed.ok() ? *parsed : nlohmann::json();
    if (!parsed.ok() || !doc.is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.questions_file, ": a JSON list of questions is required"));
    }
    for (size_t i = 0; i < doc.size(); ++i) {
      auto question = QuestionFromJson(
          doc[i], absl::StrCat(options.questions_file, "[", i, "]"));
      if (!question.ok()) return question.status();
      questions.push_back(*std::move(question));
    }
  }
  if (questions.empty()) {
    return absl::InvalidArgumentError(
        "no question: give --question ID (see `mesa-anyjev questions`) or "
        "--questions-file");
  }
  return questions;
}

// The state as text and as the JSON the record carries.
absl::Status LoadState(const DecideCommandOptions& options, std::string* text,
                       nlohmann::ordered_json* json) {
  std::string raw;
  if (!options.state.empty() && !options.state_file.empty()) {
    return absl::InvalidArgumentError("give --state or --state-file, not both");
  }
  if (!options.state.empty()) {
    raw = options.state;
  } else if (!options.state_file.empty() && options.state_file != "-") {
    auto read = util::ReadFile(options.state_file);
    if (!read.ok()) return read.status();
    raw = *std::move(read);
  } else {
    raw.assign(std::istreambuf_iterator<char>(std::cin), {});
  }
  if (!options.state_json) {
    *text = raw;
    *json = raw;
    return absl::OkStatus();
  }
  auto parsed = text::ParseStrictOrderedJson(raw, {});
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--state-json: ", parsed.status().message()));
  }
  *json = *std::move(parsed);
  // The reference renders dict states with json.dumps(indent=2).
  *text = decision::PyJsonDumpsIndent2(*json);
  return absl::OkStatus();
}

// At most `n` code points for a table cell, never cutting a UTF-8 sequence.
std::string Shortened(const std::string& text, size_t n) {
  if (text::CodePointPrefix(text, n).size() == text.size()) return text;
  return std::string(text::CodePointPrefix(text, n - 3)) + "...";
}

std::string ProbsText(const policy::DecisionRecord& record) {
  if (!record.probs.has_value()) return "-";
  std::vector<std::string> parts;
  for (size_t i = 0; i < record.options.size(); ++i) {
    std::string option = record.options[i];
    option = Shortened(option, 24);
    parts.push_back(absl::StrFormat("%s %.3f", option, (*record.probs)[i]));
  }
  return absl::StrJoin(parts, " | ");
}

}  // namespace

int RunDecide(const config::Config& config,
              const DecideCommandOptions& options) {
  auto questions = LoadQuestions(options);
  if (!questions.ok())
    return UsageError(std::string(questions.status().message()));
  std::string state_text;
  nlohmann::ordered_json state_json;
  if (absl::Status s = LoadState(options, &state_text, &state_json); !s.ok()) {
    return UsageError(std::string(s.message()));
  }
  const std::string level_name =
      options.level.empty() ? config.decider.level : options.level;
  auto level = decision::ParseLevel(level_name);
  if (!level.ok()) {
    return UsageError(absl::StrCat("--level: '", level_name,
                                   "' is not raw, L0, L1, L2 or auto"));
  }
  auto provider = MakeProvider(config, options.backend);
  if (!provider.ok()) {
    std::cerr << "mesa-anyjev decide: " << provider.status().message() << "\n";
    return provider.status().code() == absl::StatusCode::kInvalidArgument ? 2
                                                                          : 1;
  }
  const ProviderInfo& info = (*provider)->info();
  LoadPromotedBundle(config, info.kind, provider->get());
  std::vector<policy::DecisionRecord> records;
  std::vector<int64_t> missing;  // label logprobs missing, per record
  for (const Question& question : *questions) {
    // The reference's CapabilityError: a wide choice below L2 is refused,
    // and its noul twin is the question to ask instead.
    if (question.kind() == decision::QuestionKind::kChoice &&
        question.k() > info.max_choice_k && *level != decision::Level::kL2) {
      std::cerr << "mesa-anyjev decide: " << question.id()
                << ": K=" << question.k()
                << " exceeds max_choice_k=" << info.max_choice_k
                << "; ask the twin\n";
      return 1;
    }
    const int64_t missing_before = (*provider)->missing_label_events();
    auto decided = (*provider)->DecideBatch({state_text}, question, *level);
    if (!decided.ok()) {
      std::cerr << "mesa-anyjev decide: " << question.id() << ": "
                << decided.status().message() << "\n";
      return 1;
    }
    policy::RecordSource source;
    source.model = info.model;
    if (!info.served_model.empty()) source.served_model = info.served_model;
    auto record = policy::DecisionRecord::FromDecision(
        decided->front(), question, state_json, source);
    if (!record.ok()) {
      std::cerr << "mesa-anyjev decide: " << record.status().message() << "\n";
      return 1;
    }
    records.push_back(*std::move(record));
    missing.push_back((*provider)->missing_label_events() - missing_before);
  }
  int64_t missing_total = 0;
  for (const int64_t n : missing) missing_total += n;
  const int strict_exit =
      ReportMissingLabels("decide", missing_total, options.strict);

  const bool table = !options.json && isatty(STDOUT_FILENO);
  if (!table && options.json) {
    nlohmann::ordered_json doc = {
        {"backend", info.kind},
        {"model", info.model},
        {"missing_labels", missing_total},
        {"decisions", nlohmann::ordered_json::array()}};
    for (size_t i = 0; i < records.size(); ++i) {
      nlohmann::ordered_json row = records[i].ToJson();
      row["missing_labels"] = missing[i];
      doc["decisions"].push_back(std::move(row));
    }
    std::cout << doc.dump(1) << "\n";
    return strict_exit;
  }
  // Plain text: one line per decision; on a TTY aligned as a table.
  if (table) {
    std::cout << absl::StrFormat("%-28s %-5s %-28s %7s  %s\n", "question",
                                 "level", "answer", "p", "probabilities");
  }
  for (const auto& record : records) {
    const std::string answer = record.answer.size() > 28
                                   ? record.answer.substr(0, 25) + "..."
                                   : record.answer;
    std::cout << absl::StrFormat(
        "%-28s %-5s %-28s %7.3f  %s\n", record.question_id,
        policy::RecordLevelName(record.level), answer,
        record.confidence.value_or(0.0), ProbsText(record));
  }
  return strict_exit;
}

}  // namespace mesa_anyjev::client
