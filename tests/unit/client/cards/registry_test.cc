// The registry and vocabularies (the reference's own tests).
#include "client/cards/registry.h"

#include <catch2/catch.hpp>
#include <numeric>

namespace mesa_anyjev::cards {
namespace {

TEST_CASE("Registry: 12 entries in option order, 8 aspects", "[cards]") {
  REQUIRE(OntologyRegistry().size() == 12);
  CHECK(RegistryIds() == std::vector<std::string>{
                             "envo", "ncbitaxon", "pato", "uo", "obi", "iao",
                             "pco", "bco", "gaz", "ro", "taxrank", "genepio"});
  CHECK(OntologyRegistry()[1].option_text ==
        "NCBITaxon: organisms and taxa at every rank");
  CHECK(OntologyRegistry()[9].option_text ==
        "RO: relations between entities (part of, located in, participates "
        "in)");
  REQUIRE(AspectOptions().size() == 8);
  CHECK(Aspects().size() == 8);
  for (size_t i = 0; i < Aspects().size(); ++i) {
    CHECK(AspectOptions()[i].rfind(Aspects()[i] + ": ", 0) == 0);
  }
  CHECK(ValueKinds() == std::vector<std::string>{
                            "the term label", "the site code",
                            "the column name", "the most frequent data value"});
}

TEST_CASE("PrefixOf canonicalises the case", "[cards]") {
  CHECK(PrefixOf("ncbitaxon:9606") == "NCBITaxon");
  CHECK(PrefixOf("envo:00000428") == "ENVO");
  CHECK(PrefixOf("GO:0008150") == "GO");
  CHECK(PrefixOf("go:0008150") == "GO");
  CHECK(PrefixOf("no-colon").empty());
}

TEST_CASE("Entry looks ids up lower-cased", "[cards]") {
  auto entry = Entry("NCBITaxon");
  REQUIRE(entry.ok());
  CHECK((*entry)->prefix == "NCBITaxon");
  CHECK(Entry("go").status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("AllowedForAspect and MaskForAspect", "[cards]") {
  CHECK(AllowedForAspect("unit") == std::vector<std::string>{"uo"});
  const auto taxon = AllowedForAspect("taxon");
  CHECK(std::count(taxon.begin(), taxon.end(), "ncbitaxon") == 1);
  CHECK(std::count(taxon.begin(), taxon.end(), "envo") == 0);
  CHECK(AllowedForAspect("other").size() == 12);
  CHECK(AllowedForAspect("nonsense").empty());
  const auto mask = MaskForAspect("environment");
  CHECK(std::accumulate(mask.begin(), mask.end(), 0) == 2);
  CHECK(mask[0]);  // envo
  CHECK(mask[8]);  // gaz
  const auto in_play =
      MaskForAspect("environment", std::vector<std::string>{"gaz", "uo"});
  CHECK(std::accumulate(in_play.begin(), in_play.end(), 0) == 1);
  CHECK(in_play[8]);
}

}  // namespace
}  // namespace mesa_anyjev::cards
