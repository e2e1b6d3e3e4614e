// `mesa-anyjev annotate`: the reference's annotate graph for one card,
// through the configured backend (reference-system.md 3.3). Prints the
// summary and one line per proposal (or, with --json, the whole run record),
// and writes the evaluation result to --out. Exit 0 decided; 1 the backend
// failed or an explicit level cannot be served; 2 bad input.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/annotate/pipeline.h"
#include "client/annotate/run_result.h"
#include "client/backends/provider.h"
#include "client/cards/candidates.h"
#include "client/cards/card.h"
#include "client/commands/bundle_access.h"
#include "client/commands/commands.h"
#include "client/commands/missing_labels.h"
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

}  // namespace

int RunAnnotate(const config::Config& config,
                const AnnotateCommandOptions& options) {
  const std::string level_name =
      options.level.empty() ? config.decider.level : options.level;
  auto level = decision::ParseLevel(level_name);
  if (!level.ok()) {
    return Fail(2, absl::StrCat("--level: '", level_name,
                                "' is not raw, L0, L1, L2 or auto"));
  }
  auto card = cards::ReadCard(options.card);
  if (!card.ok()) return Fail(2, card.status().message());
  std::optional<cards::CandidateSource> candidates;
  if (!options.candidates.empty()) {
    auto loaded = cards::CandidateSource::Load(options.candidates);
    if (!loaded.ok()) return Fail(2, loaded.status().message());
    candidates = *std::move(loaded);
  }
  auto provider = MakeProvider(config, options.backend);
  if (!provider.ok()) {
    return Fail(
        provider.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1,
        provider.status().message());
  }
  LoadPromotedBundle(config, (*provider)->info().kind, provider->get());

  annotate::AnnotateOptions run_options;
  run_options.level = *level;
  run_options.policy = config.policy;
  run_options.candidates = candidates.has_value() ? &*candidates : nullptr;
  run_options.actor = Actor();
  auto run = annotate::Annotate(*card, **provider, run_options);
  if (!run.ok()) {
    if (run.status().code() == absl::StatusCode::kFailedPrecondition) {
      return Fail(1, absl::StrCat("level ", level_name, " cannot be served: ",
                                  run.status().message()));
    }
    return Fail(1, run.status().message());
  }
  if (!run->skipped.empty()) {
    std::cerr << annotate::kNoCandidatesNotice << "\n";
  }
  const int strict_exit =
      ReportMissingLabels("annotate", run->missing_labels, options.strict);
  if (!options.out.empty()) {
    if (absl::Status s = WriteOut(options.out, annotate::EvalResult(*run));
        !s.ok()) {
      return Fail(1, s.message());
    }
  }
  if (options.json) {
    decision::PyJsonOptions json;
    json.indent = 1;
    std::cout << decision::PyJsonDumps(annotate::RunRecord(*run), json) << "\n";
    return strict_exit;
  }
  if (auto audit = annotate::AuditLine(*run); audit.has_value()) {
    std::cout << *audit << "\n";
  }
  std::cout << annotate::SummaryLine(*run) << "\n";
  for (const std::string& line : annotate::ProposalLines(*run)) {
    std::cout << line << "\n";
  }
  return strict_exit;
}

}  // namespace mesa_anyjev::client
