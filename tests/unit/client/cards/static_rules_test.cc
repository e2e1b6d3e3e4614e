// The static query rules and plan (the reference's own tests).
#include "client/cards/static_rules.h"

#include <catch2/catch.hpp>
#include <fstream>

namespace mesa_anyjev::cards {
namespace {

DatasetCard SampleCard(const std::string& name) {
  std::ifstream in(std::string(MESA_ANYJEV_DATA) + "/cards/" + name + ".md",
                   std::ios::binary);
  REQUIRE(in);
  auto card = ParseCard(std::string(std::istreambuf_iterator<char>(in), {}));
  REQUIRE(card.ok());
  return *std::move(card);
}

TEST_CASE("SplitCamel", "[cards]") {
  CHECK(SplitCamel("observerDistance") == "observer distance");
  CHECK(SplitCamel("siteID") == "site id");
  CHECK(SplitCamel("identificationHistoryID") == "identification history id");
  CHECK(SplitCamel("HTTPServer2Go") == "http server2 go");
  CHECK(SplitCamel("pH") == "p h");
  CHECK(SplitCamel("dbh_cm") == "dbh_cm");
  CHECK(SplitCamel("  ").empty());
}

TEST_CASE("QueriesForColumn: name, description head, unit", "[cards]") {
  const DatasetCard bird = SampleCard("DP1.10003.001.brd_countdata");
  const auto queries = QueriesForColumn(**bird.Column("observerDistance"));
  CHECK(queries ==
        std::vector<std::string>{"observer distance",
                                 "Radial distance between the observer and the "
                                 "individual",
                                 "meter"});
  // A description head equal to the name query (any case) is not repeated.
  CHECK(QueriesForColumn({"snow_depth", "Snow depth; cm", "real", "", ""}) ==
        std::vector<std::string>{"snow depth"});
  const std::string long_description(100, 'w');
  CHECK(QueriesForColumn({"a", long_description, "", "", ""})[1].size() == 80);
}

TEST_CASE("HabitatQueries: HARV deciduous, SRER desert, fallback", "[cards]") {
  const DatasetCard bird = SampleCard("DP1.10003.001.brd_countdata");
  CHECK(HabitatQueries(bird.sites[0]) ==
        std::vector<std::string>{"temperate deciduous forest biome",
                                 "temperate broadleaf forest biome"});
  const auto srer = HabitatQueries(bird.sites[1]);
  REQUIRE(srer.size() == 3);
  CHECK(srer[0] == "desert biome");
  CHECK(srer[1] == "xeric shrubland biome");
  CHECK(HabitatQueries({"X", "", "", "", "", "Evergreen Forest"}) ==
        std::vector<std::string>{"evergreen forest biome"});
}

TEST_CASE("TaxonQueries: [Aves] on the bird card", "[cards]") {
  CHECK(TaxonQueries(SampleCard("DP1.10003.001.brd_countdata")) ==
        std::vector<std::string>{"Aves"});
  CHECK(TaxonQueries(SampleCard("DP1.10022.001.bet_sorting")) ==
        std::vector<std::string>{"Carabidae", "Coleoptera"});
  CHECK(TaxonQueries(SampleCard("DP1.10072.001.mam_pertrapnight")) ==
        std::vector<std::string>{"Mammalia", "Rodentia"});
}

TEST_CASE("The static plan", "[cards]") {
  const StaticPlan plan =
      MakeStaticPlan(SampleCard("DP1.10003.001.brd_countdata"));
  CHECK(plan.ontologies.size() == 12);
  REQUIRE(plan.columns.size() == 7);
  CHECK(plan.columns[0].first == "uid");
  CHECK(plan.columns[0].second.annotate == false);
  CHECK_FALSE(plan.columns[4].second.annotate.has_value());
  const nlohmann::ordered_json json = plan.ToJson();
  CHECK(json["planner"] == "static");
  CHECK(json["model"].is_null());
  CHECK(json["fallback"] == false);
  CHECK(json["columns"]["taxonID"]["annotate"].is_null());
  CHECK(json["columns"]["siteID"]["annotate"] == false);
  CHECK(json["sites"]["SRER"]["environment_queries"][0] == "desert biome");
  CHECK(json["taxon_queries"] == nlohmann::ordered_json({"Aves"}));
  CHECK(json["notes"] ==
        "static rules: every registry ontology in play; queries from column "
        "names, descriptions and units");
}

}  // namespace
}  // namespace mesa_anyjev::cards
