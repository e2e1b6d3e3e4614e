#include "client/annotate/pipeline.h"

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/annotate/assemble.h"
#include "client/annotate/column_stages.h"
#include "client/annotate/rank_group.h"
#include "client/cards/registry.h"
#include "client/cards/states.h"
#include "client/cards/static_rules.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::annotate {
namespace {

using policy::Outcome;

bool Writes(Outcome outcome) {
  return outcome == Outcome::kAuto || outcome == Outcome::kProposed;
}

std::vector<std::string> Minus(const std::vector<std::string>& a,
                               const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const std::string& x : a) {
    if (std::find(b.begin(), b.end(), x) == b.end()) out.push_back(x);
  }
  return out;
}

// Q0: dataset.ontology_applies over all 12 registry entries; recorded and
// compared with the plan, never written.
absl::StatusOr<PlannerAudit> AuditPlanner(
    RunContext& ctx, const std::vector<std::string>& planned) {
  ASSIGN_OR_RETURN(const auto* applies, Question("dataset.ontology_applies"));
  const auto& registry = cards::OntologyRegistry();
  std::vector<cards::State> states;
  for (const cards::OntologyEntry& entry : registry) {
    states.push_back(cards::DatasetOntologyState(ctx.card, entry.option_text));
  }
  ASSIGN_OR_RETURN(Batch batch, ctx.asker.Ask(*applies, states));
  PlannerAudit audit;
  for (size_t i = 0; i < registry.size(); ++i) {
    DecisionPlace place;
    place.scope = "dataset";
    const RecordedDecision& d = ctx.recorder.Record(
        std::move(batch.records[i]), std::move(place), batch.missing_labels);
    if (Writes(d.outcome)) audit.model.push_back(registry[i].id);
  }
  audit.planner = planned;
  std::sort(audit.planner.begin(), audit.planner.end());
  std::sort(audit.model.begin(), audit.model.end());
  audit.planner_only = Minus(audit.planner, audit.model);
  audit.model_only = Minus(audit.model, audit.planner);
  audit.agree = Minus(audit.planner, audit.planner_only);
  return audit;
}

// Term winners that write become proposals; the others are rejected (their
// outcome kept, so the record says why).
void SplitWinners(std::vector<Proposal> ranked, bool escalated_writes,
                  std::vector<Proposal>* proposals,
                  std::vector<Proposal>* rejected) {
  for (Proposal& p : ranked) {
    if (Writes(p.outcome) ||
        (escalated_writes && p.outcome == Outcome::kEscalated)) {
      proposals->push_back(std::move(p));
    } else {
      rejected->push_back(std::move(p));
    }
  }
}

// S + Q4, Q5 and Q6: term groups for columns, sites and the dataset.
absl::Status RankTerms(RunContext& ctx, const cards::StaticPlan& plan,
                       const std::vector<ColumnPicks>& columns,
                       const std::vector<std::string>& in_play,
                       std::vector<Proposal>* proposals,
                       std::vector<Proposal>* rejected) {
  const int max_candidates = ctx.limits.max_candidates;
  for (const ColumnPicks& picks : columns) {
    const cards::ColumnInfo& column = *picks.column;
    const std::string aspect =
        picks.aspects.empty() ? "other" : picks.aspects.front();
    std::vector<std::string> queries;
    for (const auto& [name, hint] : plan.columns) {
      if (name == column.name) queries = hint.queries;
    }
    for (const std::string& q : cards::QueriesForColumn(column)) {
      if (std::find(queries.begin(), queries.end(), q) == queries.end()) {
        queries.push_back(q);
      }
    }
    for (const std::string& ontology : picks.ontologies) {
      cards::SearchResult found;
      if (ontology == "uo") {
        auto unit = column.unit.empty() ? std::nullopt
                                        : cards::UnitCandidate(column.unit);
        if (unit.has_value()) {
          found.candidates.push_back(*std::move(unit));
          found.log = {{"ontology_id", "uo"}, {"table", true}};
        } else {
          found = ctx.candidates->SearchCandidates(
              {column.unit.empty() ? "unit" : column.unit}, "uo",
              max_candidates);
        }
      } else {
        found =
            ctx.candidates->SearchCandidates(queries, ontology, max_candidates);
      }
      ASSIGN_OR_RETURN(
          auto ranked,
          RankGroup(ctx, {"column", &column, nullptr, aspect, ontology},
                    found));
      SplitWinners(std::move(ranked), /*escalated_writes=*/true, proposals,
                   rejected);
    }
  }
  for (const cards::SiteInfo& site : ctx.card.sites) {
    const auto found = ctx.candidates->BiomeCandidates(
        cards::HabitatQueries(site), max_candidates);
    ASSIGN_OR_RETURN(
        auto ranked,
        RankGroup(ctx, {"site", nullptr, &site, "environment", "envo"}, found));
    SplitWinners(std::move(ranked), /*escalated_writes=*/true, proposals,
                 rejected);
  }
  const std::vector<std::string>& taxa = plan.taxon_queries;
  if (!taxa.empty() &&
      std::find(in_play.begin(), in_play.end(), "ncbitaxon") != in_play.end()) {
    const std::vector<std::string> first3(
        taxa.begin(), taxa.begin() + std::min<size_t>(3, taxa.size()));
    const auto found =
        ctx.candidates->SearchCandidates(first3, "ncbitaxon", max_candidates);
    ASSIGN_OR_RETURN(
        auto ranked,
        RankGroup(ctx, {"dataset", nullptr, nullptr, "taxon", "ncbitaxon"},
                  found, kMaxTaxonAvus));
    SplitWinners(std::move(ranked), /*escalated_writes=*/false, proposals,
                 rejected);
  }
  return absl::OkStatus();
}

}  // namespace

