// Candidates from a recorded-search file (see candidates.h and
// docs/annotate.md for the file format).
#include "client/cards/candidates.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/cards/registry.h"
#include "common/status/status_macros.h"
#include "common/text/py_text.h"
#include "common/text/strict_json.h"
#include "common/text/utf8.h"

namespace mesa_anyjev::cards {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxDescription = 300;
constexpr size_t kMaxSynonyms = 5;
constexpr size_t kQueriesPerSearch = 3;

absl::Status Bad(const std::string& path, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("candidates file: ", path, ": ", std::string(what)));
}

absl::Status AllowKeys(const Json& object, const std::string& path,
                       std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return Bad(absl::StrCat(path, ".", std::string(key)), "unknown field");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RequiredString(const Json& object,
                                           const std::string& path,
                                           std::string_view key) {
  const std::string field = absl::StrCat(path, ".", std::string(key));
  const auto it = object.find(key);
  if (it == object.end()) return Bad(field, "missing");
  if (!it->is_string()) return Bad(field, "expected a string");
  return it->get<std::string>();
}

absl::StatusOr<RecordedHit> ParseHit(const Json& value,
                                     const std::string& path) {
  if (!value.is_object()) return Bad(path, "expected an object");
  RETURN_IF_ERROR(AllowKeys(value, path,
                            {"label", "curie", "iri", "description", "synonyms",
                             "has_children", "is_root"}));
  RecordedHit hit;
  ASSIGN_OR_RETURN(hit.label, RequiredString(value, path, "label"));
  ASSIGN_OR_RETURN(hit.curie, RequiredString(value, path, "curie"));
  ASSIGN_OR_RETURN(hit.iri, RequiredString(value, path, "iri"));
  if (value.contains("description")) {
    ASSIGN_OR_RETURN(hit.description,
                     RequiredString(value, path, "description"));
  }
  if (const auto it = value.find("synonyms"); it != value.end()) {
    if (!it->is_array()) return Bad(path + ".synonyms", "expected a list");
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string()) {
        return Bad(absl::StrCat(path, ".synonyms[", i, "]"),
                   "expected a string");
      }
      hit.synonyms.push_back((*it)[i].get<std::string>());
    }
  }
  for (const auto& [key, field] :
       {std::pair<std::string_view, bool*>{"has_children", &hit.has_children},
        {"is_root", &hit.is_root}}) {
    if (const auto it = value.find(key); it != value.end()) {
      if (!it->is_boolean()) {
        return Bad(absl::StrCat(path, ".", std::string(key)),
                   "expected true or false");
      }
      *field = it->get<bool>();
    }
  }
  return hit;
}

absl::StatusOr<std::vector<RecordedHit>> ParseHits(const Json& value,
                                                   const std::string& path) {
  if (!value.is_array()) return Bad(path, "expected a list of hits");
  std::vector<RecordedHit> hits;
  for (size_t i = 0; i < value.size(); ++i) {
    ASSIGN_OR_RETURN(RecordedHit hit,
                     ParseHit(value[i], absl::StrCat(path, "[", i, "]")));
    hits.push_back(std::move(hit));
  }
  return hits;
}

// One entry of "searches" (with_ontology) or "biomes".
absl::StatusOr<std::pair<std::pair<std::string, std::string>, RecordedSearch>>
ParseSearch(const Json& value, const std::string& path, bool with_ontology) {
  if (!value.is_object()) return Bad(path, "expected an object");
  if (with_ontology) {
    RETURN_IF_ERROR(
        AllowKeys(value, path, {"ontology_id", "query", "hits", "error"}));
  } else {
    RETURN_IF_ERROR(AllowKeys(value, path, {"query", "hits", "error"}));
  }
  std::string ontology_id;
  if (with_ontology) {
    ASSIGN_OR_RETURN(ontology_id, RequiredString(value, path, "ontology_id"));
    if (!Entry(ontology_id).ok() || text::PyLower(ontology_id) != ontology_id) {
      return Bad(path + ".ontology_id",
                 absl::StrCat("'", ontology_id,
                              "' is not a registry id (lower case)"));
    }
  }
  ASSIGN_OR_RETURN(std::string query, RequiredString(value, path, "query"));
  if (text::PyStrip(query) != query || query.empty()) {
    return Bad(path + ".query", "must be non-empty and stripped");
  }
  RecordedSearch search;
  const bool has_hits = value.contains("hits");
  const bool has_error = value.contains("error");
  if (has_hits == has_error) {
    return Bad(path, "needs exactly one of \"hits\" and \"error\"");
  }
  if (has_hits) {
    ASSIGN_OR_RETURN(search.hits, ParseHits(value["hits"], path + ".hits"));
  } else {
    ASSIGN_OR_RETURN(std::string error, RequiredString(value, path, "error"));
    search.error = std::move(error);
  }
  return std::make_pair(std::make_pair(ontology_id, query), std::move(search));
}

}  // namespace

