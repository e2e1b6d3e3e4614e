// `mesa-anyjev decide`: one state (or JSON lines of states) and one or more
// questions at a level, through the configured backend. A table for people,
// --json for machines, JSON lines out for --states-file (with --out, a
// pipeline run: decide_pipeline.cc). Exit 0 decided, 1 the backend refused
// or failed (or an explicit level cannot be served), 2 bad input.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/backends/provider.h"
#include "client/commands/batch_class.h"
#include "client/commands/bundle_access.h"
#include "client/commands/commands.h"
#include "client/commands/decide_run.h"
#include "client/commands/missing_labels.h"
#include "client/commands/run_retries.h"
#include "client/policy/decision_record.h"
#include "client/ui/table.h"
#include "client/ui/terminal.h"
#include "common/decision/py_json.h"
#include "common/questions/question_set.h"
#include "common/status/status_macros.h"
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

// The pipeline's flags go with --out, and --out with --states-file.
int CheckPipelineFlags(const DecideCommandOptions& options) {
  if (!options.out.empty() && options.states_file.empty()) {
    return UsageError(
        "--out writes one line per state of --states-file; give "
        "--states-file FILE (or - for stdin)");
  }
  if (options.out.empty() &&
      (options.resume || options.span != 0 || options.concurrency != 0 ||
       options.deadline_s != 0)) {
    return UsageError(
        "--resume, --span, --concurrency and --deadline go with "
        "--out OUT");
  }
  return 0;
}

// A state read from a file or stdin loses its final line ending: `echo
// text | mesa-anyjev decide` decides "text", as --state text does.
std::string WithoutFinalNewline(std::string text) {
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  return text;
}

absl::StatusOr<StateInput> FromRaw(std::string raw, bool state_json,
                                   const std::string& where) {
  StateInput state;
  if (!state_json) {
    state.text = raw;
    state.json = std::move(raw);
    return state;
  }
  auto parsed = text::ParseStrictOrderedJson(raw, {});
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", parsed.status().message()));
  }
  state.json = *std::move(parsed);
  // The reference renders dict states with json.dumps(indent=2).
  state.text = decision::PyJsonDumpsIndent2(state.json);
  return state;
}

absl::StatusOr<StateInput> LoadState(const DecideCommandOptions& options) {
  if (!options.state.empty() && !options.state_file.empty()) {
    return absl::InvalidArgumentError("give --state or --state-file, not both");
  }
  if (!options.state.empty()) {
    return FromRaw(options.state, options.state_json, "--state-json");
  }
  std::string raw;
  if (!options.state_file.empty() && options.state_file != "-") {
    ASSIGN_OR_RETURN(raw, util::ReadFile(options.state_file));
  } else {
    raw.assign(std::istreambuf_iterator<char>(std::cin), {});
  }
  return FromRaw(WithoutFinalNewline(std::move(raw)), options.state_json,
                 "--state-json");
}

// The options of a record, most probable first, as "Yes 0.912  No 0.088",
// within `cells` display cells ("+N more" when some do not fit).
std::string ProbsText(const policy::DecisionRecord& record, int cells) {
  if (!record.probs.has_value()) return "-";
  std::vector<size_t> order(record.options.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return (*record.probs)[a] > (*record.probs)[b];
  });
  std::string out;
  for (size_t n = 0; n < order.size(); ++n) {
    const size_t i = order[n];
    const std::string item = absl::StrFormat(
        "%s %.3f", ui::FitCells(record.options[i], 22), (*record.probs)[i]);
    const std::string more = absl::StrCat("  +", order.size() - n - 1, " more");
    const std::string next = out.empty() ? item : absl::StrCat(out, "  ", item);
    const bool last = n + 1 == order.size();
    if (ui::DisplayWidth(next) + (last ? 0 : ui::DisplayWidth(more)) > cells &&
        !out.empty()) {
      return absl::StrCat(out, "  +", order.size() - n, " more");
    }
    out = next;
  }
  return out;
}

// For people: per question its level and the options most probable first
// (the first is the answer), within the terminal's width (at most 100).
void PrintTable(const std::vector<policy::DecisionRecord>& records) {
  const int width = ui::OutputColumns();
  int question = 8;
  for (const auto& r : records) {
    question = std::max(question, ui::DisplayWidth(r.question_id));
  }
  question = std::min(question, 30);
  ui::Table table({{"question", ui::Align::kLeft, false, question},
                   {"level"},
                   {"answer first, then the other options by probability",
                    ui::Align::kLeft, true}});
  for (const auto& r : records) {
    table.AddRow({r.question_id, policy::RecordLevelName(r.level),
                  ProbsText(r, std::max(24, width - question - 5 - 4))});
  }
  table.Print(std::cout, width);
}

