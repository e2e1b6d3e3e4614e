// The annotate graph's rules on a scripted provider, where each test sets
// which terms fit: specificity, the group-margin demotion, dedup, the
// max_avus cap, value-kind records (on the proposal's own column), missing
// labels and the
// planner audit.
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "client/annotate/pipeline.h"
#include "client/annotate/rank_group.h"
#include "tests/unit/client/annotate/test_providers.h"

namespace mesa_anyjev::annotate {
namespace {

using policy::Outcome;
using testing::ChoiceAt;
using testing::Noul;

constexpr size_t kMeasurement = 3, kUnit = 4, kPato = 2;

cards::DatasetCard SampleCard() {
  auto card = cards::ReadCard(std::string(MESA_ANYJEV_DATA) +
                              "/cards/DP1.10003.001.brd_countdata.md");
  REQUIRE(card.ok());
  return *card;
}

cards::CandidateSource SampleCandidates() {
  auto source = cards::CandidateSource::Load(
      std::string(MESA_ANYJEV_DATA) +
      "/candidates/DP1.10003.001.brd_countdata.json");
  REQUIRE(source.ok());
  return *source;
}

// A synthetic card: no sites, no taxa, the given column lines.
cards::DatasetCard PlotCard(const std::vector<std::string>& columns) {
  std::string text =
      "# Dataset: DP1.00000.001 / plot_dims\n"
      "Product: DP1.00000.001 — Plot dimensions. Synthetic measurements.\n"
      "Rows: 10; months covered: 2020-01 to 2020-02 (2 distinct months).\n"
      "## Columns (name | NEON description | type | unit | profile)\n";
  for (const std::string& c : columns) text += "- " + c + "\n";
  auto card = cards::ParseCard(text);
  REQUIRE(card.ok());
  return *card;
}

cards::CandidateSource Source(const std::string& json) {
  auto source = cards::CandidateSource::FromJson(json);
  REQUIRE(source.ok());
  return *source;
}

std::string CurieOf(const nlohmann::json& state) {
  return state["candidate"]["curie"].get<std::string>();
}

const RecordedDecision* FindDecision(const RunResult& run,
                                     const std::string& question,
                                     const std::string& curie) {
  for (const auto& d : run.decisions) {
    if (d.record.question_id == question && d.place.candidate.has_value() &&
        d.place.candidate->curie == curie) {
      return &d;
    }
  }
  return nullptr;
}

// observerDistance continues as a measurement in PATO, where "distance"
// (p 0.60) wins the column group; its children group (n_candidates 2) gives
// radius `p_child`. Sites and taxa do not fit.
testing::Script DistanceScript(double p_child) {
  return [p_child](const decision::Question& q, const nlohmann::json& s) {
    const std::string id = q.name();
    if (id == "column.annotate") {
      return Noul(s["column"]["name"] == "observerDistance" ? 0.9 : 0.1);
    }
    if (id == "column.aspect") return ChoiceAt(8, kMeasurement, 0.9);
    if (id == "column.ontology") return ChoiceAt(12, kPato, 0.9);
    if (id == "avu.value_kind") return ChoiceAt(4, 0, 0.9);
    if (id == "term.fits") {
      const std::string curie = CurieOf(s);
      if (s["n_candidates"] == 2) {
        return Noul(curie == "PATO:0001648" ? p_child : 0.3);
      }
      if (curie == "PATO:0000040") return Noul(0.6);
      return Noul(curie.rfind("PATO:", 0) == 0 ? 0.2 : 0.1);
    }
    return Noul(0.9);
  };
}

TEST_CASE(
    "annotate: specificity: a child replaces its parent by specificity_delta",
    "[annotate]") {
  const auto card = SampleCard();
  const auto candidates = SampleCandidates();
  AnnotateOptions options;
  options.candidates = &candidates;
  options.policy.audit_planner = false;

  SECTION("p_child >= p_parent + delta: replaced") {
    testing::ScriptedProvider provider(DistanceScript(0.75));
    auto run = Annotate(card, provider, options);
    REQUIRE(run.ok());
    REQUIRE(run->proposals.size() == 1);
    const Proposal& p = run->proposals.front();
    CHECK(p.candidate.curie == "PATO:0001648");
    CHECK(p.rationale ==
          "p(fits)=0.75 L0; more specific than PATO:0000040 (p=0.60)");
    CHECK(p.avu->attribute == "pato.radius");
    // The child group was opened from the parent's, asked under its winner.
    const Group& child = run->groups.at(p.group_id - 1);
    CHECK(child.escalated_from.has_value());
    CHECK(child.search_json ==
          nlohmann::ordered_json(
              {{"specificity_of", "PATO:0000040"}, {"children", 2}}));
    CHECK(child.outcome == Outcome::kProposed);
    CHECK(child.group_margin.value() == Approx(0.15));
    const auto* parent = FindDecision(*run, "term.fits", "PATO:0000040");
    REQUIRE(parent != nullptr);
    const auto* kid = FindDecision(*run, "term.fits", "PATO:0001648");
    // radius is also a column candidate; find its child-group decision.
    for (const auto& d : run->decisions) {
      if (d.place.group_id == p.group_id && d.place.candidate.has_value() &&
          d.place.candidate->curie == "PATO:0001648") {
        kid = &d;
      }
    }
    REQUIRE(kid != nullptr);
    CHECK(kid->place.parent_decision_id == parent->seq);
    CHECK(p.decision_id == kid->seq);
  }
  SECTION("below the delta: the parent stands and the group is rejected") {
    testing::ScriptedProvider provider(DistanceScript(0.65));
    auto run = Annotate(card, provider, options);
    REQUIRE(run.ok());
    REQUIRE(run->proposals.size() == 1);
    CHECK(run->proposals.front().candidate.curie == "PATO:0000040");
    CHECK(run->proposals.front().rationale == "p(fits)=0.60 L0");
    bool found = false;
    for (const Group& g : run->groups) {
      if (!g.escalated_from.has_value()) continue;
      found = true;
      CHECK(g.outcome == Outcome::kRejected);
      CHECK(g.group_margin.value() == Approx(0.05));
    }
    CHECK(found);
  }
  SECTION("policy.specificity off: no children asked") {
    options.policy.specificity = false;
    testing::ScriptedProvider provider(DistanceScript(0.95));
    auto run = Annotate(card, provider, options);
    REQUIRE(run.ok());
    CHECK(run->proposals.front().candidate.curie == "PATO:0000040");
    for (const Group& g : run->groups) CHECK(!g.escalated_from.has_value());
  }
}

// Columns whose aspect is "unit": uo by rule, the term from the unit table.
testing::Script UnitScript(std::map<std::string, double> keep) {
  return [keep](const decision::Question& q, const nlohmann::json& s) {
    const std::string id = q.name();
    if (id == "column.aspect") return ChoiceAt(8, kUnit, 0.9);
    if (id == "avu.keep") {
      const auto it = keep.find(s["avu"]["attribute"].get<std::string>());
      return Noul(it == keep.end() ? 0.9 : it->second);
    }
    return Noul(0.8);
  };
}

TEST_CASE(
    "annotate: dedup: a repeated AVU triple is rejected, pointing at the first",
    "[annotate]") {
  const auto card =
      PlotCard({"plotLength | Length of the plot | real | meter "
                "| 10 non-blank",
                "plotWidth | Width of the plot | real | meter "
                "| 10 non-blank"});
  const auto candidates = Source("{}");
  testing::ScriptedProvider provider(UnitScript({}));
  AnnotateOptions options;
  options.candidates = &candidates;
  auto run = Annotate(card, provider, options);
  REQUIRE(run.ok());
  REQUIRE(run->proposals.size() == 1);
  REQUIRE(run->rejected.size() == 1);
  const Proposal& first = run->proposals.front();
  const Proposal& dup = run->rejected.front();
  CHECK(first.avu->attribute == "uo.meter");
  CHECK(first.avu->value == "meter");
  CHECK(first.avu->unit == "UO:0000008");
  CHECK(first.column_name == "plotLength");
  CHECK(dup.column_name == "plotWidth");
  CHECK(dup.outcome == Outcome::kRejected);
  CHECK(dup.duplicate_of == first.link_id);
  CHECK(dup.rationale == "duplicate of " + std::to_string(first.link_id));
  // The unit table answered; its log says so.
  CHECK(run->groups.front().search_json ==
        nlohmann::ordered_json({{"ontology_id", "uo"}, {"table", true}}));
  // avu.keep saw only the unique AVU; the duplicate keeps its link.
  int keeps = 0;
  for (const auto& d : run->decisions) {
    keeps += d.record.question_id == "avu.keep";
  }
  CHECK(keeps == 1);
  REQUIRE(run->links.size() == 2);
  CHECK(run->links[1].write_status == "rejected");
  CHECK(run->links[1].duplicate_of == first.link_id);
}

TEST_CASE(
    "annotate: max_avus: the kept AVUs avu.keep is surest of, the rest "
    "rejected",
    "[annotate]") {
  const auto card =
      PlotCard({"plotLength | Length | real | meter | 10 non-blank",
                "coverPercent | Cover | real | percent | 10 non-blank",
                "duration | Duration | real | second | 10 non-blank"});
  const auto candidates = Source("{}");
  testing::ScriptedProvider provider(UnitScript(
      {{"uo.meter", 0.6}, {"uo.percent", 0.9}, {"uo.second", 0.75}}));
  AnnotateOptions options;
  options.candidates = &candidates;
  options.policy.max_avus = 2;
  auto run = Annotate(card, provider, options);
  REQUIRE(run.ok());
  REQUIRE(run->proposals.size() == 2);
  CHECK(run->proposals[0].avu->attribute == "uo.percent");
  CHECK(run->proposals[1].avu->attribute == "uo.second");
  CHECK(*run->proposals[0].keep_p == Approx(0.9));
  REQUIRE(run->rejected.size() == 1);
  CHECK(run->rejected[0].avu->attribute == "uo.meter");
  CHECK(run->rejected[0].rationale == "over max_avus");
  CHECK(run->rejected[0].outcome == Outcome::kRejected);
}

TEST_CASE("annotate: avu.keep below threshold rejects the AVU", "[annotate]") {
  const auto card =
      PlotCard({"plotLength | Length | real | meter | 10 non-blank"});
  const auto candidates = Source("{}");
  testing::ScriptedProvider provider(UnitScript({{"uo.meter", 0.3}}));
  AnnotateOptions options;
  options.candidates = &candidates;
  auto run = Annotate(card, provider, options);
  REQUIRE(run.ok());
  CHECK(run->proposals.empty());
  REQUIRE(run->rejected.size() == 1);
  CHECK(run->links.front().write_status == "rejected");
}

// Two measurement columns in PATO, each with its own search results.
const char* kPlotPato = R"({"searches": [
  {"ontology_id": "pato", "query": "plot length", "hits": [
    {"label": "length", "curie": "PATO:0000122",
     "iri": "http://purl.obolibrary.org/obo/PATO_0000122"},
    {"label": "size", "curie": "PATO:0000117",
     "iri": "http://purl.obolibrary.org/obo/PATO_0000117"}]},
  {"ontology_id": "pato", "query": "plot width", "hits": [
    {"label": "width", "curie": "PATO:0000921",
     "iri": "http://purl.obolibrary.org/obo/PATO_0000921"}]}]})";

