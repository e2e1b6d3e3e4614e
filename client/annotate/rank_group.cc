#include "client/annotate/rank_group.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cards/states.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::annotate {
namespace {

using policy::Outcome;

bool Writes(Outcome outcome) {
  return outcome == Outcome::kAuto || outcome == Outcome::kProposed;
}

cards::State CandidateState(const RunContext& ctx, const RankTarget& target,
                            const cards::Candidate& candidate, int n) {
  if (target.column != nullptr) {
    return cards::CandidateStateForColumn(
        ctx.card, *target.column, target.aspect, candidate.AsState(), n);
  }
  if (target.site != nullptr) {
    return cards::CandidateStateForSite(ctx.card, *target.site, target.aspect,
                                        candidate.AsState(), n);
  }
  return cards::CandidateStateForDataset(ctx.card, target.aspect,
                                         candidate.AsState(), n);
}

Group NewGroup(const RankTarget& target) {
  Group group;
  group.scope = target.scope;
  if (target.column != nullptr) group.column_name = target.column->name;
  if (target.site != nullptr) group.site_code = target.site->code;
  group.aspect = target.aspect;
  group.ontology_id = target.ontology_id;
  return group;
}

// One term.fits decision per candidate, recorded in `group_id`.
struct Fit {
  int seq = 0;
  double p = 0.0;
  std::string level;
  Outcome outcome = Outcome::kAbstain;
  size_t index = 0;  // into the candidates
};

// term.fits over `candidates`, recorded; returned ranked by p_true,
// descending, first among equals first.
absl::StatusOr<std::vector<Fit>> AskFits(
    RunContext& ctx, const RankTarget& target,
    const std::vector<cards::Candidate>& candidates, int group_id,
    std::optional<int> parent_decision_id, int* missing_labels) {
  ASSIGN_OR_RETURN(const auto* fits, Question("term.fits"));
  const int n = static_cast<int>(candidates.size());
  std::vector<cards::State> states;
  for (const cards::Candidate& c : candidates) {
    states.push_back(CandidateState(ctx, target, c, n));
  }
  ASSIGN_OR_RETURN(Batch batch, ctx.asker.Ask(*fits, states));
  *missing_labels = batch.missing_labels;
  std::vector<Fit> out;
  for (size_t i = 0; i < batch.records.size(); ++i) {
    DecisionPlace place;
    place.scope = target.scope;
    if (target.column != nullptr) place.column_name = target.column->name;
    if (target.site != nullptr) place.site_code = target.site->code;
    place.group_id = group_id;
    place.parent_decision_id = parent_decision_id;
    place.candidate = candidates[i];
    const RecordedDecision& d = ctx.recorder.Record(
        std::move(batch.records[i]), std::move(place), batch.missing_labels);
    out.push_back(Fit{d.seq, d.record.p_true.value_or(0.0),
                      policy::RecordLevelName(d.record.level), d.outcome, i});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Fit& a, const Fit& b) { return a.p > b.p; });
  return out;
}

Proposal MakeProposal(const RankTarget& target, const cards::Candidate& c,
                      const Fit& fit, int group_id) {
  Proposal p;
  p.candidate = c;
  p.scope = target.scope;
  if (target.column != nullptr) p.column_name = target.column->name;
  if (target.site != nullptr) p.site_code = target.site->code;
  p.aspect = target.aspect;
  p.ontology_id = target.ontology_id;
  p.p = fit.p;
  p.level = fit.level;
  p.outcome = fit.outcome;
  p.rationale = FitsRationale(fit.p, fit.level);
  p.group_id = group_id;
  p.decision_id = fit.seq;
  return p;
}

