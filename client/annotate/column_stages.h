// The column stages of the annotate graph (docs/annotate.md): Q1
// column.annotate (identifiers by rule, the rest in one live batch), Q2
// column.aspect (top-2 fan-out below threshold) and Q3 the ontologies per
// (column, aspect): unit -> uo by rule, the column.ontology choice masked to
// the aspect's ontologies when the backend takes K=12, else its noul twin
// column.ontology_fits per allowed ontology.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/annotate/run_context.h"
#include "client/cards/static_rules.h"

namespace mesa_anyjev::annotate {

// A column that goes on to term search: its chosen aspects and the
// ontologies picked for it over all its aspects, in the order first picked.
struct ColumnPicks {
  const cards::ColumnInfo* column = nullptr;
  std::vector<std::string> aspects;
  std::vector<std::string> ontologies;
};

// Q1-Q3 over the card's columns, recording every decision.
absl::StatusOr<std::vector<ColumnPicks>> RunColumnStages(
    RunContext& ctx, const cards::StaticPlan& plan,
    const std::vector<std::string>& in_play);

}  // namespace mesa_anyjev::annotate