testing::Script PatoScript() {
  return [](const decision::Question& q, const nlohmann::json& s) {
    const std::string id = q.name();
    if (id == "column.aspect") return ChoiceAt(8, kMeasurement, 0.9);
    if (id == "column.ontology") return ChoiceAt(12, kPato, 0.9);
    if (id == "avu.value_kind") return ChoiceAt(4, 2, 0.9);  // column name
    if (id == "term.fits") {
      const std::string curie = CurieOf(s);
      return Noul(curie == "PATO:0000117" ? 0.75 : 0.8);
    }
    return Noul(0.9);
  };
}

TEST_CASE("annotate: avu.value_kind is recorded with the proposal's own column",
          "[annotate]") {
  const auto card = PlotCard({"plotLength | Length | real | - | 10 non-blank",
                              "plotWidth | Width | real | - | 10 non-blank"});
  const auto candidates = Source(kPlotPato);
  testing::ScriptedProvider provider(PatoScript());
  AnnotateOptions options;
  options.candidates = &candidates;
  auto run = Annotate(card, provider, options);
  REQUIRE(run.ok());
  std::set<std::string> columns;
  for (const auto& d : run->decisions) {
    if (d.record.question_id != "avu.value_kind") continue;
    REQUIRE(d.place.column_name.has_value());
    CHECK(d.place.scope == "avu");
    CHECK(d.record.state["column"]["name"] == *d.place.column_name);
    columns.insert(*d.place.column_name);
  }
  CHECK(columns == std::set<std::string>{"plotLength", "plotWidth"});
  // The value is the column name, as the value kind said.
  REQUIRE(run->proposals.size() == 2);
  for (const Proposal& p : run->proposals) {
    CHECK(p.value_kind == "the column name");
    CHECK(p.avu->value == *p.column_name);
  }
}

