// Static query rules (see static_rules.h).
#include "client/cards/static_rules.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/cards/card.h"
#include "client/cards/registry.h"
#include "common/text/json_null.h"
#include "common/text/py_text.h"

namespace mesa_anyjev::cards {
namespace {

constexpr size_t kMaxQueries = 3;
constexpr size_t kMaxDescriptionQuery = 80;

struct KeyedQueries {
  std::string_view key;
  std::vector<std::string_view> queries;
};

const std::vector<KeyedQueries>& HabitatTable() {
  static const auto* table = new std::vector<KeyedQueries>{
      {"deciduous",
       {"temperate deciduous forest biome",
        "temperate broadleaf forest biome"}},
      {"mixed forest", {"temperate mixed forest biome", "mixed forest biome"}},
      {"desert", {"desert biome", "xeric shrubland biome"}},
      {"shrubland", {"shrubland biome"}},
      {"grassland", {"grassland biome", "desert grassland"}},
      {"wetland", {"wetland biome"}},
      {"tundra", {"tundra biome"}},
      {"coniferous", {"temperate coniferous forest biome"}},
  };
  return *table;
}

const std::vector<KeyedQueries>& ProductTaxa() {
  static const auto* table = new std::vector<KeyedQueries>{
      {"landbird", {"Aves"}},
      {"bird", {"Aves"}},
      {"beetle", {"Carabidae", "Coleoptera"}},
      {"mosquito", {"Culicidae"}},
      {"tick", {"Ixodida"}},
      {"small mammal", {"Mammalia", "Rodentia"}},
      {"plant", {"Viridiplantae"}},
      {"fish", {"Actinopterygii"}},
  };
  return *table;
}

// For each key found in `text`, its queries, deduped, first 3.
std::vector<std::string> Lookup(const std::vector<KeyedQueries>& table,
                                const std::string& text) {
  std::vector<std::string> out;
  for (const KeyedQueries& row : table) {
    if (text.find(row.key) == std::string::npos) continue;
    for (const std::string_view query : row.queries) {
      if (std::find(out.begin(), out.end(), query) == out.end()) {
        out.emplace_back(query);
      }
    }
  }
  if (out.size() > kMaxQueries) out.resize(kMaxQueries);
  return out;
}

bool IsLowerOrDigit(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsLower(char c) { return c >= 'a' && c <= 'z'; }

}  // namespace

std::string SplitCamel(std::string_view name) {
  std::string spaced;
  for (size_t i = 0; i < name.size(); ++i) {
    if (i > 0) {
      const bool lower_to_upper =
          IsLowerOrDigit(name[i - 1]) && IsUpper(name[i]);
      const bool acronym_end = IsUpper(name[i - 1]) && IsUpper(name[i]) &&
                               i + 1 < name.size() && IsLower(name[i + 1]);
      if (lower_to_upper || acronym_end) spaced.push_back(' ');
    }
    spaced.push_back(name[i]);
  }
  std::string joined;
  for (const std::string_view word : text::PySplitWhitespace(spaced)) {
    if (!joined.empty()) joined.push_back(' ');
    joined.append(text::PyLower(word));
  }
  return joined;
}

std::vector<std::string> QueriesForColumn(const ColumnInfo& column) {
  std::vector<std::string> queries;
  const std::string name_query =
      absl::StrReplaceAll(SplitCamel(column.name), {{"_", " "}});
  if (!name_query.empty()) queries.push_back(name_query);
  const std::string_view description = column.description;
  const std::string_view head =
      description.substr(0, description.find_first_of(";.("));
  const std::string description_query(
      text::CodePointPrefix(text::PyStrip(head), kMaxDescriptionQuery));
  if (!description_query.empty() &&
      text::PyLower(description_query) != text::PyLower(name_query)) {
    queries.push_back(description_query);
  }
  if (!column.unit.empty()) queries.push_back(column.unit);
  if (queries.size() > kMaxQueries) queries.resize(kMaxQueries);
  return queries;
}

std::vector<std::string> HabitatQueries(const SiteInfo& site) {
  const std::string habitat = text::PyLower(site.habitat);
  std::vector<std::string> queries = Lookup(HabitatTable(), habitat);
  if (queries.empty()) queries.push_back(absl::StrCat(habitat, " biome"));
  return queries;
}

std::vector<std::string> TaxonQueries(const DatasetCard& card) {
  return Lookup(ProductTaxa(),
                text::PyLower(absl::StrCat(card.product_title, " ",
                                           card.product_description)));
}

nlohmann::ordered_json StaticPlan::ToJson() const {
  nlohmann::ordered_json column_hints = nlohmann::ordered_json::object();
  for (const auto& [name, hint] : columns) {
    nlohmann::ordered_json entry;
    entry["annotate"] = hint.annotate.has_value()
                            ? nlohmann::ordered_json(*hint.annotate)
                            : nlohmann::ordered_json();
    entry["aspect"] = text::OrNull(hint.aspect);
    entry["ontology"] = text::OrNull(hint.ontology);
    entry["queries"] = hint.queries;
    column_hints[name] = std::move(entry);
  }
  nlohmann::ordered_json site_hints = nlohmann::ordered_json::object();
  for (const auto& [code, queries] : sites) {
    site_hints[code]["environment_queries"] = queries;
  }
  nlohmann::ordered_json plan;
  plan["planner"] = "static";
  plan["model"] = nullptr;
  plan["fallback"] = false;
  plan["ontologies"] = ontologies;
  plan["columns"] = std::move(column_hints);
  plan["sites"] = std::move(site_hints);
  plan["taxon_queries"] = taxon_queries;
  plan["notes"] = notes;
  return plan;
}

StaticPlan MakeStaticPlan(const DatasetCard& card) {
  StaticPlan plan;
  plan.ontologies = RegistryIds();
  for (const ColumnInfo& column : card.columns) {
    ColumnHint hint;
    if (IsIdentifier(column)) hint.annotate = false;
    hint.queries = QueriesForColumn(column);
    plan.columns.emplace_back(column.name, std::move(hint));
  }
  for (const SiteInfo& site : card.sites) {
    plan.sites.emplace_back(site.code, HabitatQueries(site));
  }
  plan.taxon_queries = TaxonQueries(card);
  plan.notes =
      "static rules: every registry ontology in play; queries from column "
      "names, descriptions and units";
  return plan;
}

}  // namespace mesa_anyjev::cards
