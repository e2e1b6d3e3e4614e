// Decisions.ListQuestions: the question set the daemon serves by id
// (common/questions, the CLI's set), each with its key, the level auto
// serves it at now and the bundle version behind it. Limits and codes are
// in docs/rpc.md.
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "common/decision/decider.h"
#include "common/questions/question_set.h"
#include "mesa/anyjev/v1/decisions.pb.h"
#include "server/service/bundles_service.h"

namespace mesa_anyjev::service {

inline constexpr int kMaxListedIds = 64;
inline constexpr size_t kMaxQuestionIdBytes = 128;

// The entries `request.ids` name, in their order (every entry when empty),
// into `response`. INVALID_ARGUMENT for too many ids or an id of the wrong
// length, NOT_FOUND "ids[i]: no question with id '...' (did you mean
// '...'?)" for an unknown one. `bundles` (Bundles::Served) gives a
// bundle_version where the version serves the entry's key.
absl::Status ListQuestions(
    const ::mesa::anyjev::v1::ListQuestionsRequest& request,
    const questions::QuestionSet& set, const decision::Decider& decider,
    const std::map<std::string, ServedBundle>& bundles,
    ::mesa::anyjev::v1::ListQuestionsResponse* response);

}  // namespace mesa_anyjev::service
