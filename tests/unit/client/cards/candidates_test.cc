// Candidates from a recorded-search file: validation, filters, merge and the
// search log.
#include "client/cards/candidates.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"

namespace mesa_anyjev::cards {
namespace {

std::string DataPath(const std::string& name) {
  return std::string(MESA_ANYJEV_DATA) + "/" + name;
}

CandidateSource Bird() {
  auto source = CandidateSource::Load(
      DataPath("candidates/DP1.10003.001.brd_countdata.json"));
  REQUIRE(source.ok());
  return *std::move(source);
}

std::vector<std::string> Curies(const std::vector<Candidate>& candidates) {
  std::vector<std::string> out;
  for (const Candidate& c : candidates) out.push_back(c.curie);
  return out;
}

TEST_CASE("The sample candidates files load", "[cards]") {
  for (const char* name :
       {"DP1.10003.001.brd_countdata", "DP1.10022.001.bet_sorting",
        "DP1.10072.001.mam_pertrapnight"}) {
    INFO(name);
    CHECK(CandidateSource::Load(
              DataPath(std::string("candidates/") + name + ".json"))
              .ok());
  }
}

TEST_CASE("IriFor builds OBO IRIs with the canonical prefix", "[cards]") {
  CHECK(IriFor("ENVO:00000428") ==
        "http://purl.obolibrary.org/obo/ENVO_00000428");
  CHECK(IriFor("ncbitaxon:8782") ==
        "http://purl.obolibrary.org/obo/NCBITaxon_8782");
  CHECK(IriFor("plain").empty());
}

TEST_CASE("Search: filters, merge by CURIE, (rank, curie) order and log",
          "[cards]") {
  const SearchResult result = Bird().SearchCandidates(
      {"observer distance",
       "Radial distance between the observer and the individual", "meter"},
      "pato");
  CHECK(Curies(result.candidates) == std::vector<std::string>{"PATO:0000040",
                                                              "PATO:0001648",
                                                              "PATO:0000122"});
  CHECK(result.candidates[0].query == "observer distance");  // first wins
  CHECK(result.candidates[0].has_children);
  CHECK(result.candidates[2].rank == 2);
  CHECK(
      result.log.dump() ==
      R"({"ontology_id":"pato","queries":["observer distance","Radial distance between the observer and the individual","meter"],"raw_hits":{"observer distance":3,"Radial distance between the observer and the individual":3,"meter":0},"filtered_out":["PATO:0000001","PATO:0000117"],"n_candidates":3})");
}

TEST_CASE(
    "Search: imported and obsolete hits go; blanks are skipped; "
    "errors are logged; only 3 queries are read",
    "[cards]") {
  const CandidateSource source = Bird();
  const SearchResult envo =
      source.SearchCandidates({"observer distance"}, "envo");
  CHECK(envo.candidates.empty());
  CHECK(envo.log["filtered_out"] ==
        nlohmann::ordered_json({"ENVO:00002003", "PATO:0000040"}));
  const SearchResult taxa = source.SearchCandidates(
      {"taxon id", "  ", "Aves", "unrecorded", "never read"}, "ncbitaxon");
  CHECK(Curies(taxa.candidates) ==
        std::vector<std::string>{"NCBITaxon:8782", "NCBITaxon:9126"});
  CHECK(taxa.log["queries"] == nlohmann::ordered_json({"Aves", "unrecorded"}));
  CHECK(taxa.log["raw_hits"]["unrecorded"] == 0);
  CHECK(taxa.log["errors"] ==
        nlohmann::ordered_json({"taxon id: HTTP 503 Service Unavailable"}));
  // A repeated CURIE within a query is dropped after the first.
  CHECK(taxa.log["filtered_out"] ==
        nlohmann::ordered_json({"NCBITaxon:1", "NCBITaxon:8782"}));
  const SearchResult capped = source.SearchCandidates(
      {"observer distance"}, "pato", /*max_candidates=*/1);
  CHECK(Curies(capped.candidates) == std::vector<std::string>{"PATO:0000040"});
  CHECK(capped.log["n_candidates"] == 1);
}

TEST_CASE(
    "Biome search drops the root and IRI-less hits and names the "
    "parent",
    "[cards]") {
  const SearchResult result =
      Bird().BiomeCandidates({"desert biome", "xeric shrubland biome"});
  CHECK(Curies(result.candidates) ==
        std::vector<std::string>{"ENVO:01001838", "ENVO:01000218"});
  CHECK(result.log["parent"] == kBiomeIri);
  CHECK(result.log["ontology_id"] == "envo");
  const SearchResult forest =
      Bird().BiomeCandidates({"temperate deciduous forest biome"});
  CHECK(forest.log["filtered_out"] ==
        nlohmann::ordered_json({"ENVO:00000428"}));
}

TEST_CASE("Children: filtered, tagged, NOT_FOUND when unrecorded", "[cards]") {
  auto kids = Bird().Children("NCBITaxon:8782");
  REQUIRE(kids.ok());
  CHECK(Curies(*kids) == std::vector<std::string>{"NCBITaxon:8825",
                                                  "NCBITaxon:9126",
                                                  "NCBITaxon:8782"});
  CHECK((*kids)[0].query ==
        "children:http://purl.obolibrary.org/obo/NCBITaxon_8782");
  CHECK((*kids)[0].ontology_id == "ncbitaxon");
  CHECK(Bird().Children("NCBITaxon:9126").status().code() ==
        absl::StatusCode::kNotFound);
}

TEST_CASE("Loading names the bad field", "[cards]") {
  auto error = [](std::string_view text) {
    auto source = CandidateSource::FromJson(text);
    REQUIRE_FALSE(source.ok());
    CHECK(source.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(source.status().message());
  };
  CHECK(absl::StartsWith(error("["), "candidates file: $: not valid JSON: "));
  CHECK(error("{\"searches\": [], \"searches\": []}") ==
        "candidates file: $: duplicate key 'searches'");
  CHECK(error(R"({"extra": 1})") == "candidates file: $.extra: unknown field");
  CHECK(
      error(
          R"({"searches": [{"ontology_id": "go", "query": "q", "hits": []}]})") ==
      "candidates file: $.searches[0].ontology_id: 'go' is not a registry "
      "id (lower case)");
  CHECK(
      error(
          R"({"searches": [{"ontology_id": "envo", "query": "q", "hits": [{"label": "a", "curie": 1, "iri": ""}]}]})") ==
      "candidates file: $.searches[0].hits[0].curie: expected a string");
  CHECK(error(R"({"biomes": [{"query": " q", "hits": []}]})") ==
        "candidates file: $.biomes[0].query: must be non-empty and stripped");
  CHECK(error(R"({"biomes": [{"query": "q"}]})") ==
        "candidates file: $.biomes[0]: needs exactly one of \"hits\" and "
        "\"error\"");
  CHECK(
      error(
          R"({"biomes": [{"query": "q", "hits": []}, {"query": "q", "hits": []}]})") ==
      "candidates file: $.biomes[1]: repeats an earlier query");
  CHECK(
      error(
          R"({"children": {"X:1": [{"label": "a", "curie": "X:2", "iri": "i", "synonyms": [3]}]}})") ==
      "candidates file: $.children[\"X:1\"][0].synonyms[0]: expected a "
      "string");
  CHECK(
      error(
          R"({"children": {"X:1": [{"label": "a", "curie": "X:2", "iri": "i", "is_root": "no"}]}})") ==
      "candidates file: $.children[\"X:1\"][0].is_root: expected true or "
      "false");
  CHECK(CandidateSource::Load("/nonexistent/c.json").status().code() ==
        absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace mesa_anyjev::cards
