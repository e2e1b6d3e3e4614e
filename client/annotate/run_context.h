// What every stage of one annotate run shares: the card, the policy, the
// candidate source, the asker and the recorder.
#pragma once

#include "client/annotate/asker.h"
#include "client/annotate/recorder.h"
#include "client/cards/candidates.h"
#include "client/cards/card.h"
#include "client/policy/policy.h"
#include "common/config/config.h"

namespace mesa_anyjev::annotate {

struct RunContext {
  const cards::DatasetCard& card;
  const config::PolicyConfig& limits;        // max_candidates, specificity, ...
  const policy::Policy& policy;              // thresholds
  const cards::CandidateSource* candidates;  // null: no candidates file
  Asker& asker;
  Recorder& recorder;
  int next_link_id = 1;
};

}  // namespace mesa_anyjev::annotate
