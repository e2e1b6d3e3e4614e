// questions.lock.json: lock_sha against the published values, the file text,
// hosted SQL and drift lines.
#include "common/questions/question_lock.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/decision/py_json.h"
#include "common/util/files.h"
#include "common/util/hash.h"
#include "tests/unit/temp_dir.h"

namespace mesa_anyjev::questions {
namespace {

using decision::PyJsonCanonical;
using decision::PyJsonDumps;
using decision::Question;
using Json = nlohmann::ordered_json;

// The first `n` reference questions, as the lock stood before M5 added the
// dataset and DataCite questions.
QuestionSet FirstQuestions(size_t n) {
  const auto& all = QuestionSet::Reference().entries();
  auto set = QuestionSet::Create({all.begin(), all.begin() + n});
  REQUIRE(set.ok());
  return *std::move(set);
}

std::vector<QuestionEntry> ReferenceEntries() {
  return QuestionSet::Reference().entries();
}

QuestionSet Make(std::vector<QuestionEntry> entries) {
  auto set = QuestionSet::Create(std::move(entries));
  REQUIRE(set.ok());
  return *std::move(set);
}

TEST_CASE("the pre-M5 lock_sha is the published 0190586d...", "[questions]") {
  // The entry shape that reproduces it: {kind, text, options, key, twin},
  // twin null or the twin's id, options as a list. An empty-string twin
  // (93369b54...) or no twin field (657e4bdc...) do not.
  CHECK(LockSha(FirstQuestions(8)) ==
        "0190586d51b5d961dab9bf972e4683ebbf2356d6adf1911a5b2d63cee3ab01e2");
}

TEST_CASE("the M5 lock_sha begins 9f9370e0 as RESEARCH.md records",
          "[questions]") {
  // Pins the wording and options of the nine M5 questions (their keys are
  // not published).
  const std::string sha = LockSha(QuestionSet::Reference());
  CHECK(sha.substr(0, 8) == "9f9370e0");
  CHECK(sha == util::Sha256Hex(PyJsonCanonical(
                   LockDocument(QuestionSet::Reference())["questions"])));
}

TEST_CASE("lock_sha does not depend on question order", "[questions]") {
  std::vector<QuestionEntry> reversed = ReferenceEntries();
  std::reverse(reversed.begin(), reversed.end());
  CHECK(LockSha(Make(reversed)) == LockSha(QuestionSet::Reference()));
}

TEST_CASE("the shipped lock is what the code generates", "[questions]") {
  const std::string path =
      std::string(MESA_ANYJEV_TEST_DATA) + "/../../questions.lock.json";
  auto shipped = util::ReadFile(path);
  REQUIRE(shipped.ok());
  CHECK(*shipped == LockFileText(QuestionSet::Reference()));
  auto drift = LockDrift(QuestionSet::Reference(), path);
  REQUIRE(drift.ok());
  CHECK(drift->empty());
}

TEST_CASE("the lock file is json.dumps(indent=1) with a trailing newline",
          "[questions]") {
  const std::string text = LockFileText(FirstQuestions(4));
  CHECK(text.rfind("{\n \"questions\": {\n  \"column.annotate\": {\n"
                   "   \"kind\": \"noul\",\n",
                   0) == 0);
  CHECK(text.find("   \"options\": [\n    \"Yes\",\n    \"No\"\n   ],\n"
                  "   \"key\": \"8b8c7f14be35925d\",\n   \"twin\": null\n"
                  "  },\n") != std::string::npos);
  CHECK(text.find("   \"twin\": \"column.ontology_fits\"\n") !=
        std::string::npos);
  CHECK(text.substr(text.size() - 4) == "\"\n}\n");
  const Json parsed = Json::parse(text);
  CHECK(parsed["lock_sha"] == LockSha(FirstQuestions(4)));
  CHECK(parsed["hosted_sql"].size() == 4);
}

TEST_CASE("PyJsonDumps lays out nesting as Python's json module",
          "[questions]") {
  const Json doc = Json::parse(
      R"({"a":{"x":[],"y":{},"z":["é",null,true,1,2.5]},"b":[{"k":"v"}]})");
  // python3: print(json.dumps(doc, indent=1, ensure_ascii=False))
  CHECK(PyJsonDumps(doc, {.indent = 1}) ==
        "{\n \"a\": {\n  \"x\": [],\n  \"y\": {},\n  \"z\": [\n   \"é\",\n"
        "   null,\n   true,\n   1,\n   2.5\n  ]\n },\n \"b\": [\n  {\n"
        "   \"k\": \"v\"\n  }\n ]\n}");
  CHECK(PyJsonDumps(doc, {}) ==
        R"({"a": {"x": [], "y": {}, "z": ["é", null, true, 1, 2.5]}, )"
        R"("b": [{"k": "v"}]})");
  CHECK(PyJsonCanonical(Json::parse(R"({"b":1,"a":{"d":[1.0,"\n"],"c":2}})")) ==
        R"({"a":{"c":2,"d":[1.0,"\n"]},"b":1})");
}

TEST_CASE("hosted SQL doubles single quotes", "[questions]") {
  const auto& set = QuestionSet::Reference();
  CHECK(HostedSql((*set.Find("avu.keep"))->question) ==
        "prompt_jev(state_text, 'Given the annotations already selected for "
        "this dataset, does this annotation add correct, non-redundant "
        "information worth keeping?', noul := TRUE)");
  CHECK(HostedSql((*set.Find("avu.value_kind"))->question) ==
        "prompt_jev(state_text, 'What should the AVU value be?', choice := "
        "['the term label', 'the site code', 'the column name', 'the most "
        "frequent data value'])");
  CHECK(HostedSql((*set.Find("datacite.contributor_type"))->question)
            .find("'Which DataCite ContributorType best describes this "
                  "contributor''s role?', choice := ['ContactPerson', ") !=
        std::string::npos);
  auto score = Question::ScoreLevels("How 'sure'?", {"low", "it's high"});
  REQUIRE(score.ok());
  CHECK(HostedSql(*score) ==
        "prompt_jev(state_text, 'How ''sure''?', score := ['low', "
        "'it''s high'])");
}

TEST_CASE("no drift against the lock the code writes", "[questions]") {
  CHECK(DriftAgainst(QuestionSet::Reference(),
                     LockFileText(QuestionSet::Reference()))
            ->empty());
}

TEST_CASE("drift names new, removed, rekeyed and retwinned questions, sorted",
          "[questions]") {
  const std::string lock = LockFileText(QuestionSet::Reference());
  std::vector<QuestionEntry> entries = ReferenceEntries();
  // Reword avu.keep, drop term.fits.chooser, add a question, and twin
  // datacite.date_type with another noul.
  const std::string old_key = entries[7].question.key();
  entries[7].question =
      Question::Noul(entries[7].question.text() + " Really?", "avu.keep");
  const std::string new_key = entries[7].question.key();
  entries.erase(entries.begin() + 5);
  entries.push_back(QuestionEntry{Question::Noul("Is it new?", "aaa.new"),
                                  Scope::kDataset, std::nullopt});
  for (QuestionEntry& e : entries) {
    if (e.id() == "datacite.date_type") e.twin = "datacite.relation_type_fits";
  }
  auto drift = DriftAgainst(Make(entries), lock);
  REQUIRE(drift.ok());
  CHECK(*drift ==
        std::vector<std::string>{
            "aaa.new: new question, not in the lock",
            "avu.keep: key " + old_key + " -> " + new_key +
                " (wording or options changed; labels and artifacts need "
                "migration, DESIGN D7)",
            "datacite.date_type: twin changed",
            "term.fits.chooser: in the lock but no longer defined"});
}

TEST_CASE("a missing lock is one drift line; a broken one an error",
          "[questions]") {
  testing::TempDir dir;
  auto missing = LockDrift(QuestionSet::Reference(), dir.Path("none.json"));
  REQUIRE(missing.ok());
  CHECK(*missing ==
        std::vector<std::string>{"questions.lock.json is missing; run "
                                 "`mesa-anyjev questions --update-lock`"});

  auto broken =
      LockDrift(QuestionSet::Reference(), dir.Write("broken.json", "{"));
  REQUIRE_FALSE(broken.ok());
  CHECK(std::string(broken.status().message()).find("not valid JSON") !=
        std::string::npos);

  auto no_key = DriftAgainst(
      QuestionSet::Reference(),
      R"({"questions": {"term.fits": {"kind": "noul", "twin": null}}})");
  REQUIRE_FALSE(no_key.ok());
  CHECK(std::string(no_key.status().message()).find("questions.term.fits") !=
        std::string::npos);
}

}  // namespace
}  // namespace mesa_anyjev::questions
