// Question states (the reference's own tests): JSON-safe, the shared card
// header, the cuts, site vs column variants and a key-order-free sha.
#include "client/cards/states.h"

#include <catch2/catch.hpp>

#include "client/cards/registry.h"
#include "common/util/hash.h"

namespace mesa_anyjev::cards {
namespace {

DatasetCard Card() {
  auto card = ParseCard(
      "# Dataset: DP1.1 / tbl\n"
      "Product: DP1.1 — Bird counts. Landbirds \xC3\xA0 la carte.\n"
      "Sites: HARV (Harvard, MA, domain D01 Northeast; deciduous forest).\n"
      "Rows: 5; months covered: 2020-01 to 2020-03 (3 distinct months).\n"
      "- siteID | NEON site code | string | - | 2 distinct; top: HARV (3)\n"
      "- observerDistance | Distance (m) | real | meter | " +
      std::string(299, 'x') + "\xC3\xA9\xC3\xA9\n");
  REQUIRE(card.ok());
  return *std::move(card);
}

Candidate LongCandidate() {
  Candidate c;
  c.label = "distance";
  c.curie = "PATO:0000040";
  c.ontology_id = "pato";
  c.description = std::string(299, 'd') + "\xE2\x82\xAC\xE2\x82\xAC";
  c.synonyms = {"a", "b", "c", "d", "e", "f", "g"};
  c.has_children = true;
  return c;
}

std::vector<std::string> Keys(const State& state) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : state.items()) keys.push_back(key);
  return keys;
}

TEST_CASE("CardHeader and the column dict keep the reference's key order",
          "[cards]") {
  const DatasetCard card = Card();
  const State header = CardHeader(card);
  CHECK(Keys(header) == std::vector<std::string>{"dataset", "product_title",
                                                 "product_description", "sites",
                                                 "rows", "months", "columns"});
  CHECK(header["dataset"] == "DP1.1.tbl");
  CHECK(header["months"] == "2020-01 to 2020-03");
  CHECK(Keys(header["sites"][0]) ==
        std::vector<std::string>{"code", "name", "domain", "habitat"});
  const State column = ColumnDict(card.columns[1]);
  CHECK(Keys(column) == std::vector<std::string>{"name", "description", "dtype",
                                                 "unit", "profile"});
  // 300 code points: 299 'x' and one 'é' (2 bytes), not 300 bytes.
  CHECK(column["profile"].get<std::string>() ==
        std::string(299, 'x') + "\xC3\xA9");
}

TEST_CASE("Every builder shares the card header first", "[cards]") {
  const DatasetCard card = Card();
  const State header = CardHeader(card);
  const ColumnInfo& col = card.columns[1];
  const State cand = LongCandidate().AsState();
  const Avu avu{"pato.distance", "distance", "PATO:0000040"};
  for (const State& state :
       {ColumnState(card, col), ColumnState(card, col, "measurement"),
        OntologyState(card, col, "measurement", "pato", "P", {"b", "a"}),
        CandidateStateForColumn(card, col, "measurement", cand, 3),
        CandidateStateForSite(card, card.sites[0], "environment", cand, 3),
        CandidateStateForDataset(card, "taxon", cand, 3),
        ValueKindState(card, col, cand, "measurement"),
        AvuState(card, avu, cand, "column", col.name, {}),
        DatasetOntologyState(card, OntologyRegistry()[0].option_text)}) {
    CHECK(Keys(state).front() == "card");
    CHECK(state["card"] == header);
    CHECK_FALSE(RenderState(state).empty());
  }
  CHECK(Keys(ColumnState(card, col, "unit")) ==
        std::vector<std::string>{"card", "column", "aspect"});
  const State ontology =
      OntologyState(card, col, "measurement", "pato", "P", {"b", "a"});
  CHECK(ontology["ontology"]["aspects"] == State({"a", "b"}));
}