nlohmann::ordered_json Candidate::AsState() const {
  nlohmann::ordered_json state;
  state["label"] = label;
  state["curie"] = curie;
  state["ontology_id"] = ontology_id;
  state["description"] =
      std::string(text::CodePointPrefix(description, kMaxDescription));
  nlohmann::ordered_json kept = nlohmann::ordered_json::array();
  for (size_t i = 0; i < synonyms.size() && i < kMaxSynonyms; ++i) {
    kept.push_back(synonyms[i]);
  }
  state["synonyms"] = std::move(kept);
  state["has_children"] = has_children;
  return state;
}

std::string IriFor(std::string_view curie) {
  const size_t colon = curie.find(':');
  if (colon == std::string_view::npos) return "";
  return absl::StrCat("http://purl.obolibrary.org/obo/", PrefixOf(curie), "_",
                      std::string(curie.substr(colon + 1)));
}

std::vector<Candidate> FilterHits(const std::vector<RecordedHit>& hits,
                                  std::string_view ontology_id,
                                  std::string_view query,
                                  std::vector<std::string>* dropped) {
  std::vector<Candidate> kept;
  std::set<std::string> seen;
  for (size_t i = 0; i < hits.size(); ++i) {
    const RecordedHit& hit = hits[i];
    const bool keep =
        !hit.curie.empty() && !hit.iri.empty() && !hit.label.empty() &&
        text::PyLower(PrefixOf(hit.curie)) == ontology_id && !hit.is_root &&
        text::PyLower(hit.label).rfind("obsolete", 0) != 0 &&
        seen.insert(hit.curie).second;
    if (!keep) {
      dropped->push_back(hit.curie);
      continue;
    }
    kept.push_back({hit.label, hit.curie, hit.iri, std::string(ontology_id),
                    hit.description, hit.synonyms, hit.has_children,
                    static_cast<int>(i), std::string(query)});
  }
  return kept;
}

absl::StatusOr<CandidateSource> CandidateSource::FromJson(
    std::string_view text) {
  if (const int64_t bad = text::FirstInvalidUtf8(text); bad >= 0) {
    return Bad("$", absl::StrCat("invalid UTF-8 at byte ", bad));
  }
  auto parsed = text::ParseStrictJson(text, {});
  if (!parsed.ok()) return Bad("$", std::string(parsed.status().message()));
  const Json root = *std::move(parsed);
  if (!root.is_object()) return Bad("$", "expected an object");
  RETURN_IF_ERROR(AllowKeys(root, "$", {"searches", "biomes", "children"}));
  CandidateSource source;
  for (const auto& [key, with_ontology] :
       {std::pair<std::string, bool>{"searches", true}, {"biomes", false}}) {
    if (!root.contains(key)) continue;
    const Json& list = root[key];
    const std::string path = "$." + key;
    if (!list.is_array()) return Bad(path, "expected a list");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string item_path = absl::StrCat(path, "[", i, "]");
      ASSIGN_OR_RETURN(auto entry,
                       ParseSearch(list[i], item_path, with_ontology));
      if (!source.searches_.insert(std::move(entry)).second) {
        return Bad(item_path, "repeats an earlier query");
      }
    }
  }
  if (root.contains("children")) {
    const Json& children = root["children"];
    if (!children.is_object()) return Bad("$.children", "expected an object");
    for (const auto& [curie, hits] : children.items()) {
      const std::string path = absl::StrCat("$.children[\"", curie, "\"]");
      if (curie.find(':') == std::string::npos) {
        return Bad(path, "key is not a CURIE");
      }
      ASSIGN_OR_RETURN(source.children_[curie], ParseHits(hits, path));
    }
  }
  return source;
}

