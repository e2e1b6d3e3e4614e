#include "client/annotate/run_result.h"

#include "absl/strings/str_format.h"
#include "client/annotate/py_repr.h"
#include "common/questions/question_lock.h"
#include "common/text/json_null.h"
#include "common/util/build_info.h"

namespace mesa_anyjev::annotate {
namespace {

nlohmann::ordered_json OutcomesJson(const RunResult& run) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [name, count] : run.outcomes) j[name] = count;
  return j;
}

nlohmann::ordered_json AuditJson(const RunResult& run) {
  if (!run.audit.has_value()) return nullptr;
  return {{"planner", run.audit->planner},
          {"model", run.audit->model},
          {"agree", run.audit->agree},
          {"planner_only", run.audit->planner_only},
          {"model_only", run.audit->model_only}};
}

}  // namespace

std::optional<std::string> AuditLine(const RunResult& run) {
  if (!run.audit.has_value()) return std::nullopt;
  return absl::StrFormat(
      "planner audit: agree=%s planner_only=%s model_only=%s",
      PyStrListRepr(run.audit->agree), PyStrListRepr(run.audit->planner_only),
      PyStrListRepr(run.audit->model_only));
}

std::string SummaryLine(const RunResult& run) {
  return absl::StrFormat(
      "run %s: %d proposals, %d rejected, %d decisions, %d prompts, "
      "missing_labels=%d, %.1fs; outcomes %s",
      run.run_id, run.proposals.size(), run.rejected.size(), run.n_decisions,
      run.n_prompts, run.missing_labels, run.seconds,
      PyCountsRepr(run.outcomes));
}

std::vector<std::string> ProposalLines(const RunResult& run) {
  std::vector<std::string> lines;
  for (const Proposal& p : run.proposals) {
    lines.push_back(absl::StrFormat(
        "  %-9s %s = %s [%s] %s", policy::OutcomeName(p.outcome),
        p.avu->attribute, PyStrRepr(p.avu->value), p.avu->unit, p.rationale));
  }
  return lines;
}

nlohmann::ordered_json EvalResult(const RunResult& run) {
  nlohmann::ordered_json avus = nlohmann::ordered_json::array();
  for (const Proposal& p : run.proposals) {
    avus.push_back({{"attribute", p.avu->attribute},
                    {"value", p.avu->value},
                    {"unit", p.avu->unit},
                    {"ontology_id", p.ontology_id},
                    {"curie", p.candidate.curie},
                    {"iri", p.candidate.iri},
                    {"label", p.candidate.label},
                    {"aspect", p.aspect},
                    {"column", p.column_name.has_value()
                                   ? nlohmann::ordered_json(*p.column_name)
                                   : nlohmann::ordered_json(nullptr)},
                    {"rationale", p.rationale},
                    {"p", p.p},
                    {"level", p.level},
                    {"outcome", policy::OutcomeName(p.outcome)},
                    {"link_id", p.link_id}});
  }
  return {{"model", "static"},
          {"family", "mesa-anyjev"},
          {"card", run.card_name},
          {"run_id", run.run_id},
          {"parse_ok", true},
          {"avus", std::move(avus)},
          {"n_decisions", run.n_decisions},
          {"n_prompts", run.n_prompts},
          {"missing_labels", run.missing_labels},
          {"seconds", run.seconds},
          {"outcomes", OutcomesJson(run)},
          {"skipped", run.skipped}};
}

nlohmann::ordered_json RunRecord(const RunResult& run) {
  nlohmann::ordered_json decisions = nlohmann::ordered_json::array();
  for (const RecordedDecision& d : run.decisions)
    decisions.push_back(d.ToJson());
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const Group& g : run.groups) groups.push_back(g.ToJson());
  nlohmann::ordered_json proposals = nlohmann::ordered_json::array();
  for (const Proposal& p : run.proposals) proposals.push_back(p.ToJson());
  nlohmann::ordered_json rejected = nlohmann::ordered_json::array();
  for (const Proposal& p : run.rejected) rejected.push_back(p.ToJson());
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  for (const Link& l : run.links) links.push_back(l.ToJson());
  return {{"run_id", run.run_id},
          {"status", run.status},
          {"actor", run.actor},
          {"card_name", run.card_name},
          {"card_sha256", run.card_sha256},
          {"planner", "static"},
          {"planner_model", nullptr},
          {"planner_prompt_sha256", nullptr},
          {"plan_json", run.plan},
          {"planner_fallback", false},
          {"backend_kind", run.provider.kind},
          {"canonical_model", run.provider.model},
          {"served_model", text::NullIfEmpty(run.provider.served_model)},
          {"level", run.requested_level},
          {"mesa_anyjev_version", util::kVersion},
          {"questions_lock_sha",
           questions::LockSha(questions::QuestionSet::Reference())},
          {"policy_profile", run.policy_profile},
          {"n_decisions", run.n_decisions},
          {"n_prompts", run.n_prompts},
          {"missing_labels", run.missing_labels},
          {"seconds", run.seconds},
          {"outcomes", OutcomesJson(run)},
          {"skipped", run.skipped},
          {"audit", AuditJson(run)},
          {"decisions", std::move(decisions)},
          {"groups", std::move(groups)},
          {"proposals", std::move(proposals)},
          {"rejected", std::move(rejected)},
          {"links", std::move(links)}};
}

}  // namespace mesa_anyjev::annotate
