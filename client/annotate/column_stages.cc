#include "client/annotate/column_stages.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "client/cards/registry.h"
#include "client/cards/states.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::annotate {
namespace {

using policy::Outcome;

bool Writes(Outcome outcome) {
  return outcome == Outcome::kAuto || outcome == Outcome::kProposed;
}

bool Contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// Option indices by probability, descending, first among equals first.
std::vector<size_t> RankedOptions(const std::vector<double>& probs) {
  std::vector<size_t> order(probs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return probs[a] > probs[b]; });
  return order;
}

const cards::ColumnHint* HintFor(const cards::StaticPlan& plan,
                                 const std::string& column) {
  for (const auto& [name, hint] : plan.columns) {
    if (name == column) return &hint;
  }
  return nullptr;
}

DecisionPlace ColumnPlace(const cards::ColumnInfo& column) {
  DecisionPlace place;
  place.scope = "column";
  place.column_name = column.name;
  return place;
}

// Q1: the columns whose column.annotate outcome writes.
absl::StatusOr<std::vector<const cards::ColumnInfo*>> AnnotateColumns(
    RunContext& ctx, const cards::StaticPlan& plan) {
  ASSIGN_OR_RETURN(const auto* annotate, Question("column.annotate"));
  std::vector<const cards::ColumnInfo*> live;
  for (const cards::ColumnInfo& column : ctx.card.columns) {
    const cards::ColumnHint* hint = HintFor(plan, column.name);
    const bool hinted_yes = hint != nullptr && hint->annotate == true;
    const bool hinted_no = hint != nullptr && hint->annotate == false;
    // Identifiers are decided by rule, never by the model; a planner's "no"
    // is a rule too, attributed to the planner.
    if ((cards::IsIdentifier(column) && !hinted_yes) || hinted_no) {
      const bool identifier = cards::IsIdentifier(column) && !hinted_yes;
      ASSIGN_OR_RETURN(
          auto record,
          policy::DecisionRecord::Rule(
              annotate->question, cards::ColumnState(ctx.card, column),
              /*answer_index=*/1, identifier ? "n/a" : "planner"));
      ctx.recorder.Record(std::move(record), ColumnPlace(column),
                          /*missing_labels=*/0, Outcome::kRule);
      continue;
    }
    live.push_back(&column);
  }
  std::vector<cards::State> states;
  for (const auto* column : live) {
    states.push_back(cards::ColumnState(ctx.card, *column));
  }
  ASSIGN_OR_RETURN(Batch batch, ctx.asker.Ask(*annotate, states));
  std::vector<const cards::ColumnInfo*> out;
  for (size_t i = 0; i < live.size(); ++i) {
    const RecordedDecision& d =
        ctx.recorder.Record(std::move(batch.records[i]), ColumnPlace(*live[i]),
                            batch.missing_labels);
    if (Writes(d.outcome)) out.push_back(live[i]);
  }
  return out;
}

// Q2: [top1] when the outcome writes, else the top 2; the hint's aspect
// added, "other" dropped.
absl::StatusOr<std::vector<ColumnPicks>> ChooseAspects(
    RunContext& ctx, const cards::StaticPlan& plan,
    const std::vector<const cards::ColumnInfo*>& columns) {
  ASSIGN_OR_RETURN(const auto* aspect_q, Question("column.aspect"));
  std::vector<cards::State> states;
  for (const auto* column : columns) {
    states.push_back(cards::ColumnState(ctx.card, *column));
  }
  ASSIGN_OR_RETURN(Batch batch, ctx.asker.Ask(*aspect_q, states));
  const std::vector<std::string>& ids = cards::Aspects();
  std::vector<ColumnPicks> out;
  for (size_t i = 0; i < columns.size(); ++i) {
    const RecordedDecision& d =
        ctx.recorder.Record(std::move(batch.records[i]),
                            ColumnPlace(*columns[i]), batch.missing_labels);
    std::vector<std::string> aspects;
    if (d.record.probs.has_value()) {
      const auto ranked = RankedOptions(*d.record.probs);
      const size_t take = Writes(d.outcome) ? 1 : 2;
      for (size_t r = 0; r < take && r < ranked.size(); ++r) {
        aspects.push_back(ids[ranked[r]]);
      }
    }
    const cards::ColumnHint* hint = HintFor(plan, columns[i]->name);
    if (hint != nullptr && hint->aspect.has_value() &&
        !Contains(aspects, *hint->aspect)) {
      aspects.push_back(*hint->aspect);
    }
    std::erase(aspects, std::string("other"));
    if (aspects.empty()) continue;
    out.push_back(ColumnPicks{columns[i], std::move(aspects), {}});
  }
  return out;
}