TEST_CASE(
    "annotate: rank group: auto without group margin is demoted to proposed",
    "[annotate]") {
  // A policy where term.fits may reach auto at L0 (the shipped one cannot).
  auto thresholds = policy::Policy::Defaults().all_thresholds();
  thresholds["term.fits"].auto_threshold = 0.7;
  thresholds["term.fits"].min_level = decision::Level::kL0;
  policy::Profile dev;
  dev.name = "dev";
  dev.min_level_write = decision::Level::kL0;
  const policy::Policy rules(thresholds, {{"dev", dev}});
  const auto card = PlotCard({"plotLength | Length | real | - | 10 non-blank",
                              "plotWidth | Width | real | - | 10 non-blank"});
  const auto candidates = Source(kPlotPato);
  testing::ScriptedProvider provider(PatoScript());
  AnnotateOptions options;
  options.candidates = &candidates;
  options.rules = &rules;
  options.policy.profile = "dev";
  auto run = Annotate(card, provider, options);
  REQUIRE(run.ok());
  std::map<std::string, Outcome> by_column;
  for (const Proposal& p : run->proposals)
    by_column[*p.column_name] = p.outcome;
  // length 0.80 vs size 0.75: margin 0.05 < 0.15. width alone: margin 0.80.
  CHECK(by_column["plotLength"] == Outcome::kProposed);
  CHECK(by_column["plotWidth"] == Outcome::kAuto);
  CHECK(FindDecision(*run, "term.fits", "PATO:0000122")->outcome ==
        Outcome::kAuto);
}