absl::StatusOr<CandidateSource> CandidateSource::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read candidates file ", path));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  absl::StatusOr<CandidateSource> source = FromJson(bytes.str());
  if (!source.ok()) {
    return absl::Status(source.status().code(),
                        absl::StrCat(path, ": ", source.status().message()));
  }
  return source;
}

SearchResult CandidateSource::Search(const std::vector<std::string>& queries,
                                     std::string_view ontology_id, bool biome,
                                     int max_candidates) const {
  SearchResult result;
  nlohmann::ordered_json used = nlohmann::ordered_json::array();
  nlohmann::ordered_json raw_hits = nlohmann::ordered_json::object();
  nlohmann::ordered_json errors = nlohmann::ordered_json::array();
  std::vector<std::string> filtered_out;
  std::vector<Candidate> merged;
  std::set<std::string> merged_curies;
  size_t taken = 0;
  for (const std::string& raw_query : queries) {
    const std::string query(text::PyStrip(raw_query));
    if (query.empty()) continue;
    if (taken++ == kQueriesPerSearch) break;
    const auto it =
        searches_.find({biome ? "" : std::string(ontology_id), query});
    if (it != searches_.end() && it->second.error.has_value()) {
      errors.push_back(absl::StrCat(query, ": ", *it->second.error));
      continue;
    }
    std::vector<RecordedHit> hits;
    if (it != searches_.end()) {
      const auto& all = it->second.hits;
      hits.assign(all.begin(),
                  all.begin() + std::min<size_t>(all.size(), kSearchSize));
    }
    used.push_back(query);
    raw_hits[query] = hits.size();
    std::vector<std::string> dropped;
    for (Candidate& candidate :
         FilterHits(hits, ontology_id, query, &dropped)) {
      if (merged_curies.insert(candidate.curie).second) {
        merged.push_back(std::move(candidate));
      }
    }
    std::sort(dropped.begin(), dropped.end());
    filtered_out.insert(filtered_out.end(), dropped.begin(), dropped.end());
  }
  std::stable_sort(
      merged.begin(), merged.end(), [](const Candidate& a, const Candidate& b) {
        return std::tie(a.rank, a.curie) < std::tie(b.rank, b.curie);
      });
  if (max_candidates >= 0 &&
      merged.size() > static_cast<size_t>(max_candidates)) {
    merged.resize(static_cast<size_t>(max_candidates));
  }
  result.log["ontology_id"] = ontology_id;
  result.log["queries"] = std::move(used);
  result.log["raw_hits"] = std::move(raw_hits);
  result.log["filtered_out"] = filtered_out;
  if (!errors.empty()) result.log["errors"] = std::move(errors);
  result.log["n_candidates"] = merged.size();
  if (biome) result.log["parent"] = kBiomeIri;
  result.candidates = std::move(merged);
  return result;
}

SearchResult CandidateSource::SearchCandidates(
    const std::vector<std::string>& queries, std::string_view ontology_id,
    int max_candidates) const {
  return Search(queries, ontology_id, /*biome=*/false, max_candidates);
}

SearchResult CandidateSource::BiomeCandidates(
    const std::vector<std::string>& queries, int max_candidates) const {
  return Search(queries, "envo", /*biome=*/true, max_candidates);
}

absl::StatusOr<std::vector<Candidate>> CandidateSource::Children(
    std::string_view curie) const {
  const auto it = children_.find(std::string(curie));
  if (it == children_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "candidates file has no children of ", std::string(curie)));
  }
  const auto& all = it->second;
  const std::vector<RecordedHit> hits(
      all.begin(), all.begin() + std::min<size_t>(all.size(), kChildrenSize));
  std::vector<std::string> dropped;
  return FilterHits(hits, text::PyLower(PrefixOf(curie)),
                    absl::StrCat("children:", IriFor(curie)), &dropped);
}

}  // namespace mesa_anyjev::cards
