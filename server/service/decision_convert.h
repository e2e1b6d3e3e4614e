// Decisions RPC <-> the plain types of common/decision: the only place the
// decision engine meets protobuf. Parsing enforces the limits of docs/rpc.md
// and names the offending field in every INVALID_ARGUMENT.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/config/config.h"
#include "common/decision/decider.h"
#include "common/decision/question.h"
#include "common/questions/question_set.h"
#include "mesa/anyjev/v1/decisions.pb.h"

namespace mesa_anyjev::service {

struct ParsedDecide {
  std::vector<std::string> states;  // rendered state texts
  std::vector<decision::Question> questions;
  decision::Level level = decision::Level::kAuto;
  decision::DecideOptions options;
  bool carry_priors =
      false;  // the call's priors are `priors`, not the daemon's
  decision::PriorTable priors;  // checked: listings of this call's questions
};

struct ParsedFit {
  decision::Question question = decision::Question::Noul("");
  std::vector<std::string> states;
  std::vector<int> labels;
  decision::Level level = decision::Level::kL1;
  decision::FitHeadOptions head;
};

// `caps` bounds K (max_choice_k) below L2. A question given by its id alone
// (no kind, text, options, labels, bins or scale) is the definition `served`
// holds under that id (what ListQuestions lists); an id it does not hold is
// NOT_FOUND naming questions[i].id, the closest id and every id served.
absl::StatusOr<ParsedDecide> ParseDecideRequest(
    const ::mesa::anyjev::v1::DecideRequest& request,
    const config::LimitsConfig& limits, const Capabilities& caps,
    const questions::QuestionSet& served);

absl::StatusOr<ParsedFit> ParseFitRequest(
    const ::mesa::anyjev::v1::FitRequest& request,
    const config::LimitsConfig& limits);

// decisions[state][question] -> response, state-major; `priors` (a call
// with carry_priors) go back as the response's priors.
void FillDecideResponse(
    const std::vector<std::vector<decision::Decision>>& decisions,
    const std::string& model, const decision::PriorTable* priors,
    ::mesa::anyjev::v1::DecideResponse* response);

}  // namespace mesa_anyjev::service
