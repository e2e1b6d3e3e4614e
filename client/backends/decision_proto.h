// Decisions RPC messages <-> common/decision types on the client side (the
// daemon's own converter is server/service/decision_convert).
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "common/decision/decision.h"
#include "common/decision/question.h"
#include "common/decision/running_priors.h"
#include "mesa/anyjev/v1/decisions.pb.h"

namespace mesa_anyjev::client {

// A question as the daemon parses it back to the same key: a score whose
// options are its own bin names travels as bins and a scale, else as levels.
void ToProto(const decision::Question& question,
             ::mesa::anyjev::v1::Question* out);

// A state-major response -> result[state][question]; INTERNAL when the
// daemon's answer does not have one decision per (state, question) or a
// level it cannot have served.
absl::StatusOr<std::vector<std::vector<decision::Decision>>> FromProto(
    const ::mesa::anyjev::v1::DecideResponse& response, size_t n_states,
    const std::vector<decision::Question>& questions);

// The carried priors of `questions` (listings "<key>|...") into a request.
void ToProto(const decision::PriorTable& carried,
             const std::vector<decision::Question>& questions,
             ::mesa::anyjev::v1::DecideRequest* request);

// A response's priors into `carried`, replacing the listings it names;
// INTERNAL when one is malformed (a daemon should never send it).
absl::Status FromProto(const ::mesa::anyjev::v1::DecideResponse& response,
                       decision::PriorTable* carried);

}  // namespace mesa_anyjev::client
