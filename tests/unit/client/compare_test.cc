// bench compare's runner (client/bench/compare.h) on the fake model at two
// temperatures: the same answers at raw (a temperature divides every logit
// alike), other probabilities, so the flip rate is zero while the log loss
// differs; L1 is not compared where a model has no temperature of its own.
// The cell's figures are eval::CompareModels of the very decisions.
#include "client/bench/compare.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/backends/provider.h"
#include "client/bench/task.h"
#include "client/learn/cell.h"
#include "common/config/config.h"
#include "common/questions/question_set.h"

namespace mesa_anyjev::bench {
namespace {

using Json = nlohmann::ordered_json;
using decision::Level;

std::unique_ptr<client::Provider> Fake(double temperature) {
  config::Config config;
  config.model.fake_temperature = temperature;
  auto provider = client::MakeProvider(config, "fake");
  REQUIRE(provider.ok());
  return *std::move(provider);
}

// column.aspect over columns whose words name an option, labelled with it.
Task AspectTask(int n) {
  const auto* entry =
      *questions::QuestionSet::Reference().Find("column.aspect");
  Task task;
  task.name = "labels_column_aspect";
  task.question_id = "column.aspect";
  task.question = entry->question;
  const std::vector<std::pair<std::string, int>> words = {
      {"taxon of the beetles", 0}, {"method of trapping", 2},
      {"unit of the count", 4},    {"location of the plot", 6},
      {"measurement of mass", 3},  {"bookkeeping row id", 7}};
  for (int i = 0; i < n; ++i) {
    const auto& [text, label] = words[i % words.size()];
    task.items.states.push_back(
        Json(absl::StrCat("Column 'c", i, "': ", text, " ", i)));
    task.items.labels.push_back(label);
    task.items.weights.push_back(1.0);
    task.items.cards.push_back(i % 2 == 0 ? "card-a" : "card-b");
  }
  return task;
}

TEST_CASE("compare: the fake at two temperatures answers alike at raw",
          "[compare]") {
  auto a = Fake(0.7);
  auto b = Fake(1.4);
  CHECK(a->info().model == "fake");
  CHECK(b->info().model == "fake-t1.4");
  CHECK(a->info().identity != b->info().identity);
  const Task task = AspectTask(60);
  CompareOptions options;
  options.bootstrap = {.resamples = 200, .seed = 0};
  std::vector<ComparePoints> points;
  const Json result = CompareTask(*a, *b, task, options, &points, nullptr);

  const Json& raw = result["cells"]["raw"];
  REQUIRE(raw.contains("verdict"));
  CHECK(raw["n"] == 60);
  CHECK(raw["flips"] == 0);
  CHECK(raw["a"]["acc"] == raw["b"]["acc"]);
  CHECK(raw["mean_abs_dp"].get<double>() > 0.01);  // other probabilities
  CHECK(raw["a"]["nll"] != raw["b"]["nll"]);
  CHECK(raw["difference"]["acc"]["lo"] == 0.0);
  CHECK(raw["difference"]["acc"]["hi"] == 0.0);
  CHECK(raw["resamples"] == 200);

  // The cell is CompareModels of the decisions each side makes.
  REQUIRE(points.size() >= 1);
  CHECK(points[0].level == "raw");
  auto oracle = eval::CompareModels(points[0].a, points[0].b, task.items.labels,
                                    options.bootstrap);
  REQUIRE(oracle.ok());
  CHECK(raw["flip_interval"][1] == oracle->flip_interval.hi);
  CHECK(raw["difference"]["nll"]["lo"] == oracle->nll.interval.lo);
  CHECK(raw["p95_abs_dp"] == oracle->p95_abs_dp);

  // Neither fake has a temperature of its own: L1 is not compared, and
  // the reason names the side.
  const Json& l1 = result["cells"]["L1"];
  CHECK(l1["not_applicable"] == true);
  CHECK(l1["reason"].get<std::string>().rfind("model a (fake) does not serve "
                                              "L1",
                                              0) == 0);
  // 60 states with no flip bound it under 0.10: raw and L0 agree.
  CHECK(result["cells"]["L0"]["verdict"] == "agree");
  CHECK(result["verdict"] == "agree");
  CHECK(result["labels_sha256"] == LabelsSha256(task));
}

TEST_CASE("compare: the verdict follows the configured tolerances",
          "[compare]") {
  auto a = Fake(0.7);
  auto b = Fake(1.4);
  const Task few = AspectTask(20);
  CompareOptions options;
  options.levels = {Level::kRaw};
  options.bootstrap = {.resamples = 50, .seed = 1};
  std::vector<ComparePoints> points;
  // 20 states cannot bound the flip rate under 0.10 (Wilson: 0.161).
  Json result = CompareTask(*a, *b, few, options, &points, nullptr);
  CHECK(result["cells"]["raw"]["flips"] == 0);
  CHECK(result["cells"]["raw"]["flip_interval"][1].get<double>() > 0.16);
  CHECK(result["verdict"] == "disagree");
  options.tolerances.max_flip = 0.2;
  result = CompareTask(*a, *b, few, options, &points, nullptr);
  CHECK(result["verdict"] == "agree");
}

TEST_CASE("compare: the labels digest changes with any label", "[compare]") {
  Task task = AspectTask(10);
  const std::string before = LabelsSha256(task);
  CHECK(before.size() == 64);
  task.items.labels[3] = 1;
  CHECK(LabelsSha256(task) != before);
  task = AspectTask(11);
  CHECK(LabelsSha256(task) != before);
}

}  // namespace
}  // namespace mesa_anyjev::bench