TEST_CASE("annotate: missing labels cap a batch's outcomes at abstain",
          "[annotate]") {
  const auto card = SampleCard();
  const auto candidates = SampleCandidates();
  testing::ScriptedProvider provider(DistanceScript(0.75));
  provider.MissLabelsOn("term.fits");
  AnnotateOptions options;
  options.candidates = &candidates;
  auto run = Annotate(card, provider, options);
  REQUIRE(run.ok());
  CHECK(run->proposals.empty());
  int fits_batches = 0;
  for (const Group& g : run->groups) {
    if (g.n_candidates > 0) {
      ++fits_batches;
      CHECK(g.missing_labels == 1);
      CHECK(g.outcome == Outcome::kAbstain);
    }
  }
  CHECK(fits_batches > 0);
  CHECK(run->missing_labels == fits_batches);
  for (const auto& d : run->decisions) {
    if (d.record.question_id == "term.fits") {
      CHECK(d.outcome == Outcome::kAbstain);
      CHECK(d.missing_labels == 1);
    }
  }
}

TEST_CASE(
    "annotate: Q0 audit compares the planner's ontologies with the model's",
    "[annotate]") {
  const auto card = SampleCard();
  testing::ScriptedProvider provider([](const decision::Question& q,
                                        const nlohmann::json& s) {
    if (q.name() == "dataset.ontology_applies") {
      const std::string text = s["ontology"].get<std::string>();
      return Noul(text.rfind("NCBITaxon", 0) == 0 || text.rfind("ENVO", 0) == 0
                      ? 0.9
                      : 0.2);
    }
    return Noul(0.1);
  });
  const AnnotateOptions defaults;
  auto run = Annotate(card, provider, defaults);
  REQUIRE(run.ok());
  REQUIRE(run->audit.has_value());
  CHECK(run->audit->model == std::vector<std::string>{"envo", "ncbitaxon"});
  CHECK(run->audit->agree == std::vector<std::string>{"envo", "ncbitaxon"});
  CHECK(run->audit->planner.size() == 12);
  CHECK(run->audit->planner_only.size() == 10);
  CHECK(run->audit->model_only.empty());
  CHECK(AuditLine(*run).value().rfind(
            "planner audit: agree=['envo', 'ncbitaxon'] planner_only=['bco', ",
            0) == 0);
  int dataset_scope = 0;
  for (const auto& d : run->decisions) {
    dataset_scope += d.place.scope == "dataset";
  }
  CHECK(dataset_scope == 12);
}

TEST_CASE("annotate: FitsRationale formats as the reference", "[annotate]") {
  CHECK(FitsRationale(0.625, "L0") == "p(fits)=0.62 L0");
  CHECK(FitsRationale(0.5, "L2") == "p(fits)=0.50 L2");
}

}  // namespace
}  // namespace mesa_anyjev::annotate
