// The static planner's query rules (docs/annotate.md):
// search queries from column names, descriptions and units, biome queries
// from site habitats and taxon queries from product text. annotate always
// uses the column rule, and the site and taxon rules when the plan has none.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/cards/card.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::cards {

// Splits at lower/digit -> Upper and Upper -> Upper+lower boundaries (ASCII
// letters) and joins the lower-cased words with spaces:
// "pointCountMinute" -> "point count minute", "siteID" -> "site id".
std::string SplitCamel(std::string_view name);

// Up to 3: the split name ("_" -> " "); the description up to its first
// ';', '.' or '(' (stripped, 80 code points) unless it equals the name query
// ignoring case; the unit.
std::vector<std::string> QueriesForColumn(const ColumnInfo& column);

// HABITAT_QUERIES for each key found in the lower-cased habitat (deduped,
// first 3); else "<habitat lower> biome".
std::vector<std::string> HabitatQueries(const SiteInfo& site);

// PRODUCT_TAXA for each key found in lower(title + " " + description)
// (deduped, first 3).
std::vector<std::string> TaxonQueries(const DatasetCard& card);

struct ColumnHint {
  std::optional<bool> annotate;       // false for identifiers, else null
  std::optional<std::string> aspect;  // the static plan sets none
  std::optional<std::string> ontology;
  std::vector<std::string> queries;
};

struct StaticPlan {
  std::vector<std::string> ontologies;  // all 12 registry ids
  std::vector<std::pair<std::string, ColumnHint>> columns;  // card order
  std::vector<std::pair<std::string, std::vector<std::string>>> sites;
  std::vector<std::string> taxon_queries;
  std::string notes;

  // {planner "static", model null, fallback false, ontologies, columns
  //  {name: {annotate, aspect, ontology, queries}}, sites {code:
  //  {environment_queries}}, taxon_queries, notes}.
  nlohmann::ordered_json ToJson() const;
};

StaticPlan MakeStaticPlan(const DatasetCard& card);

}  // namespace mesa_anyjev::cards