TEST_CASE("Candidate states: cuts and the three scopes", "[cards]") {
  const DatasetCard card = Card();
  const State cand = LongCandidate().AsState();
  CHECK(cand["description"].get<std::string>() ==
        std::string(299, 'd') + "\xE2\x82\xAC");
  CHECK(cand["synonyms"] == State({"a", "b", "c", "d", "e"}));
  CHECK(Keys(cand) == std::vector<std::string>{"label", "curie", "ontology_id",
                                               "description", "synonyms",
                                               "has_children"});
  CHECK(Keys(CandidateStateForColumn(card, card.columns[0], "location", cand,
                                     2)) ==
        std::vector<std::string>{"card", "scope", "column", "aspect",
                                 "candidate", "n_candidates"});
  const State site =
      CandidateStateForSite(card, card.sites[0], "environment", cand, 2);
  CHECK(Keys(site) == std::vector<std::string>{"card", "scope", "site",
                                               "aspect", "candidate",
                                               "n_candidates"});
  CHECK(site["scope"] == "site");
  CHECK(site["site"]["habitat"] == "deciduous forest");
  CHECK(Keys(CandidateStateForDataset(card, "taxon", cand, 2)) ==
        std::vector<std::string>{"card", "scope", "aspect", "candidate",
                                 "n_candidates"});
  const State chooser = ChooserState("pato", "distance", cand, 4);
  CHECK(Keys(chooser) == std::vector<std::string>{"ontology_id", "value",
                                                  "candidate", "n_candidates"});
  CHECK(Keys(chooser["candidate"]) ==
        std::vector<std::string>{"label", "curie", "description"});
}

TEST_CASE("AvuState keeps the first 25 siblings; DataCite cuts at 1200",
          "[cards]") {
  const DatasetCard card = Card();
  std::vector<Avu> siblings(30, Avu{"a.b", "v", "X:1"});
  const State state = AvuState(card, siblings[0], LongCandidate().AsState(),
                               "site", "HARV", siblings);
  CHECK(state["siblings"].size() == 25);
  CHECK(Keys(state) == std::vector<std::string>{"card", "avu", "term", "scope",
                                                "target", "siblings"});
  CHECK(state["term"]["description"].get<std::string>().size() == 302);
  const State datacite =
      DataciteState(&card, "DateType", std::string(1300, 't'), "Collected");
  CHECK(Keys(datacite) ==
        std::vector<std::string>{"vocabulary", "text", "card", "value"});
  CHECK(datacite["text"].get<std::string>().size() == 1200);
  CHECK(Keys(DataciteState(nullptr, "DateType", "t")) ==
        std::vector<std::string>{"vocabulary", "text"});
}

TEST_CASE(
    "StateSha256 is json.dumps(sort_keys, compact) and ignores key "
    "order at every depth",
    "[cards]") {
  State a;
  a["b"] = 1;
  a["a"] = State{{"z", true}, {"\xC3\xA9", "\xE2\x82\xAC\n"}, {"y", nullptr}};
  a["c"] = State::array({1.5, 2});
  State b;
  b["c"] = State::array({1.5, 2});
  b["a"] = State{{"y", nullptr}, {"\xC3\xA9", "\xE2\x82\xAC\n"}, {"z", true}};
  b["b"] = 1;
  CHECK(CanonicalJson(a) ==
        "{\"a\":{\"y\":null,\"z\":true,\"\xC3\xA9\":\"\xE2\x82\xAC\\n\"},"
        "\"b\":1,\"c\":[1.5,2]}");
  CHECK(StateSha256(a) == StateSha256(b));
  CHECK(StateSha256(a) == util::Sha256Hex(CanonicalJson(a)));
  CHECK(RenderState(State{{"k", State::array({1})}}) ==
        "{\n  \"k\": [\n    1\n  ]\n}");
}

}  // namespace
}  // namespace mesa_anyjev::cards
