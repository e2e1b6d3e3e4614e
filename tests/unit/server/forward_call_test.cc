// A merged call's stop rule and status (ForwardCall), its output split per
// member, and the adapter that runs merged calls on a plain Backend (the
// fake model the daemon serves with --model fake).
#include "server/engine/forward_call.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/fake_backend.h"
#include "server/engine/backend_forward_model.h"

namespace mesa_anyjev::engine {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'000'000);

TEST_CASE("A merged call's status says how its callers stopped",
          "[forward_call]") {
  const std::vector<PromptGroup> groups(1);
  std::atomic<bool> first{false}, second{false};
  ForwardCall call{LogprobsTask{},
                   {{&groups, {kNow + absl::Seconds(1), &first}},
                    {&groups, {kNow + absl::Seconds(5), &second}}}};
  CHECK(call.StopStatus(kNow, "f").ok());
  CHECK_FALSE(call.ShouldStop(kNow));

  // One caller gone, one waiting: the call goes on.
  CHECK(call.StopStatus(kNow + absl::Seconds(2), "f").ok());
  CHECK_FALSE(call.ShouldStop(kNow + absl::Seconds(2)));

  // Both out of time: late, not cancelled.
  const absl::Status late = call.StopStatus(kNow + absl::Seconds(6), "f");
  CHECK(late.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(absl::StrContains(late.message(), "every caller"));

  // Both cancelled, or one cancelled and one late: CANCELLED.
  first = true;
  CHECK(call.StopStatus(kNow + absl::Seconds(6), "f").code() ==
        absl::StatusCode::kCancelled);
  second = true;
  const absl::Status gone = call.StopStatus(kNow, "f");
  CHECK(gone.code() == absl::StatusCode::kCancelled);
  CHECK(absl::StrContains(gone.message(), "every caller"));
  CHECK(call.ShouldStop(kNow));

  // A lone caller's call answers with that caller's own status.
  call.members.pop_back();
  CHECK(absl::StrContains(call.StopStatus(kNow, "f").message(),
                          "f: the caller cancelled"));
}

TEST_CASE(
    "A merged output is split per member, or refused when it is not "
    "the call's",
    "[forward_call]") {
  const std::vector<PromptGroup> one(1), two(2);
  ForwardCall call{LogprobsTask{}, {{&one, {}}, {&two, {}}}};
  GroupLogprobs rows(3);
  for (int g = 0; g < 3; ++g) rows[g].push_back({{}, {}, g});
  auto shares = SplitOutput(call, rows);
  REQUIRE(shares.ok());
  REQUIRE(shares->size() == 2);
  CHECK(std::get<GroupLogprobs>((*shares)[0]).size() == 1);
  const auto& second = std::get<GroupLogprobs>((*shares)[1]);
  REQUIRE(second.size() == 2);
  CHECK(second[1][0].n_tokens == 2);

  rows.pop_back();  // a model that answered for fewer groups
  CHECK(absl::IsInternal(SplitOutput(call, rows).status()));
  CHECK(absl::IsInternal(SplitOutput(call, HiddenStatesResult{}).status()));
}

PromptGroup FruitGroup(const FakeBackend& backend) {
  const text::FakeTokenizer& tok = backend.fake_tokenizer();
  PromptGroup group;
  group.prefix = *tok.Encode("State:\nx\n\nQuestion: q?\nOptions:\n");
  group.suffixes.push_back(
      *tok.Encode("A. apple\nB. banana\nC. cherry\nAnswer with the letter "
                  "only."));
  group.label_ids = {tok.LabelId("A"), tok.LabelId("B")};
  return group;
}

TEST_CASE("A merged call on a plain backend answers each member as alone",
          "[forward_call]") {
  FakeBackend fake(FakeBackendOptions{});
  BackendForwardModel model(&fake);
  const std::vector<PromptGroup> a{FruitGroup(fake)};
  std::vector<PromptGroup> b{FruitGroup(fake), FruitGroup(fake)};
  b[1].suffixes.push_back(b[1].suffixes[0]);
  for (const ForwardTask& task :
       {ForwardTask(LogprobsTask{3}), ForwardTask(HiddenStatesTask{{1, -1}})}) {
    ForwardCall merged{task, {{&a, {}}, {&b, {}}}};
    auto out = model.Run(merged);
    REQUIRE(out.ok());
    auto shares = SplitOutput(merged, *std::move(out));
    REQUIRE(shares.ok());
    for (size_t m = 0; m < 2; ++m) {
      ForwardCall alone{task, {merged.members[m]}};
      auto want = model.Run(alone);
      REQUIRE(want.ok());
      if (std::holds_alternative<LogprobsTask>(task)) {
        const auto& got = std::get<GroupLogprobs>((*shares)[m]);
        const auto& rows = std::get<GroupLogprobs>(*want);
        REQUIRE(got.size() == rows.size());
        for (size_t g = 0; g < got.size(); ++g) {
          REQUIRE(got[g].size() == rows[g].size());
          for (size_t s = 0; s < got[g].size(); ++s) {
            CHECK(got[g][s].label_logprobs == rows[g][s].label_logprobs);
          }
        }
      } else {
        CHECK(std::get<HiddenStatesResult>((*shares)[m]).values ==
              std::get<HiddenStatesResult>(*want).values);
      }
    }
  }
}

TEST_CASE(
    "A merged call on a plain backend stops once every caller has "
    "stopped",
    "[forward_call]") {
  // The fake takes a minute per call: only every caller's stop can end it.
  // It goes on while one caller still waits, and stops when none does. The
  // drain deadline relies on it: gRPC cancels every call, so the call must
  // end.
  FakeBackend slow(FakeBackendOptions{.delay_s = 60.0});
  BackendForwardModel model(&slow);
  const std::vector<PromptGroup> groups{FruitGroup(slow)};
  std::atomic<bool> first{true}, second{true};
  const ForwardCall call{LogprobsTask{},
                         {{&groups, {absl::InfiniteFuture(), &first}},
                          {&groups, {absl::InfiniteFuture(), &second}}}};
  auto out = model.Run(call);
  CHECK(out.status().code() == absl::StatusCode::kCancelled);
  CHECK(absl::StrContains(out.status().message(), "every caller"));

  FakeBackend quick(FakeBackendOptions{.delay_s = 0.05});
  BackendForwardModel quick_model(&quick);
  second.store(false);
  CHECK(quick_model.Run(call).ok());
}

}  // namespace
}  // namespace mesa_anyjev::engine
