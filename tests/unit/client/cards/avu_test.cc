// AVU construction, value kinds, top profile value and the unit table.
#include "client/cards/avu.h"

#include <catch2/catch.hpp>

namespace mesa_anyjev::cards {
namespace {

Candidate Term(std::string label, std::string curie, std::string ontology) {
  Candidate c;
  c.label = std::move(label);
  c.curie = std::move(curie);
  c.ontology_id = std::move(ontology);
  return c;
}

TEST_CASE("LabelToSnake examples", "[cards]") {
  CHECK(LabelToSnake("degree Celsius") == "degree_celsius");
  CHECK(LabelToSnake("pH value") == "ph_value");
  CHECK(LabelToSnake("has number of") == "has_number_of");
  CHECK(LabelToSnake("  3-D extent\t(quality) ") == "3d_extent_quality");
  CHECK(LabelToSnake("caf\xC3\xA9 \xC2\xA0 au lait") == "caf_au_lait");
  CHECK(LabelToSnake("\xC3\xA9\xC3\xA9").empty());
}

TEST_CASE("BuildAvu and its errors", "[cards]") {
  auto avu = BuildAvu(Term("degree Celsius", "UO:0000027", "uo"), " 21 ");
  REQUIRE(avu.ok());
  CHECK(*avu == Avu{"uo.degree_celsius", "21", "UO:0000027"});
  auto upper = BuildAvu(Term("Aves", "NCBITaxon:8782", "NCBITaxon"), "Aves");
  REQUIRE(upper.ok());
  CHECK(upper->attribute == "ncbitaxon.aves");
  auto no_key = BuildAvu(Term("--", "PATO:1", "pato"), "x");
  CHECK(no_key.status().message() == "label '--' does not snake-case to a key");
  auto no_value = BuildAvu(Term("mass", "PATO:0000125", "pato"), "  ");
  CHECK(no_value.status().message() ==
        "could not build an AVU for PATO:0000125 with value '  '");
}

TEST_CASE("PreRuleValueKind: the value kinds fixed by rule", "[cards]") {
  CHECK(PreRuleValueKind("taxon", "site") == "the site code");
  CHECK(PreRuleValueKind("environment", "dataset") == "the site code");
  CHECK(PreRuleValueKind("location", "avu") == "the site code");
  CHECK_FALSE(PreRuleValueKind("environment", "column").has_value());
  CHECK(PreRuleValueKind("unit", "column") == "the term label");
  CHECK(PreRuleValueKind("taxon", "dataset") == "the term label");
  CHECK_FALSE(PreRuleValueKind("measurement", "column").has_value());
}

TEST_CASE("ValueFor uses the chosen kind's value when non-empty", "[cards]") {
  CHECK(*ValueFor("the site code", "t", "c", "HARV", "v") == "HARV");
  CHECK(*ValueFor("the site code", "t", "c", "", "v") == "t");
  CHECK(*ValueFor("the column name", "t", "c", "s", "v") == "c");
  CHECK(*ValueFor("the most frequent data value", "t", "c", "s", "v") == "v");
  CHECK(*ValueFor("the most frequent data value", "t", "c", "s", "") == "t");
  CHECK(*ValueFor("the term label", "t", "c", "s", "v") == "t");
  CHECK(ValueFor("a guess", "t", "c", "s", "v").status().message() ==
        "unknown value kind 'a guess'");
}

TEST_CASE("TopProfileValue", "[cards]") {
  CHECK(TopProfileValue("2 distinct; top: SRER (9416), HARV (6068)") == "SRER");
  CHECK(TopProfileValue("top: a (b) (3)") == "a (b)");
  CHECK(TopProfileValue("top: only") == "only");
  CHECK_FALSE(TopProfileValue("all blank").has_value());
  CHECK_FALSE(TopProfileValue("top: , x").has_value());
  CHECK(TopProfileValue("top: (5)") == "(5)");
}

TEST_CASE("UnitCandidate reproduces the table's first-match quirks",
          "[cards]") {
  auto unit = [](std::string_view name) {
    const auto c = UnitCandidate(name);
    return c.has_value() ? c->curie : std::string("none");
  };
  CHECK(unit("meter") == "UO:0000008");
  CHECK(unit("Meter ") == "UO:0000008");
  CHECK(unit("centimeter") == "UO:0000008");          // quirk: suffix "meter"
  CHECK(unit("millimeter") == "UO:0000008");          // quirk
  CHECK(unit("kilometer") == "UO:0000008");           // quirk
  CHECK(unit("kilogram") == "UO:0000021");            // quirk: gram
  CHECK(unit("milligram") == "UO:0000021");           // quirk: gram
  CHECK(unit("kilometer per hour") == "UO:0000032");  // quirk: hour
  CHECK(unit("degreesCelsius") == "UO:0000027");
  CHECK(unit("number") == "UO:0000189");
  CHECK(unit("percent") == "UO:0000187");
  CHECK(unit("milliliter") == "UO:0000098");
  CHECK(unit("") == "none");
  CHECK(unit("pH") == "none");
  CHECK(unit("siemensPerCentimeter") == "UO:0000008");  // quirk
  const auto celsius = UnitCandidate("celsius");
  REQUIRE(celsius.has_value());
  CHECK(celsius->label == "degree Celsius");
  CHECK(celsius->iri == "http://purl.obolibrary.org/obo/UO_0000027");
  CHECK(celsius->ontology_id == "uo");
  CHECK(UnitCandidate("count")->label == "count unit");
}

}  // namespace
}  // namespace mesa_anyjev::cards
