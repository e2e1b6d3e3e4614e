// Questions: keys exactly as anyjev 0.2.0 computes them (values from the
// package), score bin names and centers, and the refusals.
#include "common/decision/question.h"

#include <catch2/catch.hpp>

#include "common/decision/py_format.h"
#include "common/decision/py_json.h"

namespace mesa_anyjev::decision {
namespace {

TEST_CASE("question keys match anyjev 0.2.0", "[decision]") {
  CHECK(Question::Choice("What is it about?", {"genes", "proteins", "cells"})
            ->key() == "30b990f62232e997");
  CHECK(Question::Noul("Is the sky blue?").key() == "9fe3bbb99f118853");
  CHECK(Question::ScoreBins("How big?", 4)->key() == "357af83bfb42e78f");
  CHECK(Question::ScoreBins("How big?", 3, -1.5, 2.25)->key() ==
        "c7c9deb5bafb51ee");
  CHECK(Question::ScoreLevels("Quality?", {"bad", "ok", "good"})->key() ==
        "d257b59b430dcec1");
  // Escapes and non-ASCII as json.dumps(ensure_ascii=False) writes them.
  CHECK(Question::Choice("Quote \" back\\slash\nnew\ttab \x01 \xC3\xA9 "
                         "\xE4\xBD\xA0\xE5\xA5\xBD",
                         {"a", "B", "\xC3\xA7"})
            ->key() == "bd905fc0626a3d83");
}

TEST_CASE("the name is not part of the key", "[decision]") {
  const auto a = Question::Choice("Q", {"x", "y"}, "first");
  const auto b = Question::Choice("Q", {"x", "y"}, "second");
  CHECK(a->key() == b->key());
  CHECK(a->id() == "first");
  CHECK(Question::Choice("Q", {"x", "y"})->id() ==
        "q_" + a->key().substr(0, 8));
  // Order is part of the layout.
  CHECK(Question::Choice("Q", {"y", "x"})->key() != a->key());
}

TEST_CASE("score bins are named with %g and centred", "[decision]") {
  const auto q = Question::ScoreBins("How big?", 4);
  CHECK(q->options() == std::vector<std::string>{"0 to 0.25", "0.25 to 0.5",
                                                 "0.5 to 0.75", "0.75 to 1"});
  CHECK(q->BinCenters() == std::vector<double>{0.125, 0.375, 0.625, 0.875});
  CHECK(q->ordered());
  CHECK(Question::ScoreBins("x", 3, 0, 1e7)->options() ==
        std::vector<std::string>{"0 to 3.33333e+06",
                                 "3.33333e+06 to 6.66667e+06",
                                 "6.66667e+06 to 1e+07"});
  const auto levels = Question::ScoreLevels("Quality?", {"bad", "ok", "good"});
  CHECK(levels->BinCenters() == std::vector<double>{0, 1, 2});
  CHECK(levels->scale_hi() == 2.0);
}

TEST_CASE("question refusals", "[decision]") {
  CHECK(absl::IsInvalidArgument(Question::Choice("Q", {}).status()));
  CHECK(absl::IsInvalidArgument(Question::Choice("Q", {"only"}).status()));
  CHECK(absl::IsInvalidArgument(Question::Choice("Q", {"a", "a"}).status()));
  std::vector<std::string> many;
  for (int i = 0; i < 27; ++i) many.push_back("o" + std::to_string(i));
  CHECK(absl::IsInvalidArgument(Question::Choice("Q", many).status()));
  many.pop_back();
  CHECK(Question::Choice("Q", many).ok());
  CHECK(absl::IsInvalidArgument(Question::ScoreBins("Q", 1).status()));
  CHECK(absl::IsInvalidArgument(Question::ScoreBins("Q", 11).status()));
  CHECK(absl::IsInvalidArgument(Question::ScoreBins("Q", 4, 1, 1).status()));
  CHECK(absl::IsInvalidArgument(Question::ScoreLevels("Q", {"a"}).status()));
}

TEST_CASE("custom labels change the key and are checked", "[decision]") {
  auto q = *Question::Choice("Q", {"x", "y"});
  const std::string plain = q.key();
  REQUIRE(q.SetCustomLabels({"P", "Q"}).ok());
  CHECK(q.key() != plain);
  CHECK(absl::IsInvalidArgument(q.SetCustomLabels({"P"})));
  CHECK(absl::IsInvalidArgument(q.SetCustomLabels({"P", "P"})));
  auto noul = Question::Noul("Q");
  CHECK(absl::IsInvalidArgument(noul.SetCustomLabels({"Y", "N"})));
}

TEST_CASE("Python float repr and %g", "[decision]") {
  CHECK(PyFloatRepr(0.0) == "0.0");
  CHECK(PyFloatRepr(-0.0) == "-0.0");
  CHECK(PyFloatRepr(1.0) == "1.0");
  CHECK(PyFloatRepr(0.1) == "0.1");
  CHECK(PyFloatRepr(1e-4) == "0.0001");
  CHECK(PyFloatRepr(1e-5) == "1e-05");
  CHECK(PyFloatRepr(1.5e-7) == "1.5e-07");
  CHECK(PyFloatRepr(1e15) == "1000000000000000.0");
  CHECK(PyFloatRepr(1e16) == "1e+16");
  CHECK(PyFloatRepr(123456.789) == "123456.789");
  CHECK(PyFloatRepr(2.0 / 3.0) == "0.6666666666666666");
  CHECK(PyFormatG(0.75) == "0.75");
  CHECK(PyFormatG(1.0) == "1");
  CHECK(PyFormatG(1e-5) == "1e-05");
  CHECK(PyRound(2.5) == 2.0);
  CHECK(PyRound(3.5) == 4.0);
  CHECK(NumpyRound(0.123456789, 8) == 0.12345679);
  CHECK(PyJsonString("a\"b\\c\n\x01") == "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST_CASE("dict states render as json.dumps(indent=2)", "[decision]") {
  const auto v = nlohmann::ordered_json::parse(
      R"({"b": 1, "a": [1.0, "x\u00e9", null, true], "c": {}, "d": []})");
  CHECK(PyJsonDumpsIndent2(v) ==
        "{\n  \"b\": 1,\n  \"a\": [\n    1.0,\n    \"x\xC3\xA9\",\n    null,\n"
        "    true\n  ],\n  \"c\": {},\n  \"d\": []\n}");
}

}  // namespace
}  // namespace mesa_anyjev::decision
