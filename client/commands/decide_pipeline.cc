// `mesa-anyjev decide --states-file FILE --out OUT [--resume]`: a pipeline
// run (docs/cli.md "Pipelines"). The input is cut into spans by position
// (client/pipeline/spans.h), up to --concurrency spans are decided side by
// side while at most that many are held in memory, and OUT gets one line
// per state in input order, flushed span by span. Daemon calls are retried
// (client/backends/retry_rule.h); --resume keeps OUT's complete lines and
// decides again from the start of the span holding the first missing one.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/commands/decide_run.h"
#include "client/commands/missing_labels.h"
#include "client/commands/run_retries.h"
#include "client/pipeline/ordered_window.h"
#include "client/pipeline/out_lines.h"
#include "client/pipeline/spans.h"
#include "client/ui/progress.h"
#include "client/ui/terminal.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::client {
namespace {

constexpr int64_t kDefaultSpan = 64;
constexpr int32_t kDefaultConcurrency = 4;

int UsageError(const std::string& message) {
  std::cerr << "mesa-anyjev decide: " << message << "\n";
  return 2;
}

// A state as read, with the hash of its input line.
struct ReadState {
  StateInput state;
  std::string input_sha256;
};

// --states-file one state at a time (blank lines skipped), so a run never
// holds more of its input than the spans in flight.
class StateReader {
 public:
  explicit StateReader(const std::string& path)
      : name_(path == "-" ? "stdin" : path) {
    if (path != "-") file_.open(path);
  }

  bool ok() const { return name_ == "stdin" || file_.is_open(); }

  // The next state; nullopt at the end; INVALID_ARGUMENT naming the line.
  absl::StatusOr<std::optional<ReadState>> Next() {
    std::istream& in = name_ == "stdin" ? std::cin : file_;
    std::string line;
    while (std::getline(in, line)) {
      ++line_number_;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      auto state =
          StateFromLine(line, absl::StrCat(name_, " line ", line_number_));
      if (!state.ok()) return state.status();
      return ReadState{*std::move(state), pipeline::InputSha256(line)};
    }
    return std::nullopt;
  }

  const std::string& name() const { return name_; }
  int64_t line_number() const { return line_number_; }

 private:
  std::string name_;
  std::ifstream file_;
  int64_t line_number_ = 0;
};

// States in a regular file, for the progress line's total (-1: a stream).
int CountStates(const std::string& path) {
  if (path == "-" || !std::filesystem::is_regular_file(path)) {
    return ui::Progress::kUnknownTotal;
  }
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) ++n;
  }
  return n;
}

struct Span {
  int64_t first = 0;  // input position of states[0]
  int64_t skip = 0;   // leading states whose lines OUT holds already
  std::vector<ReadState> states;
  absl::StatusOr<std::vector<pipeline::StateResult>> result =
      absl::UnknownError("not decided");
};

class Pipeline {
 public:
  Pipeline(const DecideCommandOptions& options, Provider& provider,
           const DecideRun& run, RunRetries& retries)
      : options_(options),
        provider_(provider),
        run_(run),
        retries_(retries),
        reader_(options.states_file),
        span_(options.span > 0 ? options.span : kDefaultSpan),
        window_(options.concurrency > 0 ? options.concurrency
                                        : kDefaultConcurrency) {}

  int Run();

 private:
  // OUT's complete lines checked against this run and its input; the
  // states of the span they end in are kept to be sent again. 0 or exit 2.
  int Resume();
  absl::StatusOr<std::optional<Span>> Next();
  void Work(Span& span);
  absl::Status Emit(Span& span);
  std::string Label() const;
  void Summary(bool finished) const;

  const DecideCommandOptions& options_;
  Provider& provider_;
  const DecideRun& run_;
  RunRetries& retries_;
  StateReader reader_;
  const int64_t span_;
  int window_;
  pipeline::RunKey key_;
  std::ofstream out_;
  std::unique_ptr<ui::Progress> progress_;
  std::vector<ReadState> carry_;  // resumed: the kept states of the span
  int64_t kept_ = 0;              // lines OUT held before this run
  int64_t next_ = 0;              // input position of the next state read
  int64_t written_ = 0, decisions_ = 0, refused_ = 0;
  absl::Time start_ = absl::Now();
};

