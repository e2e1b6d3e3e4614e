// The stores of what a decider learns: observations and their fit schedule,
// adaptation statistics, and the artifact store's loads (all or nothing),
// key replacement and per-call snapshots.
#include "common/decision/artifact_store.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/decision/decider.h"
#include "common/fake_backend.h"

namespace mesa_anyjev::decision {
namespace {

using Json = nlohmann::ordered_json;

Question Three(const std::string& text = "Which one?") {
  return *Question::Choice(text, {"genes", "proteins", "cells"});
}

Json Temperature(double t) {
  return Json{{"method", "temperature"}, {"temperature", t}};
}

TEST_CASE("observations fit at their thresholds, one fit at a time",
          "[decision]") {
  ObservationStore store;
  const Question q = Three();
  for (int i = 0; i < 3; ++i) {
    CHECK_FALSE(store.Record(q, "s" + std::to_string(i), i % 3, 4).has_value());
  }
  const auto due = store.Record(q, "s3", 1, 4);
  REQUIRE(due.has_value());
  CHECK(due->states == std::vector<std::string>{"s0", "s1", "s2", "s3"});
  CHECK(due->labels == std::vector<int>{0, 1, 2, 1});
  CHECK(due->question.id() == q.id());
  // While it fits, more states wait for the next threshold.
  CHECK_FALSE(store.Record(q, "s4", 0, 4).has_value());
  // A fit that failed leaves the threshold where it was.
  store.Fitted(q.key(), /*succeeded=*/false, 4, 2.0);
  REQUIRE(store.Record(q, "s5", 0, 4).has_value());
  // One that succeeded on 6 labels moves it to max(4 + 1, round(6 x 2.5)).
  store.Fitted(q.key(), /*succeeded=*/true, 6, 2.5);
  const Json record = store.ToJson()[q.key()];
  CHECK(record["fits"] == 1);
  CHECK(record["next_fit"] == 15);
  CHECK(record["labels"].size() == 6);
  CHECK(record["question_id"] == q.id());
}

TEST_CASE("a merge of observations is refused whole", "[decision]") {
  ObservationStore store;
  const Question q = Three();
  REQUIRE_FALSE(store.Record(q, "kept", 2, 30).has_value());
  // The second entry has no question: its labels are checked against the
  // record the store has (K=3), and one is out of range.
  LoadedObservations fresh{"new", Three("Other?"), {"a"}, {0}, 2, 9};
  LoadedObservations bad{q.key(), std::nullopt, {"b"}, {3}, {}, {}};
  const absl::Status refused = store.Merge({fresh, bad});
  CHECK(absl::IsInvalidArgument(refused));
  CHECK(absl::StrContains(refused.message(), "K=3"));
  CHECK(store.ToJson().size() == 1);
  bad.labels = {1};
  REQUIRE(store.Merge({fresh, bad}).ok());
  const Json all = store.ToJson();
  CHECK(all[q.key()]["labels"] == Json::array({2, 1}));
  CHECK(all["new"]["fits"] == 2);
  CHECK(all["new"]["next_fit"] == 9);
  // Without a question, observations of a key the store lacks are dropped.
  REQUIRE(store.Merge({{"unknown", std::nullopt, {"c"}, {0}, {}, {}}}).ok());
  CHECK_FALSE(store.ToJson().contains("unknown"));
}

TEST_CASE("adaptation statistics add what a call read", "[decision]") {
  AdaptationStore store;
  Matrix features(2, 2);
  features << 1.0, 2.0, 3.0, 4.0;
  const AdaptationStats seen = store.With("", "k", features);
  CHECK(seen.n == 2);
  CHECK(seen.sum == std::vector<double>{4.0, 6.0});
  CHECK(seen.sumsq == std::vector<double>{10.0, 20.0});
  CHECK(store.All("").empty());  // With stores nothing
  store.Add("", "k", features);
  store.Add("", "k", features);
  CHECK(store.With("", "k", features).n == 6);
  // Another width starts again.
  CHECK(store.With("", "k", Matrix::Ones(1, 3)).n == 1);
  store.Set("j", {{1.0}, {1.0}, 5});
  const auto all = store.All("");
  REQUIRE(all.size() == 2);
  CHECK(all[0].first == "k");
  CHECK(all[0].second.n == 4);
  CHECK(all[1].first == "j");
}

TEST_CASE("each tenant's calls adapt its own view over the loaded base",
          "[decision]") {
  AdaptationStore store;
  store.Set("k", {{10.0, 20.0}, {100.0, 400.0}, 10});  // a loaded file's
  Matrix features(2, 2);
  features << 1.0, 2.0, 3.0, 4.0;
  store.Add("a", "k", features);
  store.Add("a", "k", features);
  // Tenant a sees the base and its own states; b, the base alone.
  const AdaptationStats a = store.With("a", "k", Matrix::Zero(0, 2));
  CHECK(a.n == 14);
  CHECK(a.sum == std::vector<double>{18.0, 32.0});
  CHECK(a.sumsq == std::vector<double>{120.0, 440.0});
  CHECK(store.With("b", "k", Matrix::Zero(0, 2)).n == 10);
  CHECK(store.All("b")[0].second.sum == std::vector<double>{10.0, 20.0});
  CHECK(store.All("a")[0].second.n == 14);
  // A layer of another width stands alone.
  store.Add("b", "k", Matrix::Ones(3, 3));
  CHECK(store.With("b", "k", Matrix::Zero(0, 3)).n == 3);
  // A new load of the key replaces the base and drops every layer of it.
  store.Set("k", {{1.0, 1.0}, {1.0, 1.0}, 1});
  CHECK(store.With("a", "k", Matrix::Zero(0, 2)).n == 1);
  CHECK(store.With("b", "k", Matrix::Zero(0, 2)).n == 1);
}

TEST_CASE("the artifact store loads whole and replaces one key", "[decision]") {
  FakeBackend fake;
  ArtifactStore store(&fake);
  const Question q = Three();
  const Question other = Three("Which topic?");
  // A head to serve, fit on the fake.
  Decider fitter(&fake);
  std::vector<std::string> states;
  std::vector<int> labels;
  for (int i = 0; i < 12; ++i) {
    states.push_back("About " + q.options()[i % 3] + " #" + std::to_string(i));
    labels.push_back(i % 3);
  }
  const auto head = fitter.FitHead(q, states, labels);
  REQUIRE(head.ok());
  Json file = {{"model", "fake"},
               {"artifacts", {{q.key(), Temperature(1.5)}}},
               {"heads", {{q.key(), *head}}}};
  // One bad entry refuses the whole file; nothing is stored.
  Json bad = file;
  bad["observations"] = {{"x",
                          {{"kind", "choice"},
                           {"options", {"a", "b"}},
                           {"states", {"s"}},
                           {"labels", {4}}}}};
  CHECK(absl::IsInvalidArgument(store.Load(bad).status()));
  CHECK(store.L1(q.key()) == nullptr);
  CHECK_FALSE(store.HasHead(q.key()));
  const auto loaded = store.Load(file);
  REQUIRE(loaded.ok());
  CHECK(*loaded == 2);
  CHECK(store.L1(q.key())->temperature == 1.5);
  // A rewording routes to the head; under exact heads its snapshot has none.
  const ArtifactSnapshot loose = store.Snapshot({q, other}, false);
  const ArtifactSnapshot exact = store.Snapshot({q, other}, true);
  CHECK(loose.Route(other).has_value());
  CHECK_FALSE(exact.Route(other).has_value());
  CHECK(exact.Route(q)->exact);
  CHECK(exact.L1(q.key())->temperature == 1.5);
  CHECK(exact.L1(other.key()) == nullptr);
  // Replacing with a file that holds only the L1 artifact drops the head;
  // a snapshot taken before keeps what it read.
  Json only_l1 = file;
  only_l1["artifacts"][q.key()] = Temperature(2.5);
  only_l1["heads"] = Json::object();
  REQUIRE(store.ReplaceKey(q.key(), only_l1).ok());
  CHECK(store.L1(q.key())->temperature == 2.5);
  CHECK_FALSE(store.HasHead(q.key()));
  CHECK(loose.Route(q).has_value());
  CHECK(loose.L1(q.key())->temperature == 1.5);
  // A refused replacement changes nothing.
  Json foreign = file;
  foreign["model"] = "other";
  CHECK(absl::IsFailedPrecondition(store.ReplaceKey(q.key(), foreign)));
  CHECK(store.L1(q.key())->temperature == 2.5);
  // An empty file drops both.
  REQUIRE(store.ReplaceKey(q.key(), Json{{"model", "fake"}}).ok());
  CHECK(store.L1(q.key()) == nullptr);
  const Json exported = store.Export(true);
  CHECK(exported["artifacts"].empty());
  CHECK(exported["heads"].empty());
  CHECK_FALSE(exported.contains("observations"));
}

}  // namespace
}  // namespace mesa_anyjev::decision