// --states-file: JSON lines in, one JSON line out per state, in chunks so
// the output streams while later states are read and decided.
int DecideStream(const DecideCommandOptions& options, Provider& provider,
                 DecideRun& run) {
  std::ifstream file;
  if (options.states_file != "-") {
    file.open(options.states_file);
    if (!file) {
      return UsageError(
          absl::StrCat("--states-file: cannot read ", options.states_file));
    }
  }
  std::istream& in = options.states_file == "-" ? std::cin : file;
  const std::string name =
      options.states_file == "-" ? "stdin" : options.states_file;
  constexpr size_t kChunk = 64;
  const ProviderInfo& info = provider.info();
  int64_t missing_total = 0, line_number = 0, index = 0;
  std::string line;
  bool more = true;
  while (more) {
    std::vector<StateInput> chunk;
    while (chunk.size() < kChunk && (more = bool(std::getline(in, line)))) {
      ++line_number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      auto state =
          StateFromLine(line, absl::StrCat(name, " line ", line_number));
      if (!state.ok()) return UsageError(std::string(state.status().message()));
      chunk.push_back(*std::move(state));
    }
    if (chunk.empty()) break;
    std::vector<std::vector<policy::DecisionRecord>> records;
    std::vector<int64_t> missing;
    if (const int code = run.Decide(chunk, &records, &missing); code != 0) {
      return code;
    }
    for (const int64_t n : missing) missing_total += n;
    for (size_t s = 0; s < chunk.size(); ++s, ++index) {
      nlohmann::ordered_json out = {{"index", index}};
      if (!chunk[s].id.is_null()) out["id"] = chunk[s].id;
      out["backend"] = info.kind;
      out["model"] = info.model;
      out["decisions"] = nlohmann::ordered_json::array();
      for (const auto& record : records[s]) {
        out["decisions"].push_back(record.ToJson());
      }
      std::cout << out.dump(-1, ' ', false,
                            nlohmann::json::error_handler_t::replace)
                << "\n";
    }
    std::cout.flush();
  }
  return ReportMissingLabels("decide", missing_total, options.strict);
}

}  // namespace

int RunDecide(const config::Config& given,
              const DecideCommandOptions& options) {
  // A pipeline run (--out) is dataset work: batch.
  const config::Config config = options.out.empty() ? given : AsBatchRun(given);
  auto questions = LoadQuestions(options);
  if (!questions.ok()) {
    return UsageError(std::string(questions.status().message()));
  }
  if (const int code = CheckPipelineFlags(options); code != 0) return code;
  std::optional<StateInput> state;
  if (options.states_file.empty()) {
    auto loaded = LoadState(options);
    if (!loaded.ok()) return UsageError(std::string(loaded.status().message()));
    state = *std::move(loaded);
  } else if (!options.state.empty() || !options.state_file.empty() ||
             options.state_json) {
    return UsageError(
        "--states-file takes every state from its lines; give it without "
        "--state, --state-file and --state-json");
  }
  const std::string level_name =
      options.level.empty() ? config.decider.level : options.level;
  auto level = decision::ParseLevel(level_name);
  if (!level.ok()) {
    return UsageError(absl::StrCat("--level: '", level_name,
                                   "' is not raw, L0, L1, L2 or auto"));
  }
  // A pipeline run's calls, from the first, go by the retry rule; a lone
  // decide's are one attempt each.
  std::optional<RunRetries> retries;
  if (!options.out.empty()) {
    retries.emplace("decide",
                    options.deadline_s > 0
                        ? absl::Now() + absl::Seconds(options.deadline_s)
                        : absl::InfiniteFuture());
  }
  auto provider = MakeProvider(config, options.backend,
                               retries ? retries->rule() : nullptr);
  if (!provider.ok()) {
    std::cerr << "mesa-anyjev decide: " << provider.status().message() << "\n";
    return provider.status().code() == absl::StatusCode::kInvalidArgument ? 2
                                                                          : 1;
  }
  const ProviderInfo& info = (*provider)->info();
  LoadPromotedBundle(config, info.kind, provider->get());
  DecideRun run(options, **provider, *questions, *level);
  if (retries) return RunDecidePipeline(options, **provider, run, *retries);
  if (!state.has_value()) return DecideStream(options, **provider, run);

  std::vector<std::vector<policy::DecisionRecord>> records;
  std::vector<int64_t> missing;
  if (const int code = run.Decide({*state}, &records, &missing); code != 0) {
    return code;
  }
  int64_t missing_total = 0;
  for (const int64_t n : missing) missing_total += n;
  const int strict_exit =
      ReportMissingLabels("decide", missing_total, options.strict);
  if (options.json) {
    nlohmann::ordered_json doc = {
        {"backend", info.kind},
        {"model", info.model},
        {"missing_labels", missing_total},
        {"decisions", nlohmann::ordered_json::array()}};
    for (size_t q = 0; q < records[0].size(); ++q) {
      nlohmann::ordered_json row = records[0][q].ToJson();
      row["missing_labels"] = missing[q];
      doc["decisions"].push_back(std::move(row));
    }
    ui::PrintJson(doc, std::cout);
    return strict_exit;
  }
  PrintTable(records[0]);
  return strict_exit;
}

}  // namespace mesa_anyjev::client
