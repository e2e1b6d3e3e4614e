// The reference's annotate tests (docs/annotate.md) on the fake
// model and the sample cards, plus the level and capability paths.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "client/annotate/pipeline.h"
#include "client/backends/provider.h"
#include "tests/unit/client/annotate/test_providers.h"

namespace mesa_anyjev::annotate {
namespace {

const std::vector<std::string> kCards = {"DP1.10003.001.brd_countdata",
                                         "DP1.10022.001.bet_sorting",
                                         "DP1.10072.001.mam_pertrapnight"};

cards::DatasetCard Card(const std::string& name) {
  auto card =
      cards::ReadCard(std::string(MESA_ANYJEV_DATA) + "/cards/" + name + ".md");
  REQUIRE(card.ok());
  return *card;
}

cards::CandidateSource Candidates(const std::string& name) {
  auto source = cards::CandidateSource::Load(std::string(MESA_ANYJEV_DATA) +
                                             "/candidates/" + name + ".json");
  REQUIRE(source.ok());
  return *source;
}

std::unique_ptr<client::Provider> Fake() {
  auto provider = client::MakeProvider(config::Config{}, "fake");
  REQUIRE(provider.ok());
  return *std::move(provider);
}

using Triple = std::tuple<std::string, std::string, std::string>;
std::vector<Triple> Triples(const RunResult& run) {
  std::vector<Triple> out;
  for (const Proposal& p : run.proposals) {
    out.emplace_back(p.avu->attribute, p.avu->value, p.avu->unit);
  }
  return out;
}

int Count(const RunResult& run, const std::string& question_id) {
  int n = 0;
  for (const auto& d : run.decisions) n += d.record.question_id == question_id;
  return n;
}

TEST_CASE("annotate on the fake model: the reference's checks per card",
          "[annotate]") {
  for (const std::string& name : kCards) {
    INFO(name);
    const auto card = Card(name);
    const auto candidates = Candidates(name);
    auto provider = Fake();
    AnnotateOptions options;
    options.candidates = &candidates;
    auto run = Annotate(card, *provider, options);
    REQUIRE(run.ok());
    CHECK(run->status == "decided");
    CHECK(run->card_name == name);
    CHECK(run->n_decisions == static_cast<int>(run->decisions.size()));
    CHECK(run->n_prompts > 0);
    CHECK(run->skipped.empty());
    // Honest records, and nothing auto under the shipped policy.
    for (size_t i = 0; i < run->decisions.size(); ++i) {
      const RecordedDecision& d = run->decisions[i];
      CHECK(d.seq == static_cast<int>(i) + 1);
      CHECK(d.record.Validate().ok());
      CHECK(d.outcome != policy::Outcome::kAuto);
      if (d.outcome != policy::Outcome::kRule) {
        CHECK(d.record.level == decision::Level::kL0);  // auto, no bundle
        CHECK(d.threshold_propose.has_value());
      }
    }
    // Groups exist: every card has searches, sites and taxa.
    CHECK(!run->groups.empty());
    // The proposed links are the proposals.
    std::set<int> proposed_links, proposal_links;
    for (const Link& l : run->links) {
      if (l.write_status == "proposed") proposed_links.insert(l.link_id);
    }
    for (const Proposal& p : run->proposals) proposal_links.insert(p.link_id);
    CHECK(proposed_links == proposal_links);
    CHECK(run->links.size() == run->proposals.size() + run->rejected.size());
    // Canonical AVUs.
    for (const Proposal& p : run->proposals) {
      REQUIRE(p.avu.has_value());
      CHECK(p.avu->unit == p.candidate.curie);
      CHECK(p.avu->attribute.rfind(p.ontology_id + ".", 0) == 0);
      CHECK(p.outcome == policy::Outcome::kProposed);
    }
    // The eval result's shape.
    const auto eval = EvalResult(*run);
    for (const char* key : {"model", "family", "card", "run_id", "parse_ok",
                            "avus", "n_decisions", "n_prompts",
                            "missing_labels", "seconds", "outcomes"}) {
      CHECK(eval.contains(key));
    }
    CHECK(eval["model"] == "static");
    CHECK(eval["avus"].size() == run->proposals.size());
  }
}

TEST_CASE("annotate: two runs on one provider give identical AVU triples",
          "[annotate]") {
  const auto card = Card(kCards[0]);
  const auto candidates = Candidates(kCards[0]);
  auto provider = Fake();
  AnnotateOptions options;
  options.candidates = &candidates;
  auto first = Annotate(card, *provider, options);
  auto second = Annotate(card, *provider, options);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(Triples(*first) == Triples(*second));
  REQUIRE(first->decisions.size() == second->decisions.size());
  for (size_t i = 0; i < first->decisions.size(); ++i) {
    CHECK(first->decisions[i].record.probs ==
          second->decisions[i].record.probs);
  }
  CHECK(first->run_id != second->run_id);
}

TEST_CASE("annotate: identifiers get rule decisions, answer No, level none",
          "[annotate]") {
  const auto card = Card(kCards[0]);
  auto provider = Fake();
  const AnnotateOptions defaults;
  auto run = Annotate(card, *provider, defaults);
  REQUIRE(run.ok());
  std::set<std::string> ruled;
  for (const auto& d : run->decisions) {
    if (d.record.provider != "rule") continue;
    CHECK(d.record.question_id == "column.annotate");
    CHECK(d.record.answer == "No");
    CHECK(d.record.answer_index == 1);
    CHECK(d.record.model == "n/a");
    CHECK(d.record.level == policy::kNoLevel);
    CHECK(!d.record.probs.has_value());
    CHECK(d.outcome == policy::Outcome::kRule);
    ruled.insert(*d.place.column_name);
  }
  CHECK(ruled == std::set<std::string>{"uid", "siteID", "startDate",
                                       "identificationHistoryID"});
  // The other columns are asked, in one batch, by the model.
  int live = 0;
  for (const auto& d : run->decisions) {
    if (d.record.question_id == "column.annotate" &&
        d.record.provider == "anyjev") {
      ++live;
      CHECK(d.record.model == "fake");
    }
  }
  CHECK(live == 3);
}

TEST_CASE("annotate: Q3 asks the choice at max_choice_k >= 12, else the twin",
          "[annotate]") {
  // A script where every column continues with a measurement aspect.
  auto script = [](const decision::Question& q, const nlohmann::json&) {
    if (q.name() == "column.aspect") return testing::ChoiceAt(8, 3, 0.9);
    if (q.kind() == decision::QuestionKind::kChoice) {
      return testing::ChoiceAt(static_cast<size_t>(q.k()), 0, 0.5);
    }
    return testing::Noul(0.7);
  };
  const auto card = Card(kCards[0]);
  SECTION("choice") {
    testing::ScriptedProvider provider(script);
    const AnnotateOptions defaults;
    auto run = Annotate(card, provider, defaults);
    REQUIRE(run.ok());
    CHECK(Count(*run, "column.ontology") == 3);
    CHECK(Count(*run, "column.ontology_fits") == 0);
    for (const auto& d : run->decisions) {
      if (d.record.question_id != "column.ontology") continue;
      // Masked to measurement's ontologies: the mass left out is recorded.
      CHECK(d.record.diagnostics.contains("masked_mass"));
    }
  }
  SECTION("twin, on a gateway-like cap over the fake model") {
    testing::CappedProvider capped(Fake(), /*cap=*/8);
    const AnnotateOptions defaults;
    auto run = Annotate(card, capped, defaults);
    REQUIRE(run.ok());
    CHECK(Count(*run, "column.ontology") == 0);
    CHECK(Count(*run, "column.ontology_fits") > 0);
    for (const auto& d : run->decisions) {
      if (d.record.question_id == "column.ontology_fits") {
        CHECK(d.record.model == "fake");
        CHECK(d.place.column_name.has_value());
      }
    }
  }
}

TEST_CASE("annotate: an explicit level that cannot be served is an error",
          "[annotate]") {
  const auto card = Card(kCards[0]);
  auto provider = Fake();
  AnnotateOptions options;
  options.level = decision::Level::kL2;
  auto run = Annotate(card, *provider, options);
  REQUIRE(!run.ok());
  CHECK(run.status().code() == absl::StatusCode::kFailedPrecondition);
  // Q0 asks first; the message names the question and what is missing.
  CHECK_THAT(
      std::string(run.status().message()),
      Catch::Contains("dataset.ontology_applies") && Catch::Contains("head"));
  options.level = decision::Level::kL1;
  run = Annotate(card, *provider, options);
  REQUIRE(!run.ok());
  CHECK_THAT(std::string(run.status().message()),
             Catch::Contains("L1 artifact"));
}

TEST_CASE("annotate: without candidates the term stages are skipped",
          "[annotate]") {
  const auto card = Card(kCards[1]);
  auto provider = Fake();
  const AnnotateOptions defaults;
  auto run = Annotate(card, *provider, defaults);
  REQUIRE(run.ok());
  CHECK(run->skipped ==
        std::vector<std::string>{"term.fits", "avu.value_kind", "avu.keep"});
  CHECK(run->groups.empty());
  CHECK(run->proposals.empty());
  CHECK(Count(*run, "term.fits") == 0);
  CHECK(Count(*run, "avu.keep") == 0);
  CHECK(Count(*run, "column.annotate") > 0);
  CHECK(EvalResult(*run)["skipped"].size() == 3);
  CHECK_THAT(std::string(kNoCandidatesNotice),
             Catch::Contains("no --candidates file"));
}

}  // namespace
}  // namespace mesa_anyjev::annotate
