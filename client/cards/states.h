// Question states: plain JSON dicts with a fixed key order, the
// card header first in every state that has one, so rendered prompts share a
// prefix. The hosted SQL rebuilds the same dicts, so order and cuts matter.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/cards/avu.h"
#include "client/cards/card.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::cards {

using State = nlohmann::ordered_json;

// Cuts, in code points as Python slices them.
inline constexpr size_t kMaxProfile = 300;
inline constexpr size_t kMaxDescription = 300;
inline constexpr size_t kMaxSiblings = 25;
inline constexpr size_t kMaxDataciteText = 1200;

// {dataset, product_title, product_description, sites [{code, name, domain,
// habitat}], rows, months "<from> to <to>", columns [names]}.
State CardHeader(const DatasetCard& card);
// {name, description, dtype, unit, profile[:300]}.
State ColumnDict(const ColumnInfo& column);
// {card, column}; with `aspect`, {card, column, aspect} (column.ontology).
State ColumnState(const DatasetCard& card, const ColumnInfo& column);
State ColumnState(const DatasetCard& card, const ColumnInfo& column,
                  std::string_view aspect);
// {card, column, aspect, ontology {id, description, aspects (sorted)}}.
State OntologyState(const DatasetCard& card, const ColumnInfo& column,
                    std::string_view aspect, std::string_view ontology_id,
                    std::string_view option_text,
                    std::vector<std::string> aspects);

// term.fits: {card, scope, column | site, aspect, candidate, n_candidates};
// the dataset scope has neither column nor site. `candidate` is
// Candidate::AsState().
State CandidateStateForColumn(const DatasetCard& card, const ColumnInfo& column,
                              std::string_view aspect, const State& candidate,
                              int n_candidates);
State CandidateStateForSite(const DatasetCard& card, const SiteInfo& site,
                            std::string_view aspect, const State& candidate,
                            int n_candidates);
State CandidateStateForDataset(const DatasetCard& card, std::string_view aspect,
                               const State& candidate, int n_candidates);

// term.fits.chooser: {ontology_id, value, candidate {label, curie,
// description[:300]}, n_candidates}; no card.
State ChooserState(std::string_view ontology_id, std::string_view value,
                   const State& candidate, int n_candidates);
// avu.value_kind: {card, column, aspect, term {label, curie}}.
State ValueKindState(const DatasetCard& card, const ColumnInfo& column,
                     const State& candidate, std::string_view aspect);
// avu.keep: {card, avu, term {label, description[:300]}, scope, target,
// siblings (first 25 {attribute, value, unit})}.
State AvuState(const DatasetCard& card, const Avu& avu, const State& candidate,
               std::string_view scope, std::string_view target,
               const std::vector<Avu>& siblings);
// dataset.ontology_applies: {card, ontology: <option text>}.
State DatasetOntologyState(const DatasetCard& card,
                           std::string_view option_text);
// DataCite: {vocabulary, text[:1200], [card], [value]}.
State DataciteState(const DatasetCard* card, std::string_view vocabulary,
                    std::string_view text,
                    const std::optional<std::string>& value = std::nullopt);

// SHA-256 hex of json.dumps(state, sort_keys=True, separators=(",", ":"),
// ensure_ascii=False): independent of key order at every depth.
std::string StateSha256(const State& state);
// That JSON text itself.
std::string CanonicalJson(const State& state);
// json.dumps(state, indent=2, ensure_ascii=False): the rendered state.
std::string RenderState(const State& state);

}  // namespace mesa_anyjev::cards
