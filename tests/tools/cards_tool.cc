// cards_tool: client/cards as a command, for tests/e2e/test_cards_oracle.py,
// which computes the same things in an independent Python version and
// compares.
// Reads one JSON request on stdin:
//
//   {"card_text": "<card>" (optional), "ops": [{"op": ..., ...}]}
//
// and writes {"results": [...]}, one entry per op ({"error": {"code",
// "message"}} when it failed). Ops:
//   parse                      the card's fields, name and sha256
//   is_identifier              {column: bool} for every column
//   queries                    {column: queries_for_column}
//   habitat_queries            {site code: queries}
//   taxon_queries | static_plan
//   state {builder, ...}       {state, canonical, sha256, render}; builders:
//     card_header; column_state {column, [aspect]}; ontology_state {column,
//     aspect, ontology_id}; candidate_state {scope, target, aspect,
//     candidate, n_candidates}; chooser_state {ontology_id, value,
//     candidate, n_candidates}; value_kind_state {column, candidate,
//     aspect}; avu_state {avu, candidate, scope, target, siblings};
//     dataset_ontology_state {ontology_id}; datacite_state {with_card,
//     vocabulary, text, [value]}
//   split_camel | label_to_snake | top_profile_value | unit_candidate |
//   prefix_of | iri_for | py_lower | py_strip | py_splitlines {arg}
//   build_avu {candidate, value}; value_for {kind, term_label, column_name,
//   site_code, top_value}; pre_rule_value_kind {aspect, scope}
//   allowed_for_aspect {aspect}; mask_for_aspect {aspect, [in_play]}
//   search {candidates, queries, ontology_id}; biome {candidates, queries};
//   children {candidates, curie}   (candidates: a candidates file path)
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/cards/avu.h"
#include "client/cards/candidates.h"
#include "client/cards/card.h"
#include "client/cards/registry.h"
#include "client/cards/states.h"
#include "client/cards/static_rules.h"
#include "common/text/py_text.h"

