// Labels, the label store, cells and leave-one-card-out, and the bench's
// table and tasks (docs/learning.md).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "client/backends/provider.h"
#include "client/bench/results.h"
#include "client/bench/task.h"
#include "client/learn/cell.h"
#include "client/learn/fit.h"
#include "client/learn/label_ingest.h"
#include "client/learn/label_store.h"
#include "client/learn/loco.h"
#include "client/policy/policy.h"
#include "common/questions/question_set.h"
#include "tests/unit/temp_dir.h"

namespace mesa_anyjev::learn {
namespace {

using Json = nlohmann::ordered_json;

const questions::QuestionSet& Set() {
  return questions::QuestionSet::Reference();
}

std::string Line(const std::string& qid, const Json& state, int label,
                 const std::string& source, const std::string& card,
                 std::optional<double> weight = std::nullopt) {
  Json j;
  j["question_id"] = qid;
  j["state"] = state;
  j["label"] = label;
  j["source"] = source;
  j["card"] = card;
  if (weight.has_value()) j["weight"] = *weight;
  return j.dump() + "\n";
}

TEST_CASE("learn: sources carry the weights of 8.1") {
  CHECK(SourceWeight("curator") == 1.0);
  CHECK(SourceWeight("curator_implicit") == 0.7);
  CHECK(SourceWeight("consensus_negative") == 0.5);
  CHECK(SourceWeight("gold") == 1.0);
  CHECK_FALSE(SourceWeight("oracle").has_value());
}

TEST_CASE("learn: ingest validates each row and names the line") {
  const std::string text =
      Line("term.fits", Json{{"a", 1}}, 0, "curator", "c1") + "\n" +
      Line("term.fits", Json{{"a", 1}}, 1, "curator", "c1") +
      Line("term.fits", "plain text", 1, "teacher", "c2", 0.25) +
      Line("column.aspect", Json{{"b", 2}}, 9, "gold", "c1") + "[1, 2]\n";
  ParsedLabels parsed = ParseLabelLines(text, Set(), "2026-01-01T00:00:00");
  REQUIRE(parsed.rows.size() == 2);
  CHECK(parsed.rows[0].weight == 1.0);
  CHECK(parsed.rows[1].weight == 0.25);
  CHECK(parsed.rows[1].state == "plain text");
  REQUIRE(parsed.problems.size() == 3);
  CHECK(parsed.problems[0].line == 3);
  CHECK(parsed.problems[0].reason ==
        "duplicate of line 1 (same question, state and source)");
  CHECK(parsed.problems[1].line == 5);
  CHECK(parsed.problems[1].reason ==
        "label: 9 is outside [0, 8) for column.aspect (K=8)");
  CHECK(parsed.problems[2].reason == "a JSON object is required");
}

TEST_CASE(
    "learn: the store is insert-or-ignore and labelled_states keeps "
    "the heaviest row per state") {
  testing::TempDir dir;
  auto store = LabelStore::Open(dir.Path("labels"));
  REQUIRE(store.ok());
  const Json s1 = {{"x", 1}}, s2 = {{"x", 2}};
  const std::string text =
      Line("term.fits", s1, 1, "consensus_negative", "c1") +
      Line("term.fits", s1, 0, "curator", "c1") +
      Line("term.fits", s2, 0, "consensus_majority", "c2") +
      Line("term.fits", s2, 1, "teacher", "c2", 0.6);  // not > 0.6: kept out
  ParsedLabels parsed = ParseLabelLines(text, Set(), "t");
  REQUIRE(parsed.problems.empty());
  auto inserted = store->Insert(parsed.rows);
  REQUIRE(inserted.ok());
  CHECK(*inserted == 4);
  CHECK(*store->Insert(parsed.rows) == 0);
  auto reopened = LabelStore::Open(dir.Path("labels"));
  REQUIRE(reopened.ok());
  REQUIRE(reopened->rows().size() == 4);
  CHECK(reopened->rows()[3].label_id == 4);

  const decision::Question& q = (*Set().Find("term.fits"))->question;
  LabelledSet all = LabelledStates(*reopened, q, 0.0);
  REQUIRE(all.size() == 2);
  // Sorted by state_sha256; per state the heaviest (first on ties) wins.
  for (size_t i = 0; i < all.size(); ++i) {
    if (all.states[i] == s1) {
      CHECK(all.labels[i] == 0);
      CHECK(all.weights[i] == 1.0);
    } else {
      CHECK(all.labels[i] == 0);
      CHECK(all.weights[i] == 0.6);
    }
  }
  CHECK(LabelledStates(*reopened, q, 0.7).size() == 1);
  CHECK(LabelledStates(*reopened, q, 0.0, {"c1"}).size() == 1);
}

TEST_CASE("learn: states render as the reference renders them") {
  CHECK(RenderState(Json("as is")) == "as is");
  CHECK(RenderState(Json::parse(R"({"b": 1.0, "a": [1]})")) ==
        "{\n  \"b\": 1.0,\n  \"a\": [\n    1\n  ]\n}");
}

decision::Decision Made(std::vector<double> probs, decision::Level level,
                        std::string prior = "batch",
                        std::optional<double> flip = std::nullopt) {
  decision::Decision d;
  d.probs = std::move(probs);
  d.level = level;
  d.diagnostics.prior_method = std::move(prior);
  d.diagnostics.order_flip_l0 = flip;
  return d;
}

TEST_CASE(
    "learn: a noul cell counts negatives and reads flip from the "
    "phrasing swap") {
  using decision::Level;
  const std::vector<decision::Decision> d = {
      Made({0.9, 0.1}, Level::kL0, "frozen:batch", 0.0),
      Made({0.3, 0.7}, Level::kL0, "frozen:batch", 1.0),
      Made({0.6, 0.4}, Level::kL1, "frozen:batch")};
  auto cell = FoldCell(d, {0, 1, 1}, /*noul=*/true);
  REQUIRE(cell.ok());
  CHECK((*cell)["n"] == 3);
  CHECK((*cell)["n_neg"] == 2);
  CHECK((*cell)["flip"].get<double>() == Approx(0.5));
  CHECK((*cell)["levels"] == Json::array({"L0", "L1"}));
  CHECK((*cell)["class_counts"] == Json{{"0", 1}, {"1", 2}});
  CHECK((*cell)["mean_p_true"].get<double>() == Approx(0.6));
  CHECK((*cell)["prior_frozen"] == true);
  CHECK((*cell)["acc"].get<double>() == Approx(2.0 / 3.0));
  auto choice = Cell({Made({0.2, 0.3, 0.5}, Level::kRaw)}, {2}, false);
  REQUIRE(choice.ok());
  CHECK((*choice)["n_neg"] == 0);
  CHECK((*choice)["mean_p_true"].is_null());
  CHECK((*choice)["flip"].is_null());
  CHECK(PyCounts({{0, 8}, {1, 4}}) == "{0: 8, 1: 4}");
}

// A labelled noul set over the fake: `per_card` (yes, no) per card.
LabelledSet NoulSet(const std::vector<std::pair<int, int>>& per_card) {
  LabelledSet set;
  for (size_t c = 0; c < per_card.size(); ++c) {
    for (int label : {0, 1}) {
      const int n = label == 0 ? per_card[c].first : per_card[c].second;
      for (int i = 0; i < n; ++i) {
        set.states.push_back(Json{{"card", c}, {"item", i}, {"y", label}});
        set.labels.push_back(label);
        set.weights.push_back(1.0);
        set.cards.push_back("card" + std::to_string(c));
      }
    }
  }
  return set;
}

TEST_CASE(
    "learn: leave-one-card-out guards noul folds with the reference's "
    "reasons and pools the rest") {
  config::Config config;
  auto provider = client::MakeProvider(config, "fake");
  REQUIRE(provider.ok());
  const decision::Question& q = (*Set().Find("column.annotate"))->question;
  // 30 negatives in all: every training side has fewer than 30.
  const LabelledSet set = NoulSet({{10, 4}, {10, 10}, {10, 10}, {15, 6}});
  auto loco = LeaveOneCardOut(**provider, q, set, decision::Level::kL1);
  REQUIRE(loco.ok());
  CHECK(loco->skipped_folds["card0"] ==
        "insufficient_train_per_class {0: 35, 1: 26}");
  CHECK(loco->skipped_folds["card3"] ==
        "insufficient_train_per_class {0: 30, 1: 24}");
  CHECK(loco->n_folds == 0);
  const LabelledSet wide = NoulSet({{40, 40}, {6, 4}, {6, 6}});
  loco = LeaveOneCardOut(**provider, q, wide, decision::Level::kL1);
  REQUIRE(loco.ok());
  CHECK(loco->skipped_folds["card0"] ==
        "insufficient_train_per_class {0: 12, 1: 10}");
  CHECK(loco->skipped_folds["card1"] ==
        "insufficient_heldout_per_class {0: 6, 1: 4}");
  REQUIRE(loco->n_folds == 1);
  CHECK(loco->folds["card2"]["n"] == 12);
  CHECK(loco->decisions.size() == 12);
  CHECK(loco->folds["card2"]["prior_frozen"] == true);
  CHECK(loco->folds["card2"]["levels"] == Json::array({"L1"}));
}

TEST_CASE("learn: a fold the provider cannot fit is skipped, not fatal") {
  config::Config config;
  auto provider = client::MakeProvider(config, "fake");
  REQUIRE(provider.ok());
  // A choice has no class guard: 3 training labels are under L2's
  // max(8, 2K) floor, so the head fit refuses.
  const decision::Question& q = (*Set().Find("column.aspect"))->question;
  LabelledSet set;
  for (int i = 0; i < 4; ++i) {
    set.states.push_back(Json{{"i", i}});
    set.labels.push_back(i % 2);
    set.weights.push_back(1.0);
    set.cards.push_back(i == 0 ? "a" : "b");
  }
  auto loco = LeaveOneCardOut(**provider, q, set, decision::Level::kL2);
  REQUIRE(loco.ok());
  CHECK(loco->n_folds == 0);
  CHECK(
      loco->skipped_folds["a"].get<std::string>().starts_with("fit failed: "));
}

TEST_CASE("bench: tasks come from the store at the policy's min_weight") {
  testing::TempDir dir;
  auto store = LabelStore::Open(dir.path());
  REQUIRE(store.ok());
  ParsedLabels parsed = ParseLabelLines(
      Line("column.aspect", Json{{"a", 1}}, 0, "consensus_negative", "c") +
          Line("term.fits", Json{{"a", 1}}, 1, "consensus_negative", "c"),
      Set(), "t");
  REQUIRE(store->Insert(parsed.rows).ok());
  auto tasks = bench::TasksFromStore(*store, Set(), policy::Policy::Defaults());
  // column.aspect needs 0.6: its only row (0.5) leaves it empty.
  REQUIRE(tasks.size() == 1);
  CHECK(tasks[0].name == "labels_term_fits");
  CHECK(tasks[0].meta["min_weight"] == 0.5);
  CHECK(tasks[0].notes ==
        "1 labelled states from the label store; class counts {1: 1}");
}

TEST_CASE("bench: the markdown table of 9.4, levels raw < L0 < L1 < L2") {
  Json payload;
  payload["date"] = "2026-01-02";
  payload["backend"] = "hf";
  payload["environment"]["model"] = "Qwen/Qwen3-8B";
  Json cell = {{"acc", 0.5},    {"ece", 0.25},        {"brier", 0.125},
               {"cov@5%", 0.0}, {"cov@10%", 1.0 / 3}, {"flip", nullptr},
               {"n_neg", 3},    {"prompts", 10},      {"ms_per_decision", 2.0},
               {"loco", true}};
  payload["tasks"]["t"]["n_items"] = 6;
  payload["tasks"]["t"]["cells"]["L2"] = cell;
  payload["tasks"]["t"]["cells"]["raw"] = {{"not_applicable", true}};
  const std::string md = bench::MarkdownTable(payload);
  CHECK(md ==
        "# bench 2026-01-02 \xC2\xB7 hf \xC2\xB7 Qwen/Qwen3-8B\n\n"
        "Every number below names `2026-01-02/<slug>.hf.json`. Fake-backend "
        "rows are synthetic.\n\n"
        "| task | n | level | acc | ece | brier | cov@5% | cov@10% | flip | "
        "n_neg | prompts | ms/dec |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        "| t | 6 | raw | n/a | | | | | | | | |\n"
        "| t | 6 | L2 (LOCO) | 0.500 | 0.250 | 0.125 | 0.000 | 0.333 |  | 3 "
        "| 10 | 2.0 |\n");
  // The rows as JSON (bench table --json), in the same order.
  const Json rows = bench::TableRows(payload);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["level"] == "raw");
  CHECK(rows[0]["status"] == "n/a");
  CHECK(rows[1]["level"] == "L2");
  CHECK(rows[1]["acc"] == 0.5);
  CHECK(rows[1]["loco"] == true);
  CHECK(bench::ModelSlug("RedHatAI/Qwen3-8B-NVFP4") ==
        "RedHatAI__Qwen3-8B-NVFP4");
}

}  // namespace
}  // namespace mesa_anyjev::learn
