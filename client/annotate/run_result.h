// The result of one annotate run (docs/annotate.md): what
// was decided and proposed, and its three renderings: the CLI's stdout
// lines, the --out evaluation result (neon-avu-eval's shape) and the whole
// run record (--json), which stands in for the reference's provenance rows.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/annotate/proposal.h"
#include "client/annotate/recorder.h"
#include "client/backends/provider.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::annotate {

// Q0: the planner's ontologies against the ones the model says apply.
struct PlannerAudit {
  std::vector<std::string> planner;  // sorted
  std::vector<std::string> model;    // sorted
  std::vector<std::string> agree, planner_only, model_only;
};

struct RunResult {
  std::string run_id;  // UUID4
  std::string status = "decided";
  std::string actor;
  std::string card_name;
  std::string card_sha256;
  nlohmann::ordered_json plan;  // StaticPlan::ToJson()
  client::ProviderInfo provider;
  std::string requested_level;  // as given: raw | L0 | L1 | L2 | auto
  std::string policy_profile;
  std::optional<PlannerAudit> audit;
  // Stages that did not run and why they could not (no candidates file).
  std::vector<std::string> skipped;
  std::vector<RecordedDecision> decisions;
  std::vector<Group> groups;
  std::vector<Proposal> proposals;  // kept
  std::vector<Proposal> rejected;
  std::vector<Link> links;
  std::map<std::string, int> outcomes;  // over all decisions, by name
  int n_decisions = 0;
  long long n_prompts = 0;
  int missing_labels = 0;
  double seconds = 0.0;
};

// "planner audit: agree=[...] planner_only=[...] model_only=[...]", or
// nullopt when the run had no audit.
std::optional<std::string> AuditLine(const RunResult& run);

// "run <id>: <n> proposals, <n> rejected, <n> decisions, <n> prompts,
// missing_labels=<x>, <s:.1f>s; outcomes {'abstain': 3, ...}".
std::string SummaryLine(const RunResult& run);

// Per proposal: "  <outcome:<9> <attribute> = <repr(value)> [<unit>]
// <rationale>".
std::vector<std::string> ProposalLines(const RunResult& run);

// The --out document: model ("static": the plan's model is null), family,
// card, run_id, parse_ok, avus [...], n_decisions, n_prompts,
// missing_labels, seconds, outcomes, skipped.
nlohmann::ordered_json EvalResult(const RunResult& run);

// The whole run: the run's envelope, the plan and audit, every decision,
// group, proposal, rejection and link, and the eval result's counts.
nlohmann::ordered_json RunRecord(const RunResult& run);

}  // namespace mesa_anyjev::annotate