namespace mesa_anyjev::cards {
namespace {

using Json = nlohmann::ordered_json;

Json ErrorJson(const absl::Status& status) {
  return Json{{"error",
               {{"code", absl::StatusCodeToString(status.code())},
                {"message", std::string(status.message())}}}};
}

Json Optional(const std::optional<std::string>& value) {
  return value.has_value() ? Json(*value) : Json();
}

Json CardJson(const DatasetCard& card) {
  Json sites = Json::array();
  for (const SiteInfo& s : card.sites) {
    sites.push_back({{"code", s.code},
                     {"name", s.name},
                     {"state", s.state},
                     {"domain", s.domain},
                     {"domain_name", s.domain_name},
                     {"habitat", s.habitat}});
  }
  Json columns = Json::array();
  for (const ColumnInfo& c : card.columns) {
    columns.push_back({{"name", c.name},
                       {"description", c.description},
                       {"dtype", c.dtype},
                       {"unit", c.unit},
                       {"profile", c.profile}});
  }
  return {{"product_code", card.product_code},
          {"table", card.table},
          {"product_title", card.product_title},
          {"product_description", card.product_description},
          {"source", card.source},
          {"sites", sites},
          {"rows", card.rows},
          {"months_from", card.months_from},
          {"months_to", card.months_to},
          {"columns", columns},
          {"sha256", card.sha256},
          {"name", card.name()}};
}

Json CandidateJson(const Candidate& c) {
  return {{"label", c.label},
          {"curie", c.curie},
          {"iri", c.iri},
          {"ontology_id", c.ontology_id},
          {"description", c.description},
          {"synonyms", c.synonyms},
          {"has_children", c.has_children},
          {"rank", c.rank},
          {"query", c.query}};
}

Candidate CandidateFrom(const Json& j) {
  Candidate c;
  c.label = j.value("label", "");
  c.curie = j.value("curie", "");
  c.iri = j.value("iri", "");
  c.ontology_id = j.value("ontology_id", "");
  c.description = j.value("description", "");
  if (j.contains("synonyms")) {
    c.synonyms = j["synonyms"].get<std::vector<std::string>>();
  }
  c.has_children = j.value("has_children", false);
  return c;
}

Avu AvuFrom(const Json& j) {
  return {j.value("attribute", ""), j.value("value", ""), j.value("unit", "")};
}

absl::StatusOr<State> BuildState(const DatasetCard& card, const Json& op) {
  const std::string builder = op.value("builder", "");
  auto column = [&]() { return card.Column(op.value("column", "")); };
  if (builder == "card_header") return CardHeader(card);
  if (builder == "column_state") {
    auto col = column();
    if (!col.ok()) return col.status();
    if (op.contains("aspect")) {
      return ColumnState(card, **col, op["aspect"].get<std::string>());
    }
    return ColumnState(card, **col);
  }
  if (builder == "ontology_state") {
    auto col = column();
    if (!col.ok()) return col.status();
    auto entry = Entry(op.value("ontology_id", ""));
    if (!entry.ok()) return entry.status();
    return OntologyState(card, **col, op.value("aspect", ""), (*entry)->id,
                         (*entry)->option_text, (*entry)->aspects);
  }
  if (builder == "candidate_state") {
    const State candidate = CandidateFrom(op["candidate"]).AsState();
    const std::string scope = op.value("scope", "");
    const std::string aspect = op.value("aspect", "");
    const int n = op.value("n_candidates", 0);
    if (scope == "column") {
      auto col = column();
      if (!col.ok()) return col.status();
      return CandidateStateForColumn(card, **col, aspect, candidate, n);
    }
    if (scope == "site") {
      for (const SiteInfo& site : card.sites) {
        if (site.code == op.value("site", "")) {
          return CandidateStateForSite(card, site, aspect, candidate, n);
        }
      }
      return absl::NotFoundError("no such site");
    }
    return CandidateStateForDataset(card, aspect, candidate, n);
  }
  if (builder == "chooser_state") {
    return ChooserState(op.value("ontology_id", ""), op.value("value", ""),
                        CandidateFrom(op["candidate"]).AsState(),
                        op.value("n_candidates", 0));
  }
  if (builder == "value_kind_state") {
    auto col = column();
    if (!col.ok()) return col.status();
    return ValueKindState(card, **col, CandidateFrom(op["candidate"]).AsState(),
                          op.value("aspect", ""));
  }
  if (builder == "avu_state") {
    std::vector<Avu> siblings;
    for (const Json& s : op["siblings"]) siblings.push_back(AvuFrom(s));
    return AvuState(card, AvuFrom(op["avu"]),
                    CandidateFrom(op["candidate"]).AsState(),
                    op.value("scope", ""), op.value("target", ""), siblings);
  }
  if (builder == "dataset_ontology_state") {
    auto entry = Entry(op.value("ontology_id", ""));
    if (!entry.ok()) return entry.status();
    return DatasetOntologyState(card, (*entry)->option_text);
  }
  if (builder == "datacite_state") {
    std::optional<std::string> value;
    if (op.contains("value")) value = op["value"].get<std::string>();
    return DataciteState(op.value("with_card", false) ? &card : nullptr,
                         op.value("vocabulary", ""), op.value("text", ""),
                         value);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown builder ", builder));
}

absl::StatusOr<Json> RunOp(const absl::StatusOr<DatasetCard>& card,
                           const Json& op) {
  const std::string name = op.value("op", "");
  const std::string arg = op.value("arg", "");
  if (name == "split_camel") return Json(SplitCamel(arg));
  if (name == "label_to_snake") return Json(LabelToSnake(arg));
  if (name == "top_profile_value") return Optional(TopProfileValue(arg));
  if (name == "prefix_of") return Json(PrefixOf(arg));
  if (name == "iri_for") return Json(IriFor(arg));
  if (name == "py_lower") return Json(text::PyLower(arg));
  if (name == "py_strip") return Json(std::string(text::PyStrip(arg)));
  if (name == "py_splitlines") {
    Json lines = Json::array();
    for (const auto line : text::PySplitLines(arg)) lines.push_back(line);
    return lines;
  }
  if (name == "unit_candidate") {
    const auto candidate = UnitCandidate(arg);
    return candidate.has_value() ? CandidateJson(*candidate) : Json();
  }
  if (name == "build_avu") {
    auto avu = BuildAvu(CandidateFrom(op["candidate"]), op.value("value", ""));
    if (!avu.ok()) return avu.status();
    return Json{{"attribute", avu->attribute},
                {"value", avu->value},
                {"unit", avu->unit}};
  }
  if (name == "value_for") {
    auto value = ValueFor(op.value("kind", ""), op.value("term_label", ""),
                          op.value("column_name", ""),
                          op.value("site_code", ""), op.value("top_value", ""));
    if (!value.ok()) return value.status();
    return Json(*value);
  }
  if (name == "pre_rule_value_kind") {
    return Optional(
        PreRuleValueKind(op.value("aspect", ""), op.value("scope", "")));
  }
  if (name == "allowed_for_aspect") {
    return Json(AllowedForAspect(op.value("aspect", "")));
  }
  if (name == "mask_for_aspect") {
    std::optional<std::vector<std::string>> in_play;
    if (op.contains("in_play")) {
      in_play = op["in_play"].get<std::vector<std::string>>();
    }
    return Json(MaskForAspect(op.value("aspect", ""), in_play));
  }
  if (name == "search" || name == "biome" || name == "children") {
    auto source = CandidateSource::Load(op.value("candidates", ""));
    if (!source.ok()) return source.status();
    if (name == "children") {
      auto kids = source->Children(op.value("curie", ""));
      if (!kids.ok()) return kids.status();
      Json out = Json::array();
      for (const Candidate& c : *kids) out.push_back(CandidateJson(c));
      return out;
    }
    const auto queries = op["queries"].get<std::vector<std::string>>();
    const SearchResult result =
        name == "search"
            ? source->SearchCandidates(queries, op.value("ontology_id", ""))
            : source->BiomeCandidates(queries);
    Json candidates = Json::array();
    for (const Candidate& c : result.candidates) {
      candidates.push_back(CandidateJson(c));
    }
    return Json{{"candidates", candidates}, {"log", result.log}};
  }
  // The rest need the card.
  if (!card.ok()) return card.status();
  if (name == "parse") return CardJson(*card);
  if (name == "is_identifier" || name == "queries") {
    Json out = Json::object();
    for (const ColumnInfo& column : card->columns) {
      out[column.name] = name == "queries" ? Json(QueriesForColumn(column))
                                           : Json(IsIdentifier(column));
    }
    return out;
  }
  if (name == "habitat_queries") {
    Json out = Json::object();
    for (const SiteInfo& site : card->sites) {
      out[site.code] = HabitatQueries(site);
    }
    return out;
  }
  if (name == "taxon_queries") return Json(TaxonQueries(*card));
  if (name == "static_plan") return MakeStaticPlan(*card).ToJson();
  if (name == "state") {
    auto state = BuildState(*card, op);
    if (!state.ok()) return state.status();
    return Json{{"state", *state},
                {"canonical", CanonicalJson(*state)},
                {"sha256", StateSha256(*state)},
                {"render", RenderState(*state)}};
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown op ", name));
}

int Main() {
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  const Json request = Json::parse(input);
  absl::StatusOr<DatasetCard> card =
      absl::InvalidArgumentError("no card_text in the request");
  if (request.contains("card_text")) {
    card = ParseCard(request["card_text"].get<std::string>());
  }
  Json results = Json::array();
  for (const Json& op : request["ops"]) {
    absl::StatusOr<Json> result = RunOp(card, op);
    results.push_back(result.ok() ? *result : ErrorJson(result.status()));
  }
  std::cout << Json{{"results", results}}.dump() << "\n";
  return 0;
}

}  // namespace
}  // namespace mesa_anyjev::cards

int main() { return mesa_anyjev::cards::Main(); }
