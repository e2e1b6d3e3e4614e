// The enum <-> name tables of client/policy: one table per enum.
#include <catch2/catch.hpp>
#include <string>

#include "client/policy/decision_record.h"
#include "client/policy/policy.h"
#include "tests/unit/enum_names_check.h"

namespace mesa_anyjev::policy {
namespace {

using testing::CheckNames;
using testing::CheckRoundTrip;
using testing::ParseError;

TEST_CASE("Calibration names round-trip", "[enum_names]") {
  CheckRoundTrip<Calibration>({{Calibration::kAnyjev, "anyjev"},
                               {Calibration::kTypesafe, "typesafe"},
                               {Calibration::kNone, "none"}},
                              CalibrationName, ParseCalibration);
  CHECK(ParseError(ParseCalibration, "platt") ==
        "calibration must be one of anyjev, typesafe, none; got \"platt\"");
}

TEST_CASE("Outcome names round-trip", "[enum_names]") {
  CheckRoundTrip<Outcome>(
      {{Outcome::kAuto, "auto"},
       {Outcome::kProposed, "proposed"},
       {Outcome::kHuman, "human"},
       {Outcome::kEscalated, "escalated"},
       {Outcome::kAbstain, "abstain"},
       {Outcome::kRejected, "rejected"},
       {Outcome::kRule, "rule"},
       {Outcome::kDeciderUnavailable, "decider_unavailable"}},
      OutcomeName, ParseOutcome);
  CHECK(ParseError(ParseOutcome, "written") ==
        "outcome must be one of auto, proposed, human, escalated, abstain, "
        "rejected, rule, decider_unavailable; got \"written\"");
}

TEST_CASE("Stat names are distinct", "[enum_names]") {
  CheckNames<Stat>(
      {{Stat::kPTrue, "p_true"}, {Stat::kConfidence, "confidence"}}, StatName);
}

}  // namespace
}  // namespace mesa_anyjev::policy
