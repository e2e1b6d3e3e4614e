// The AVU end of the annotate graph (docs/annotate.md): Q7 the value
// kind and AVU per proposal, dedup on the exact triple, Q8 avu.keep over the
// unique AVUs, the max_avus cap by keep probability, and one link per kept
// or rejected proposal.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/annotate/proposal.h"
#include "client/annotate/run_context.h"

namespace mesa_anyjev::annotate {

struct Assembled {
  std::vector<Proposal> kept;      // by keep_p, descending
  std::vector<Proposal> rejected;  // the earlier ones, then this stage's
  std::vector<Link> links;         // kept (proposed), then rejected
};

// `proposals` are the term winners that write; `rejected` those that did
// not. Every decision is recorded with scope "avu".
absl::StatusOr<Assembled> AssembleAvus(RunContext& ctx,
                                       std::vector<Proposal> proposals,
                                       std::vector<Proposal> rejected,
                                       const std::string& run_id);

// Links only (a run without candidates has no proposals to assemble).
std::vector<Link> LinksFor(const std::vector<Proposal>& kept,
                           const std::vector<Proposal>& rejected,
                           const std::string& run_id);

}  // namespace mesa_anyjev::annotate
