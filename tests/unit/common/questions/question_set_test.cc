// The reference's question set: ids, wording, options, twins and the keys the
// reference's published questions.lock.json pins.
#include "common/questions/question_set.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>

namespace mesa_anyjev::questions {
namespace {

using decision::Question;
using decision::QuestionKind;

const QuestionEntry& Get(std::string_view id) {
  auto entry = QuestionSet::Reference().Find(id);
  REQUIRE(entry.ok());
  return **entry;
}

TEST_CASE("the set holds the reference's 17 questions in its order",
          "[questions]") {
  std::vector<std::string> ids;
  for (const QuestionEntry& e : QuestionSet::Reference().entries()) {
    ids.push_back(e.id());
  }
  CHECK(ids == std::vector<std::string>{
                   "column.annotate", "column.aspect", "column.ontology",
                   "column.ontology_fits", "term.fits", "term.fits.chooser",
                   "avu.value_kind", "avu.keep", "dataset.ontology_applies",
                   "datacite.resource_type_fits", "datacite.contributor_type",
                   "datacite.contributor_type_fits", "datacite.relation_type",
                   "datacite.relation_type_fits", "datacite.date_type",
                   "datacite.date_type_fits", "datacite.description_type"});
}

TEST_CASE("the eight published keys match anyjev's key function",
          "[questions]") {
  // The reference's questions.lock.json as published: the eight questions
  // of its earlier releases.
  const std::map<std::string, std::string> published = {
      {"column.annotate", "8b8c7f14be35925d"},
      {"column.aspect", "982e2baa2c1c7762"},
      {"column.ontology", "2de03cc737b509ec"},
      {"column.ontology_fits", "f45eb7fe2fbefdb5"},
      {"term.fits", "0ccc8d141ffd30ff"},
      {"term.fits.chooser", "2675e6ebec9d41e9"},
      {"avu.value_kind", "18a3a5159c3a8492"},
      {"avu.keep", "926b627a33d6acb4"}};
  for (const auto& [id, key] : published) {
    INFO(id);
    CHECK(Get(id).question.key() == key);
  }
}

TEST_CASE("ids equal names, keys are unique", "[questions]") {
  std::set<std::string> keys;
  for (const QuestionEntry& e : QuestionSet::Reference().entries()) {
    INFO(e.id());
    CHECK(e.question.name() == e.id());
    CHECK(e.question.id() == e.id());
    CHECK(keys.insert(e.question.key()).second);
  }
  CHECK(keys.size() == 17);
}

TEST_CASE("kinds, K and twins are those of the table", "[questions]") {
  struct Row {
    const char* id;
    QuestionKind kind;
    int k;
    const char* twin;
    Scope scope;
  };
  const Row rows[] = {
      {"column.annotate", QuestionKind::kNoul, 2, nullptr, Scope::kColumn},
      {"column.aspect", QuestionKind::kChoice, 8, nullptr, Scope::kColumn},
      {"column.ontology", QuestionKind::kChoice, 12, "column.ontology_fits",
       Scope::kColumn},
      {"avu.value_kind", QuestionKind::kChoice, 4, nullptr, Scope::kAvu},
      {"avu.keep", QuestionKind::kNoul, 2, nullptr, Scope::kAvu},
      {"dataset.ontology_applies", QuestionKind::kNoul, 2, nullptr,
       Scope::kDataset},
      {"datacite.contributor_type", QuestionKind::kChoice, 21,
       "datacite.contributor_type_fits", Scope::kDataset},
      {"datacite.relation_type", QuestionKind::kChoice, 23,
       "datacite.relation_type_fits", Scope::kDataset},
      {"datacite.date_type", QuestionKind::kChoice, 10,
       "datacite.date_type_fits", Scope::kDataset},
      {"datacite.description_type", QuestionKind::kChoice, 6, nullptr,
       Scope::kDataset},
  };
  for (const Row& row : rows) {
    INFO(row.id);
    const QuestionEntry& e = Get(row.id);
    CHECK(e.question.kind() == row.kind);
    CHECK(e.question.k() == row.k);
    CHECK(e.scope == row.scope);
    if (row.twin == nullptr) {
      CHECK_FALSE(e.twin.has_value());
    } else {
      CHECK(e.twin == std::optional<std::string>(row.twin));
    }
  }
  for (const QuestionEntry& e : QuestionSet::Reference().entries()) {
    if (e.question.kind() == QuestionKind::kNoul) {
      CHECK(e.question.options() == std::vector<std::string>{"Yes", "No"});
    }
  }
}

TEST_CASE("every choice with K > 8 has a noul twin", "[questions]") {
  int twinned = 0;
  for (const QuestionEntry& e : QuestionSet::Reference().entries()) {
    if (e.question.kind() != QuestionKind::kChoice || e.question.k() <= 8) {
      continue;
    }
    INFO(e.id());
    REQUIRE(e.twin.has_value());
    CHECK(Get(*e.twin).question.kind() == QuestionKind::kNoul);
    ++twinned;
  }
  CHECK(twinned == 4);  // ontology, contributor, relation, date types
}

TEST_CASE("column.ontology's options are the registry's, K = 12",
          "[questions]") {
  const Question& q = Get("column.ontology").question;
  REQUIRE(q.k() == 12);
  for (size_t i = 0; i < kOntologyOptions.size(); ++i) {
    CHECK(q.options()[i] == kOntologyOptions[i]);
  }
  CHECK(q.options().front() ==
        "ENVO: environments, biomes, habitats and environmental materials");
  CHECK(q.options().back() ==
        "GENEPIO: sample collection, identification and metadata fields");
}

TEST_CASE("the vocabularies have their schema sizes", "[questions]") {
  CHECK(kResourceTypeGeneral.size() == 28);
  CHECK(kContributorTypes.size() == 21);
  CHECK(kRelationTypes.size() == 23);
  CHECK(kDateTypes.size() == 10);
  CHECK(kDescriptionTypes.size() == 6);
  CHECK(Get("datacite.date_type").question.options()[2] == "Copyrighted");
  CHECK(Get("column.aspect").question.options()[5] ==
        "data_type: the kind of record, identifier, dataset or information "
        "artifact");
}

TEST_CASE("the key excludes the name but includes the wording", "[questions]") {
  const Question& q = Get("term.fits").question;
  const Question renamed = Question::Noul(q.text(), "another.name");
  CHECK(renamed.key() == q.key());
  const Question reworded = Question::Noul(q.text() + " ", "term.fits");
  CHECK(reworded.key() != q.key());
  const Question& c = Get("avu.value_kind").question;
  std::vector<std::string> options = c.options();
  options[3] = "the most common data value";
  auto changed = Question::Choice(c.text(), options, c.name());
  REQUIRE(changed.ok());
  CHECK(changed->key() != c.key());
}

TEST_CASE("lookups are strict", "[questions]") {
  auto missing = QuestionSet::Reference().Find("column.unknown");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(missing.status().message()).find("column.unknown") !=
        std::string::npos);
}

TEST_CASE("an unknown id names the closest one when it is a typo",
          "[questions]") {
  const QuestionSet& set = QuestionSet::Reference();
  CHECK(set.Closest("term.fit") == "term.fits");
  CHECK(set.Closest("Term.Fits") == "term.fits");
  CHECK(set.Closest("avu.kep") == "avu.keep");
  CHECK(set.Closest("datacite.date_typ") == "datacite.date_type");
  CHECK(set.Closest("x").empty());
  CHECK(set.Closest("something else entirely").empty());
  CHECK(set.Closest(std::string(129, 'a')).empty());
  CHECK(set.Closest("").empty());
  auto missing = set.Find("term.fit");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() ==
        "no question with id 'term.fit' (did you mean 'term.fits'?)");
  // What reaches a message is printable, whatever the caller sent.
  CHECK(set.Find("bad\xff\n").status().message() ==
        "no question with id 'bad\\xff\\x0a'");
}

