// The enum <-> name tables of common/: one table per enum, read both ways.
#include "common/util/enum_names.h"

#include <catch2/catch.hpp>
#include <string>

#include "common/decision/decider.h"
#include "common/decision/level.h"
#include "common/decision/question.h"
#include "common/questions/question_set.h"
#include "tests/unit/enum_names_check.h"

namespace mesa_anyjev {
namespace {

using testing::CheckNames;
using testing::CheckRoundTrip;
using testing::ConfigChoices;
using testing::NamesOf;
using testing::ParseError;

enum class Color { kRed, kGreen, kBlue };
constexpr util::EnumName<Color> kColorNames[] = {
    {Color::kRed, "red"}, {Color::kGreen, "green"}, {Color::kBlue, "blue"}};

TEST_CASE("EnumName tables read both ways and list their names",
          "[enum_names]") {
  static_assert(util::ValueIn(kColorNames, "green") == Color::kGreen);
  CHECK(std::string(util::NameIn(kColorNames, Color::kBlue)) == "blue");
  CHECK(std::string(util::NameIn(kColorNames, static_cast<Color>(7))) == "?");
  CHECK(std::string(util::NameIn(kColorNames, static_cast<Color>(7), "x")) ==
        "x");
  CHECK_FALSE(util::ValueIn(kColorNames, "Red").has_value());
  CHECK_FALSE(util::ValueIn(kColorNames, "").has_value());
  CHECK(util::NamesIn(kColorNames) == "red, green or blue");
  CHECK(util::NamesIn(kColorNames, ", ") == "red, green, blue");
  constexpr util::EnumName<Color> kOne[] = {{Color::kRed, "red"}};
  CHECK(util::NamesIn(kOne) == "red");
  static_assert(util::NamesEvery(kColorNames, Color::kBlue));
  // A value without its row, a row twice, a name twice.
  static_assert(!util::NamesEvery(kOne, Color::kGreen));
  constexpr util::EnumName<Color> kTwice[] = {
      {Color::kRed, "red"}, {Color::kRed, "green"}, {Color::kBlue, "blue"}};
  static_assert(!util::NamesEvery(kTwice, Color::kBlue));
  constexpr util::EnumName<Color> kSameName[] = {
      {Color::kRed, "red"}, {Color::kGreen, "red"}, {Color::kBlue, "blue"}};
  static_assert(!util::NamesEvery(kSameName, Color::kBlue));
}

TEST_CASE("Level names round-trip", "[enum_names]") {
  using decision::Level;
  const testing::ExpectedNames<Level> expected = {{Level::kRaw, "raw"},
                                                  {Level::kL0, "L0"},
                                                  {Level::kL1, "L1"},
                                                  {Level::kL2, "L2"},
                                                  {Level::kAuto, "auto"}};
  CheckRoundTrip(expected, decision::LevelName, decision::ParseLevel);
  CHECK(ConfigChoices("decider.level") == NamesOf(expected));
  CHECK(ParseError(decision::ParseLevel, "l2") ==
        "unknown level 'l2' (expected raw, L0, L1, L2 or auto)");
  CHECK(std::string(decision::LevelName(static_cast<Level>(9))) == "?");
}

TEST_CASE("QuestionKind names round-trip", "[enum_names]") {
  using decision::QuestionKind;
  CheckRoundTrip<QuestionKind>({{QuestionKind::kChoice, "choice"},
                                {QuestionKind::kNoul, "noul"},
                                {QuestionKind::kScore, "score"}},
                               decision::QuestionKindName,
                               decision::ParseQuestionKind);
  CHECK(ParseError(decision::ParseQuestionKind, "yesno") ==
        "unknown question kind 'yesno' (expected choice, noul or score)");
}

TEST_CASE("PriorMode names round-trip", "[enum_names]") {
  using decision::PriorMode;
  const testing::ExpectedNames<PriorMode> expected = {
      {PriorMode::kBatch, "batch"},
      {PriorMode::kContentFree, "content_free"},
      {PriorMode::kNone, "none"}};
  CheckRoundTrip(expected, decision::PriorModeName, decision::ParsePriorMode);
  CHECK(ConfigChoices("decisions.prior") == NamesOf(expected));
  CHECK(ConfigChoices("decider.prior") == NamesOf(expected));
  CHECK(ParseError(decision::ParsePriorMode, "cf") ==
        "unknown prior 'cf' (expected batch, content_free or none)");
}

TEST_CASE("Combine names parse to every value", "[enum_names]") {
  using decision::Combine;
  // Combine is only ever read (a call's options.combine), never written.
  CHECK(*decision::ParseCombine("logmean") == Combine::kLogMean);
  CHECK(*decision::ParseCombine("mean") == Combine::kMean);
  CHECK(ParseError(decision::ParseCombine, "sum") ==
        "unknown combine 'sum' (expected logmean or mean)");
}

TEST_CASE("Scope names are distinct", "[enum_names]") {
  using questions::Scope;
  CheckNames<Scope>({{Scope::kDataset, "dataset"},
                     {Scope::kColumn, "column"},
                     {Scope::kSite, "site"},
                     {Scope::kAvu, "avu"}},
                    questions::ScopeName);
}

}  // namespace
}  // namespace mesa_anyjev