// Specificity (Q4b): the best child replaces `winner` iff its outcome
// writes and p_child >= p_parent + specificity_delta. Children the file did
// not record (or that are all the winner itself) leave the parent standing.
absl::Status Specify(RunContext& ctx, const RankTarget& target,
                     int parent_group, Proposal* winner) {
  auto children = ctx.candidates->Children(winner->candidate.curie);
  if (!children.ok()) return absl::OkStatus();
  std::vector<cards::Candidate> kids;
  for (cards::Candidate& child : *children) {
    if (child.curie == winner->candidate.curie) continue;
    if (static_cast<int>(kids.size()) >= ctx.limits.max_candidates) break;
    kids.push_back(std::move(child));
  }
  if (kids.empty()) return absl::OkStatus();
  Group group = NewGroup(target);
  group.search_json = {{"specificity_of", winner->candidate.curie},
                       {"children", kids.size()}};
  group.n_candidates = static_cast<int>(kids.size());
  group.escalated_from = parent_group;
  const int group_id = ctx.recorder.OpenGroup(std::move(group)).group_id;
  int missing = 0;
  ASSIGN_OR_RETURN(
      std::vector<Fit> fits,
      AskFits(ctx, target, kids, group_id, winner->decision_id, &missing));
  const Fit& best = fits.front();
  const bool replaces = Writes(best.outcome) &&
                        best.p >= winner->p + ctx.limits.specificity_delta;
  Group& g = ctx.recorder.group(group_id);
  g.winner_decision_id = best.seq;
  g.top_p = best.p;
  g.group_margin = best.p - winner->p;
  g.level = best.level;
  g.outcome = replaces ? best.outcome : Outcome::kRejected;
  g.missing_labels = missing;
  if (!replaces) return absl::OkStatus();
  Proposal child = MakeProposal(target, kids[best.index], best, group_id);
  child.rationale = absl::StrCat(
      FitsRationale(best.p, best.level), "; more specific than ",
      winner->candidate.curie, absl::StrFormat(" (p=%.2f)", winner->p));
  child.link_id = winner->link_id;
  *winner = std::move(child);
  return absl::OkStatus();
}

}  // namespace

std::string FitsRationale(double p, const std::string& level) {
  return absl::StrFormat("p(fits)=%.2f %s", p, level);
}

absl::StatusOr<std::vector<Proposal>> RankGroup(
    RunContext& ctx, const RankTarget& target, const cards::SearchResult& found,
    int keep_top) {
  Group group = NewGroup(target);
  group.search_json = found.log;
  group.n_candidates = static_cast<int>(found.candidates.size());
  const int group_id = ctx.recorder.OpenGroup(std::move(group)).group_id;
  std::vector<Proposal> out;
  if (found.candidates.empty()) return out;

  int missing = 0;
  ASSIGN_OR_RETURN(
      std::vector<Fit> fits,
      AskFits(ctx, target, found.candidates, group_id, std::nullopt, &missing));
  ASSIGN_OR_RETURN(const policy::Thresholds t,
                   ctx.policy.thresholds("term.fits"));
  for (size_t i = 0; i < fits.size() && static_cast<int>(i) < keep_top; ++i) {
    const double next = i + 1 < fits.size() ? fits[i + 1].p : 0.0;
    Proposal p = MakeProposal(target, found.candidates[fits[i].index], fits[i],
                              group_id);
    // A winner that is not clearly ahead of the next candidate is for a
    // curator, whatever its own probability.
    if (p.outcome == Outcome::kAuto && fits[i].p - next < t.margin) {
      p.outcome = Outcome::kProposed;
    }
    p.link_id = ctx.next_link_id++;
    out.push_back(std::move(p));
  }

  Group& g = ctx.recorder.group(group_id);
  g.winner_decision_id = fits.front().seq;
  g.top_p = fits.front().p;
  g.group_margin = fits.front().p - (fits.size() > 1 ? fits[1].p : 0.0);
  g.level = fits.front().level;
  g.outcome = out.front().outcome;
  g.missing_labels = missing;

  Proposal& winner = out.front();
  if (Writes(winner.outcome) && ctx.limits.specificity &&
      winner.candidate.has_children && ctx.candidates != nullptr) {
    RETURN_IF_ERROR(Specify(ctx, target, group_id, &winner));
  }
  return out;
}

}  // namespace mesa_anyjev::annotate
