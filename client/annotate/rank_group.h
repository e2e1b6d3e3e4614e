// _rank_group and the specificity step (docs/annotate.md): one
// term.fits batch over a group's candidates, the top keep_top by p_true with
// the group-margin demotion of auto, and, for a winner with children, one
// more batch over its children that may replace it by a more specific term.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/annotate/proposal.h"
#include "client/annotate/run_context.h"
#include "client/cards/candidates.h"

namespace mesa_anyjev::annotate {

// What a group ranks terms for: a column, a site or (neither) the dataset.
struct RankTarget {
  std::string scope;  // column | site | dataset
  const cards::ColumnInfo* column = nullptr;
  const cards::SiteInfo* site = nullptr;
  std::string aspect;
  std::string ontology_id;
};

// Opens the group (outcome abstain, the search log, n_candidates); with
// candidates, asks term.fits over them and returns the top `keep_top` as
// proposals with their outcomes (the winner possibly replaced by a child),
// each with the next link id. The group records the winner.
absl::StatusOr<std::vector<Proposal>> RankGroup(
    RunContext& ctx, const RankTarget& target, const cards::SearchResult& found,
    int keep_top = 1);

// "p(fits)=<p:.2f> <level>".
std::string FitsRationale(double p, const std::string& level);

}  // namespace mesa_anyjev::annotate