int Pipeline::Resume() {
  std::error_code error;
  const bool exists = std::filesystem::exists(options_.out, error);
  if (!options_.resume) {
    if (exists && std::filesystem::file_size(options_.out, error) > 0) {
      return UsageError(absl::StrCat(
          "--out: ", options_.out,
          " already holds lines; give --resume to continue that run, or "
          "remove it"));
    }
    return 0;
  }
  auto dropped = pipeline::DropTornLine(options_.out);
  if (!dropped.ok()) return UsageError(std::string(dropped.status().message()));
  if (*dropped > 0) {
    std::cerr << "mesa-anyjev decide: --resume: dropped the torn last line of "
              << options_.out << " (" << *dropped << " bytes)\n";
  }
  std::ifstream kept(options_.out);
  std::string line;
  for (int64_t n = 0; exists && std::getline(kept, line); ++n) {
    auto input_sha = pipeline::CheckKeptLine(line, n, key_, options_.out);
    if (!input_sha.ok()) {
      return UsageError(std::string(input_sha.status().message()));
    }
    auto state = reader_.Next();
    if (!state.ok()) return UsageError(std::string(state.status().message()));
    if (!state->has_value()) {
      return UsageError(absl::StrCat(
          "--resume: ", options_.out, " holds ", n + 1, " or more lines but ",
          reader_.name(), " has only ", n, " states: is it the same input?"));
    }
    if ((*state)->input_sha256 != *input_sha) {
      return UsageError(
          absl::StrCat("--resume: ", options_.out, " line ", n + 1,
                       " answers another "
                       "input than ",
                       reader_.name(), " line ", reader_.line_number(),
                       " (state ", n, "): was the input changed?"));
    }
    if (n % span_ == 0) carry_.clear();
    carry_.push_back(**std::move(state));
    kept_ = n + 1;
  }
  if (kept_ % span_ == 0) carry_.clear();
  next_ = kept_;
  return 0;
}

absl::StatusOr<std::optional<Span>> Pipeline::Next() {
  Span span;
  span.skip = static_cast<int64_t>(carry_.size());
  span.first = next_ - span.skip;
  span.states = std::move(carry_);
  carry_.clear();
  while (static_cast<int64_t>(span.states.size()) < span_) {
    ASSIGN_OR_RETURN(std::optional<ReadState> state, reader_.Next());
    if (!state.has_value()) break;
    span.states.push_back(*std::move(state));
  }
  next_ = span.first + static_cast<int64_t>(span.states.size());
  // Nothing new: the input ends inside a span OUT already answers.
  if (static_cast<int64_t>(span.states.size()) == span.skip) {
    return std::nullopt;
  }
  return span;
}

void Pipeline::Work(Span& span) {
  std::vector<std::string> texts;
  texts.reserve(span.states.size());
  for (const ReadState& s : span.states) texts.push_back(s.state.text);
  const auto& questions = run_.questions();
  span.result = pipeline::DecideSpan(
      texts, span.first, questions.size(), provider_.info().max_call_questions,
      [&](const std::vector<std::string>& sent, size_t begin, size_t end) {
        const std::vector<decision::Question> slice(questions.begin() + begin,
                                                    questions.begin() + end);
        return provider_.DecideCall(sent, slice, run_.level());
      });
}

// A refusal already printed (with its remedy): the run ends with exit 1.
absl::Status Reported() { return absl::AbortedError("reported"); }