// Q3 choice path: one column.ontology decision, masked to the aspect's
// ontologies in play; [top1] when it writes, else the top 2, only options
// with probability left after masking.
absl::StatusOr<std::vector<std::string>> ChoicePicks(
    RunContext& ctx, const cards::ColumnInfo& column, const std::string& aspect,
    const std::vector<std::string>& in_play) {
  ASSIGN_OR_RETURN(const auto* ontology_q, Question("column.ontology"));
  ASSIGN_OR_RETURN(Batch batch,
                   ctx.asker.Ask(*ontology_q, {cards::ColumnState(
                                                  ctx.card, column, aspect)}));
  ASSIGN_OR_RETURN(auto masked,
                   policy::Masked(batch.records.front(),
                                  cards::MaskForAspect(aspect, in_play)));
  const RecordedDecision& d = ctx.recorder.Record(
      std::move(masked), ColumnPlace(column), batch.missing_labels);
  std::vector<std::string> picks;
  if (!d.record.probs.has_value()) return picks;
  const std::vector<std::string> ids = cards::RegistryIds();
  const auto ranked = RankedOptions(*d.record.probs);
  const size_t take = Writes(d.outcome) ? 1 : 2;
  for (size_t r = 0; r < take && r < ranked.size(); ++r) {
    if ((*d.record.probs)[ranked[r]] > 0.0) picks.push_back(ids[ranked[r]]);
  }
  return picks;
}

// Q3 twin path: column.ontology_fits per allowed ontology (sorted by id);
// the first 2 at or over its propose threshold, else the top 2 anyway.
absl::StatusOr<std::vector<std::string>> TwinPicks(
    RunContext& ctx, const cards::ColumnInfo& column, const std::string& aspect,
    std::vector<std::string> allowed) {
  ASSIGN_OR_RETURN(const auto* fits_q, Question("column.ontology_fits"));
  ASSIGN_OR_RETURN(const policy::Thresholds t,
                   ctx.policy.thresholds("column.ontology_fits"));
  std::sort(allowed.begin(), allowed.end());
  std::vector<cards::State> states;
  for (const std::string& id : allowed) {
    ASSIGN_OR_RETURN(const cards::OntologyEntry* entry, cards::Entry(id));
    std::vector<std::string> aspects = entry->aspects;
    std::sort(aspects.begin(), aspects.end());
    states.push_back(cards::OntologyState(ctx.card, column, aspect, id,
                                          entry->option_text, aspects));
  }
  ASSIGN_OR_RETURN(Batch batch, ctx.asker.Ask(*fits_q, states));
  std::vector<std::pair<double, std::string>> scored;
  for (size_t i = 0; i < allowed.size(); ++i) {
    const RecordedDecision& d = ctx.recorder.Record(
        std::move(batch.records[i]), ColumnPlace(column), batch.missing_labels);
    scored.emplace_back(d.record.p_true.value_or(0.0), allowed[i]);
  }
  std::stable_sort(
      scored.begin(), scored.end(),
      [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> picks;
  for (const auto& [p, id] : scored) {
    if (p >= t.propose && picks.size() < 2) picks.push_back(id);
  }
  if (picks.empty()) {
    for (size_t i = 0; i < scored.size() && i < 2; ++i) {
      picks.push_back(scored[i].second);
    }
  }
  return picks;
}

}  // namespace

absl::StatusOr<std::vector<ColumnPicks>> RunColumnStages(
    RunContext& ctx, const cards::StaticPlan& plan,
    const std::vector<std::string>& in_play) {
  ASSIGN_OR_RETURN(const auto live, AnnotateColumns(ctx, plan));
  ASSIGN_OR_RETURN(std::vector<ColumnPicks> columns,
                   ChooseAspects(ctx, plan, live));
  // The choice needs all 12 options at once; a narrower backend asks the
  // twin, and so does the rest of the run once the choice is refused.
  bool use_twin = ctx.asker.info().max_choice_k < 12;
  for (ColumnPicks& picks : columns) {
    const cards::ColumnInfo& column = *picks.column;
    auto add = [&](const std::string& id) {
      if (!Contains(picks.ontologies, id)) picks.ontologies.push_back(id);
    };
    for (const std::string& aspect : picks.aspects) {
      std::vector<std::string> allowed;
      for (const std::string& id : cards::AllowedForAspect(aspect)) {
        if (Contains(in_play, id)) allowed.push_back(id);
      }
      if (aspect == "unit") {
        if (Contains(allowed, "uo")) add("uo");
        continue;
      }
      if (allowed.empty()) continue;
      std::vector<std::string> chosen;
      if (!use_twin) {
        auto choice = ChoicePicks(ctx, column, aspect, in_play);
        if (choice.ok()) {
          chosen = *std::move(choice);
        } else if (absl::IsOutOfRange(choice.status())) {
          use_twin = true;
        } else {
          return choice.status();
        }
      }
      if (use_twin) {
        ASSIGN_OR_RETURN(chosen, TwinPicks(ctx, column, aspect, allowed));
      }
      for (const std::string& id : chosen) add(id);
    }
    const cards::ColumnHint* hint = HintFor(plan, column.name);
    if (hint != nullptr && hint->ontology.has_value() &&
        Contains(in_play, *hint->ontology)) {
      add(*hint->ontology);
    }
  }
  return columns;
}

}  // namespace mesa_anyjev::annotate
