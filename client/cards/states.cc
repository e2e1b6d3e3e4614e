// State builders (see states.h).
#include "client/cards/states.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/decision/py_json.h"
#include "common/text/py_text.h"
#include "common/util/hash.h"

namespace mesa_anyjev::cards {
namespace {

std::string Cut(std::string_view text, size_t limit) {
  return std::string(text::CodePointPrefix(text, limit));
}

State SiteDict(const SiteInfo& site) {
  State state;
  state["code"] = site.code;
  state["name"] = site.name;
  state["domain"] = site.domain;
  state["habitat"] = site.habitat;
  return state;
}

State AvuDict(const Avu& avu) {
  State state;
  state["attribute"] = avu.attribute;
  state["value"] = avu.value;
  state["unit"] = avu.unit;
  return state;
}

std::string StringField(const State& state, const char* key) {
  const auto it = state.find(key);
  if (it == state.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

// The start of every term.fits state, up to the scope.
State CandidateStart(const DatasetCard& card, std::string_view scope) {
  State state;
  state["card"] = CardHeader(card);
  state["scope"] = scope;
  return state;
}

void CandidateEnd(std::string_view aspect, const State& candidate,
                  int n_candidates, State* state) {
  (*state)["aspect"] = aspect;
  (*state)["candidate"] = candidate;
  (*state)["n_candidates"] = n_candidates;
}

}  // namespace

State CardHeader(const DatasetCard& card) {
  State sites = State::array();
  for (const SiteInfo& site : card.sites) sites.push_back(SiteDict(site));
  State columns = State::array();
  for (const ColumnInfo& column : card.columns) columns.push_back(column.name);
  State state;
  state["dataset"] = card.name();
  state["product_title"] = card.product_title;
  state["product_description"] = card.product_description;
  state["sites"] = std::move(sites);
  state["rows"] = card.rows;
  state["months"] = absl::StrCat(card.months_from, " to ", card.months_to);
  state["columns"] = std::move(columns);
  return state;
}

State ColumnDict(const ColumnInfo& column) {
  State state;
  state["name"] = column.name;
  state["description"] = column.description;
  state["dtype"] = column.dtype;
  state["unit"] = column.unit;
  state["profile"] = Cut(column.profile, kMaxProfile);
  return state;
}

State ColumnState(const DatasetCard& card, const ColumnInfo& column) {
  State state;
  state["card"] = CardHeader(card);
  state["column"] = ColumnDict(column);
  return state;
}

State ColumnState(const DatasetCard& card, const ColumnInfo& column,
                  std::string_view aspect) {
  State state = ColumnState(card, column);
  state["aspect"] = aspect;
  return state;
}

State OntologyState(const DatasetCard& card, const ColumnInfo& column,
                    std::string_view aspect, std::string_view ontology_id,
                    std::string_view option_text,
                    std::vector<std::string> aspects) {
  std::sort(aspects.begin(), aspects.end());
  State ontology;
  ontology["id"] = ontology_id;
  ontology["description"] = option_text;
  ontology["aspects"] = aspects;
  State state = ColumnState(card, column, aspect);
  state["ontology"] = std::move(ontology);
  return state;
}

State CandidateStateForColumn(const DatasetCard& card, const ColumnInfo& column,
                              std::string_view aspect, const State& candidate,
                              int n_candidates) {
  State state = CandidateStart(card, "column");
  state["column"] = ColumnDict(column);
  CandidateEnd(aspect, candidate, n_candidates, &state);
  return state;
}

State CandidateStateForSite(const DatasetCard& card, const SiteInfo& site,
                            std::string_view aspect, const State& candidate,
                            int n_candidates) {
  State state = CandidateStart(card, "site");
  state["site"] = SiteDict(site);
  CandidateEnd(aspect, candidate, n_candidates, &state);
  return state;
}

State CandidateStateForDataset(const DatasetCard& card, std::string_view aspect,
                               const State& candidate, int n_candidates) {
  State state = CandidateStart(card, "dataset");
  CandidateEnd(aspect, candidate, n_candidates, &state);
  return state;
}

State ChooserState(std::string_view ontology_id, std::string_view value,
                   const State& candidate, int n_candidates) {
  State term;
  term["label"] = StringField(candidate, "label");
  term["curie"] = StringField(candidate, "curie");
  term["description"] =
      Cut(StringField(candidate, "description"), kMaxDescription);
  State state;
  state["ontology_id"] = ontology_id;
  state["value"] = value;
  state["candidate"] = std::move(term);
  state["n_candidates"] = n_candidates;
  return state;
}

State ValueKindState(const DatasetCard& card, const ColumnInfo& column,
                     const State& candidate, std::string_view aspect) {
  State term;
  term["label"] = StringField(candidate, "label");
  term["curie"] = StringField(candidate, "curie");
  State state;
  state["card"] = CardHeader(card);
  state["column"] = ColumnDict(column);
  state["aspect"] = aspect;
  state["term"] = std::move(term);
  return state;
}

State AvuState(const DatasetCard& card, const Avu& avu, const State& candidate,
               std::string_view scope, std::string_view target,
               const std::vector<Avu>& siblings) {
  State term;
  term["label"] = StringField(candidate, "label");
  term["description"] =
      Cut(StringField(candidate, "description"), kMaxDescription);
  State kept = State::array();
  for (size_t i = 0; i < siblings.size() && i < kMaxSiblings; ++i) {
    kept.push_back(AvuDict(siblings[i]));
  }
  State state;
  state["card"] = CardHeader(card);
  state["avu"] = AvuDict(avu);
  state["term"] = std::move(term);
  state["scope"] = scope;
  state["target"] = target;
  state["siblings"] = std::move(kept);
  return state;
}

State DatasetOntologyState(const DatasetCard& card,
                           std::string_view option_text) {
  State state;
  state["card"] = CardHeader(card);
  state["ontology"] = option_text;
  return state;
}

State DataciteState(const DatasetCard* card, std::string_view vocabulary,
                    std::string_view text,
                    const std::optional<std::string>& value) {
  State state;
  state["vocabulary"] = vocabulary;
  state["text"] = Cut(text, kMaxDataciteText);
  if (card != nullptr) state["card"] = CardHeader(*card);
  if (value.has_value()) state["value"] = *value;
  return state;
}

std::string CanonicalJson(const State& state) {
  return decision::PyJsonCanonical(state);
}

std::string StateSha256(const State& state) {
  return util::Sha256Hex(CanonicalJson(state));
}

std::string RenderState(const State& state) {
  return decision::PyJsonDumpsIndent2(state);
}

}  // namespace mesa_anyjev::cards
