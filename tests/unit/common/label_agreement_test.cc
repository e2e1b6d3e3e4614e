// The one label-agreement check both composites run at start (the daemon's
// CompositeBackend through RemoteHiddenStates, the CLI's CompositeProvider
// and doctor through CheckDaemonLabels): common/backend.h's
// CheckLabelAgreement.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/backend.h"
#include "common/text/fake_tokenizer.h"

namespace mesa_anyjev {
namespace {

// What `tokenizer` gives each of CheckedLabels(), as the other side sends.
std::vector<std::vector<TokenId>> IdsOf(const text::Tokenizer& tokenizer) {
  std::vector<std::vector<TokenId>> ids;
  for (const std::string& label : CheckedLabels()) {
    auto encoded = tokenizer.Encode(label);
    REQUIRE(encoded.ok());
    ids.push_back(*encoded);
  }
  return ids;
}

// The index of `label` in CheckedLabels().
size_t IndexOf(const std::string& label) {
  const std::vector<std::string> labels = CheckedLabels();
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == label) return i;
  }
  FAIL("no checked label " << label);
  return 0;
}

TEST_CASE("CheckLabelAgreement passes labels both sides read alike",
          "[label_agreement]") {
  const text::FakeTokenizer local;
  CHECK(CheckLabelAgreement(local, IdsOf(local)).ok());
}

TEST_CASE("CheckLabelAgreement names every label whose ids differ",
          "[label_agreement]") {
  const text::FakeTokenizer local;
  std::vector<std::vector<TokenId>> remote = IdsOf(local);
  remote[IndexOf("Q")] = {7};
  absl::Status status = CheckLabelAgreement(local, remote);
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  // The words the daemon's router and the CLI's composite both refuse with
  // (docs/cli.md).
  CHECK(status.message() ==
        "the two tokenizers disagree on label tokens [Q]; a composite "
        "backend needs identical label ids");

  remote[IndexOf("Yes")] = {remote[IndexOf("Yes")][0], 1};
  remote[IndexOf("A")] = {};
  status = CheckLabelAgreement(local, remote);
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(status.message() ==
        "the two tokenizers disagree on label tokens [A, Q, Yes]; a "
        "composite backend needs identical label ids");
}

TEST_CASE("CheckLabelAgreement wants one id list per checked label",
          "[label_agreement]") {
  const text::FakeTokenizer local;
  std::vector<std::vector<TokenId>> remote = IdsOf(local);
  remote.pop_back();
  CHECK(CheckLabelAgreement(local, remote).code() ==
        absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace mesa_anyjev
