// `mesa-anyjev annotate`: the reference's annotate graph for a card (or
// several: --card repeated, or a directory of them), through the configured
// backend (docs/annotate.md). Prints the summary and one line per
// proposal (or, with --json, the whole run record), and writes the
// evaluation result to --out (a directory of them for several cards). Exit
// 0 decided; 1 the backend failed or an explicit level cannot be served; 2
// bad input.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/annotate/pipeline.h"
#include "client/annotate/run_result.h"
#include "client/backends/provider.h"
#include "client/cards/candidates.h"
#include "client/cards/card.h"
#include "client/commands/bundle_access.h"
#include "client/commands/commands.h"
#include "client/commands/level_advice.h"
#include "client/commands/missing_labels.h"
#include "client/commands/run_retries.h"
#include "client/ui/progress.h"
#include "client/ui/terminal.h"
#include "common/decision/py_json.h"
#include "common/util/files.h"

namespace mesa_anyjev::client {
namespace {

int Fail(int code, absl::string_view message) {
  std::cerr << "mesa-anyjev annotate: " << message << "\n";
  return code;
}

std::string Actor() {
  const char* user = std::getenv("USER");
  return user != nullptr && *user != '\0' ? user : "mesa-anyjev";
}

// json.dumps(doc, indent=1, ensure_ascii=False), written atomically with
// its parent directories created.
absl::Status WriteOut(const std::string& path,
                      const nlohmann::ordered_json& doc) {
  const std::filesystem::path parent =
      std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  if (error) {
    return absl::InternalError(absl::StrCat(
        "--out: cannot create ", parent.string(), ": ", error.message()));
  }
  decision::PyJsonOptions json;
  json.indent = 1;
  return util::WriteFileAtomic(path, decision::PyJsonDumps(doc, json) + "\n");
}

// The cards named: files as given, a directory's *.md in name order.
absl::StatusOr<std::vector<std::string>> CardPaths(
    const std::vector<std::string>& given) {
  std::vector<std::string> out;
  for (const std::string& path : given) {
    std::error_code error;
    if (!std::filesystem::is_directory(path, error)) {
      out.push_back(path);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
      if (entry.path().extension() == ".md") {
        found.push_back(entry.path().string());
      }
    }
    if (error) {
      return absl::InvalidArgumentError(
          absl::StrCat("--card ", path, ": ", error.message()));
    }
    if (found.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--card ", path, ": no *.md card in this directory"));
    }
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

// The first decision an explicit level did not get, with why.
std::optional<std::string> BelowLevel(const annotate::RunResult& run,
                                      decision::Level asked) {
  for (const annotate::RecordedDecision& d : run.decisions) {
    if (!d.record.level.has_value()) continue;  // a rule's answer
    if (auto below = ServedBelow(d.record, asked)) return below;
  }
  return std::nullopt;
}

// What the command line names, read and checked before a backend is made:
// every error here is bad input (exit 2).
struct Inputs {
  std::string level_name;
  decision::Level level = decision::Level::kAuto;
  std::vector<std::string> paths;  // one per card
  std::vector<cards::DatasetCard> cards;
  std::optional<cards::CandidateSource> candidates;
};

absl::StatusOr<Inputs> ReadInputs(const config::Config& config,
                                  const AnnotateCommandOptions& options) {
  Inputs in;
  in.level_name = options.level.empty() ? config.decider.level : options.level;
  auto level = decision::ParseLevel(in.level_name);
  if (!level.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--level: '", in.level_name, "' is not raw, L0, L1, L2 or auto"));
  }
  in.level = *level;
  auto paths = CardPaths(options.cards);
  if (!paths.ok()) return paths.status();
  in.paths = *std::move(paths);
  for (const std::string& path : in.paths) {
    auto card = cards::ReadCard(path);
    if (!card.ok()) return card.status();
    in.cards.push_back(*std::move(card));
  }
  if (!options.candidates.empty()) {
    auto loaded = cards::CandidateSource::Load(options.candidates);
    if (!loaded.ok()) return loaded.status();
    in.candidates = *std::move(loaded);
  }
  return in;
}

// A run that failed: an explicit level that cannot be served is said with
// the commands that would make it servable. Returns the exit code, 1.
int ReportFailure(const absl::Status& status, const Inputs& in,
                  const std::string& kind, const std::string& replay_flags) {
  if (status.code() != absl::StatusCode::kFailedPrecondition) {
    return Fail(1, status.message());
  }
  // The asker prefixes the question id: "<id>: <why>".
  const std::string message(status.message());
  const std::string question = message.substr(0, message.find(':'));
  Fail(1,
       absl::StrCat("level ", in.level_name, " cannot be served: ", message));
  const std::string remedy =
      LevelRemedy(question, in.level, kind, replay_flags);
  if (!remedy.empty()) std::cerr << remedy << "\n";
  return 1;
}

// --out itself for one card; for several, <out>/<card stem>.json.
std::string OutPath(const std::string& out, const std::string& card_name,
                    bool several) {
  if (!several) return out;
  return (std::filesystem::path(out) /
          (std::filesystem::path(card_name).stem().string() + ".json"))
      .string();
}

// The audit line, the summary and one line per proposal.
void PrintRun(const annotate::RunResult& run, const std::string& card_name,
              bool several) {
  if (several) std::cout << "== " << card_name << "\n";
  if (auto audit = annotate::AuditLine(run); audit.has_value()) {
    std::cout << *audit << "\n";
  }
  std::cout << annotate::SummaryLine(run) << "\n";
  for (const std::string& line : annotate::ProposalLines(run)) {
    std::cout << line << "\n";
  }
  std::cout.flush();
}

// Annotates each card in turn, stopping at the first that fails or is
// served below an explicit level. Returns the exit code: 0, or --strict's
// for missing labels.
int AnnotateCards(const Inputs& in, const config::Config& config,
                  Provider& provider, const AnnotateCommandOptions& options) {
  const bool several = in.cards.size() > 1;
  ui::Progress bar("cards", static_cast<int>(in.cards.size()),
                   ui::StderrIsTty(), std::cerr);
  annotate::AnnotateOptions run_options;
  run_options.level = in.level;
  run_options.policy = config.policy;
  run_options.candidates =
      in.candidates.has_value() ? &*in.candidates : nullptr;
  run_options.actor = Actor();
  nlohmann::ordered_json records = nlohmann::ordered_json::array();
  int strict_exit = 0;
  for (size_t c = 0; c < in.cards.size(); ++c) {
    const std::string card_name =
        std::filesystem::path(in.paths[c]).filename().string();
    run_options.on_ask = [&](const std::string& question, size_t states) {
      bar.Show(absl::StrCat(card_name, ": ", question, " (", states, " state",
                            states == 1 ? "" : "s", ")"));
    };
    auto run = annotate::Annotate(in.cards[c], provider, run_options);
    bar.Finish();
    if (!run.ok()) {
      return ReportFailure(run.status(), in, provider.info().kind,
                           options.replay_flags);
    }
    if (const auto below = BelowLevel(*run, in.level)) return Fail(1, *below);
    if (!run->skipped.empty() && c == 0) {
      std::cerr << annotate::kNoCandidatesNotice << "\n";
    }
    strict_exit = std::max(
        strict_exit,
        ReportMissingLabels("annotate", run->missing_labels, options.strict));
    if (!options.out.empty()) {
      if (absl::Status s = WriteOut(OutPath(options.out, card_name, several),
                                    annotate::EvalResult(*run));
          !s.ok()) {
        return Fail(1, s.message());
      }
    }
    if (options.json) {
      records.push_back(annotate::RunRecord(*run));
    } else {
      PrintRun(*run, card_name, several);
    }
    bar.Advance(card_name);
  }
  bar.Finish();
  if (options.json) {
    ui::PrintJson(
        several ? nlohmann::ordered_json{{"runs", records}} : records.front(),
        std::cout);
  }
  return strict_exit;
}

}  // namespace

int RunAnnotate(const config::Config& config,
                const AnnotateCommandOptions& options) {
  auto in = ReadInputs(config, options);
  if (!in.ok()) return Fail(2, in.status().message());
  const RunRetries retries("annotate");
  auto provider = MakeProvider(config, options.backend, retries.rule());
  if (!provider.ok()) {
    return Fail(
        provider.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1,
        provider.status().message());
  }
  LoadPromotedBundle(config, (*provider)->info().kind, provider->get());
  return AnnotateCards(*in, config, **provider, options);
}

}  // namespace mesa_anyjev::client