TEST_CASE("a set refuses duplicate ids, missing twins and untwinned K > 8",
          "[questions]") {
  const auto noul = [](const char* text, const char* id) {
    return QuestionEntry{Question::Noul(text, id), Scope::kColumn,
                         std::nullopt};
  };
  auto duplicate = QuestionSet::Create({noul("a?", "x"), noul("b?", "x")});
  REQUIRE_FALSE(duplicate.ok());
  CHECK(std::string(duplicate.status().message()).find("x is defined twice") !=
        std::string::npos);

  auto same_key = QuestionSet::Create({noul("a?", "x"), noul("a?", "y")});
  REQUIRE_FALSE(same_key.ok());
  CHECK(std::string(same_key.status().message()).find("question y has key") !=
        std::string::npos);

  std::vector<std::string> nine;
  for (int i = 0; i < 9; ++i) nine.push_back("option " + std::to_string(i));
  auto choice = Question::Choice("which?", nine, "big");
  REQUIRE(choice.ok());
  auto untwinned = QuestionSet::Create(
      {QuestionEntry{*choice, Scope::kDataset, std::nullopt}});
  REQUIRE_FALSE(untwinned.ok());
  CHECK(std::string(untwinned.status().message()).find("big has K = 9") !=
        std::string::npos);

  auto unknown_twin = QuestionSet::Create(
      {QuestionEntry{*choice, Scope::kDataset, "big_fits"}});
  REQUIRE_FALSE(unknown_twin.ok());
  CHECK(std::string(unknown_twin.status().message())
            .find("names twin big_fits, which is not defined") !=
        std::string::npos);

  auto twinned =
      QuestionSet::Create({QuestionEntry{*choice, Scope::kDataset, "big_fits"},
                           noul("fits?", "big_fits")});
  CHECK(twinned.ok());
}

}  // namespace
}  // namespace mesa_anyjev::questions
