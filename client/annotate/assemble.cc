#include "client/annotate/assemble.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/cards/avu.h"
#include "client/cards/states.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::annotate {
namespace {

using policy::Outcome;

bool Writes(Outcome outcome) {
  return outcome == Outcome::kAuto || outcome == Outcome::kProposed;
}

DecisionPlace AvuPlace(const Proposal& p) {
  DecisionPlace place;
  place.scope = "avu";
  place.column_name = p.column_name;  // the proposal's own, not a stale one
  place.site_code = p.site_code;
  place.group_id = p.group_id;
  return place;
}

// Q7 for one proposal: the value kind by rule (docs/reference.md, Value kind
// by rule first) or, for a column
// without one, by avu.value_kind; then the value and the AVU.
absl::Status AssembleOne(RunContext& ctx, Proposal* p) {
  const cards::ColumnInfo* column = nullptr;
  if (p->column_name.has_value()) {
    ASSIGN_OR_RETURN(column, ctx.card.Column(*p->column_name));
  }
  std::optional<std::string> kind =
      cards::PreRuleValueKind(p->aspect, p->scope);
  if (!kind.has_value() && column != nullptr) {
    ASSIGN_OR_RETURN(const auto* value_kind, Question("avu.value_kind"));
    ASSIGN_OR_RETURN(
        Batch batch,
        ctx.asker.Ask(*value_kind, {cards::ValueKindState(
                                       ctx.card, *column,
                                       p->candidate.AsState(), p->aspect)}));
    const RecordedDecision& d = ctx.recorder.Record(
        std::move(batch.records.front()), AvuPlace(*p), batch.missing_labels);
    if (Writes(d.outcome)) kind = d.record.answer;
  }
  p->value_kind = kind.value_or(std::string(cards::kTermLabel));
  const std::string top =
      column != nullptr
          ? cards::TopProfileValue(column->profile).value_or(std::string())
          : std::string();
  ASSIGN_OR_RETURN(const std::string value,
                   cards::ValueFor(p->value_kind, p->candidate.label,
                                   column != nullptr ? column->name : "",
                                   p->site_code.value_or(""), top));
  ASSIGN_OR_RETURN(p->avu, cards::BuildAvu(p->candidate, value));
  return absl::OkStatus();
}

std::string Target(const Proposal& p) {
  if (p.column_name.has_value()) return *p.column_name;
  return p.site_code.value_or("");
}

}  // namespace

std::vector<Link> LinksFor(const std::vector<Proposal>& kept,
                           const std::vector<Proposal>& rejected,
                           const std::string& run_id) {
  std::vector<Link> links;
  for (const Proposal& p : kept) links.push_back(Link::For(p, run_id, true));
  for (const Proposal& p : rejected) {
    links.push_back(Link::For(p, run_id, false));
  }
  return links;
}

absl::StatusOr<Assembled> AssembleAvus(RunContext& ctx,
                                       std::vector<Proposal> proposals,
                                       std::vector<Proposal> rejected,
                                       const std::string& run_id) {
  // Q7 and dedup on the exact (attribute, value, unit) triple: a later
  // duplicate is rejected but keeps its link, pointing at the first, so the
  // run record still shows why it was dropped.
  std::vector<Proposal> unique;
  for (Proposal& p : proposals) {
    absl::Status built = AssembleOne(ctx, &p);
    if (!built.ok()) {
      // build_avu refuses a label without a key or a blank value; the
      // reference would stop the run, here only this term is rejected.
      if (!absl::IsInvalidArgument(built)) return built;
      p.outcome = Outcome::kRejected;
      p.rationale = absl::StrCat(p.rationale, "; ", built.message());
      rejected.push_back(std::move(p));
      continue;
    }
    const auto first =
        std::find_if(unique.begin(), unique.end(),
                     [&](const Proposal& u) { return *u.avu == *p.avu; });
    if (first != unique.end()) {
      p.outcome = Outcome::kRejected;
      p.duplicate_of = first->link_id;
      p.rationale = absl::StrCat("duplicate of ", first->link_id);
      rejected.push_back(std::move(p));
      continue;
    }
    unique.push_back(std::move(p));
  }

  // Q8: one avu.keep batch, each AVU seen with every other as siblings.
  ASSIGN_OR_RETURN(const auto* keep_q, Question("avu.keep"));
  std::vector<cards::State> states;
  for (size_t i = 0; i < unique.size(); ++i) {
    std::vector<cards::Avu> siblings;
    for (size_t j = 0; j < unique.size(); ++j) {
      if (j != i) siblings.push_back(*unique[j].avu);
    }
    states.push_back(
        cards::AvuState(ctx.card, *unique[i].avu, unique[i].candidate.AsState(),
                        unique[i].scope, Target(unique[i]), siblings));
  }
  ASSIGN_OR_RETURN(Batch batch, ctx.asker.Ask(*keep_q, states));
  Assembled out;
  for (size_t i = 0; i < unique.size(); ++i) {
    Proposal& p = unique[i];
    const RecordedDecision& d = ctx.recorder.Record(
        std::move(batch.records[i]), AvuPlace(p), batch.missing_labels);
    p.keep_p = d.record.p_true.value_or(0.0);
    p.keep_decision_id = d.seq;
    if (Writes(d.outcome)) {
      out.kept.push_back(std::move(p));
    } else {
      p.outcome = Outcome::kRejected;
      rejected.push_back(std::move(p));
    }
  }

  // The cap keeps the AVUs avu.keep is surest of.
  std::stable_sort(out.kept.begin(), out.kept.end(),
                   [](const Proposal& a, const Proposal& b) {
                     return *a.keep_p > *b.keep_p;
                   });
  const size_t cap = static_cast<size_t>(std::max(0, ctx.limits.max_avus));
  while (out.kept.size() > cap) {
    Proposal p = std::move(out.kept[cap]);
    out.kept.erase(out.kept.begin() + static_cast<long>(cap));
    p.outcome = Outcome::kRejected;
    p.rationale = "over max_avus";
    rejected.push_back(std::move(p));
  }
  out.rejected = std::move(rejected);
  out.links = LinksFor(out.kept, out.rejected, run_id);
  return out;
}

}  // namespace mesa_anyjev::annotate