absl::Status Pipeline::Emit(Span& span) {
  if (!span.result.ok()) {
    run_.Failed(span.result.status(), "", run_.questions().front().id());
    return Reported();
  }
  const size_t n_questions = run_.questions().size();
  for (size_t s = static_cast<size_t>(span.skip); s < span.states.size(); ++s) {
    const ReadState& read = span.states[s];
    const pipeline::StateResult& result = (*span.result)[s];
    nlohmann::ordered_json line =
        pipeline::LineHead(span.first + static_cast<int64_t>(s), read.state.id,
                           key_, read.input_sha256);
    if (!result.refused.ok()) {
      line["error"] = {
          {"code", absl::StatusCodeToString(result.refused.code())},
          {"message", std::string(result.refused.message())}};
      ++refused_;
    } else {
      line["decisions"] = nlohmann::ordered_json::array();
      for (size_t q = 0; q < n_questions; ++q) {
        auto record = run_.Record(result.decisions[q], q, read.state.json);
        if (!record.has_value()) return Reported();
        line["decisions"].push_back(record->ToJson());
      }
      decisions_ += static_cast<int64_t>(n_questions);
    }
    out_ << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
         << "\n";
    ++written_;
  }
  out_.flush();
  if (!out_) {
    std::cerr << "mesa-anyjev decide: --out: cannot write " << options_.out
              << " (disk full?)\n";
    return Reported();
  }
  progress_->Set(static_cast<int>(written_), Label());
  return absl::OkStatus();
}

std::string Pipeline::Label() const {
  return absl::StrCat("retries ", retries_.rule()->retries(), "  refused ",
                      refused_);
}

void Pipeline::Summary(bool finished) const {
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  std::cerr << "mesa-anyjev decide: " << (finished ? "" : "stopped: ")
            << kept_ + written_ << " states in " << options_.out << " ("
            << written_ << " this run, " << kept_ << " kept), " << decisions_
            << " decisions in " << absl::StrFormat("%.1f", seconds) << " s ("
            << absl::StrFormat("%.1f", seconds > 0 ? decisions_ / seconds : 0)
            << " decisions/s), " << retries_.rule()->retries() << " retries, "
            << refused_ << " refused states\n";
}

int Pipeline::Run() {
  const ProviderInfo& info = provider_.info();
  if (const absl::Status size =
          pipeline::CheckSpanSize(span_, info.max_call_states);
      !size.ok()) {
    return UsageError(std::string(size.message()));
  }
  if (!reader_.ok()) {
    return UsageError(
        absl::StrCat("--states-file: cannot read ", options_.states_file));
  }
  if (const int code = run_.CheckWidths(); code != 0) return code;
  if (!info.concurrent_calls) window_ = 1;
  std::vector<std::string> ids, keys;
  for (const decision::Question& q : run_.questions()) {
    ids.push_back(q.id());
    keys.push_back(q.key());
  }
  key_ = {info.kind, info.model, std::string(decision::LevelName(run_.level())),
          span_,     ids,        pipeline::QuestionsSha256(keys)};
  if (const int code = Resume(); code != 0) return code;
  out_.open(options_.out, std::ios::app | std::ios::binary);
  if (!out_)
    return UsageError(absl::StrCat("--out: cannot write ", options_.out));

  // From here the progress line (on a terminal) and the summary count the
  // retries: a line each would flood a long run's log.
  retries_.Quiet();
  const bool tty = ui::StderrIsTty();
  int total =
      tty ? CountStates(options_.states_file) : ui::Progress::kUnknownTotal;
  if (total != ui::Progress::kUnknownTotal) {
    total = std::max<int>(0, total - static_cast<int>(kept_));
  }
  progress_ = std::make_unique<ui::Progress>("states", total, tty, std::cerr);

  pipeline::OrderedSteps<Span> steps;
  steps.next = [this] { return Next(); };
  steps.work = [this](Span& span) { Work(span); };
  steps.emit = [this](Span& span) { return Emit(span); };
  steps.tick = [this] { progress_->Show(Label()); };
  const absl::Status status = pipeline::RunOrdered(window_, steps);
  progress_->Finish();
  Summary(status.ok());
  if (!status.ok()) {
    if (status.code() == absl::StatusCode::kAborted) return 1;  // printed
    std::cerr << "mesa-anyjev decide: " << status.message() << "\n";
    return absl::IsInvalidArgument(status) ? 2 : 1;
  }
  return ReportMissingLabels("decide", provider_.missing_label_events(),
                             options_.strict);
}

}  // namespace

int RunDecidePipeline(const DecideCommandOptions& options, Provider& provider,
                      const DecideRun& run, RunRetries& retries) {
  Pipeline pipeline(options, provider, run, retries);
  return pipeline.Run();
}

}  // namespace mesa_anyjev::client