std::string NewRunId() {
  std::random_device device;
  std::uniform_int_distribution<int> byte(0, 255);
  unsigned char b[16];
  for (unsigned char& x : b) x = static_cast<unsigned char>(byte(device));
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122
  return absl::StrFormat(
      "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
      b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
      b[12], b[13], b[14], b[15]);
}

absl::StatusOr<RunResult> Annotate(const cards::DatasetCard& card,
                                   client::Provider& provider,
                                   const AnnotateOptions& options) {
  const absl::Time start = absl::Now();
  const int64_t prompts_before = provider.prompts();
  RETURN_IF_ERROR(provider.ResetRunningPriors());
  const policy::Policy& policy =
      options.rules != nullptr ? *options.rules : policy::Policy::Defaults();
  ASSIGN_OR_RETURN(policy::Profile profile,
                   policy.profile(options.policy.profile));

  RunResult run;
  run.run_id = options.run_id.empty() ? NewRunId() : options.run_id;
  run.actor = options.actor;
  run.card_name = card.name();
  run.card_sha256 = card.sha256;
  run.provider = provider.info();
  run.requested_level = decision::LevelName(options.level);
  run.policy_profile = profile.name;

  const cards::StaticPlan plan = cards::MakeStaticPlan(card);
  run.plan = plan.ToJson();
  const std::vector<std::string> in_play =
      plan.ontologies.empty() ? cards::RegistryIds() : plan.ontologies;

  Asker asker(&provider, options.level, options.on_ask);
  Recorder recorder(&policy, profile);
  RunContext ctx{card,  options.policy, policy, options.candidates,
                 asker, recorder};

  if (options.policy.audit_planner) {
    ASSIGN_OR_RETURN(run.audit, AuditPlanner(ctx, in_play));
  }
  ASSIGN_OR_RETURN(const auto columns, RunColumnStages(ctx, plan, in_play));

  if (options.candidates != nullptr) {
    std::vector<Proposal> proposals, rejected;
    RETURN_IF_ERROR(
        RankTerms(ctx, plan, columns, in_play, &proposals, &rejected));
    ASSIGN_OR_RETURN(Assembled assembled,
                     AssembleAvus(ctx, std::move(proposals),
                                  std::move(rejected), run.run_id));
    run.proposals = std::move(assembled.kept);
    run.rejected = std::move(assembled.rejected);
    run.links = std::move(assembled.links);
  } else {
    run.skipped = {"term.fits", "avu.value_kind", "avu.keep"};
  }

  run.decisions.assign(recorder.decisions().begin(),
                       recorder.decisions().end());
  run.groups.assign(recorder.groups().begin(), recorder.groups().end());
  run.outcomes = recorder.OutcomeCounts();
  run.n_decisions = recorder.n_decisions();
  run.n_prompts = provider.prompts() - prompts_before;
  run.missing_labels = asker.missing_labels();
  run.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return run;
}

}  // namespace mesa_anyjev::annotate
