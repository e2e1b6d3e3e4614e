// Ontology term candidates and where they come from (docs/annotate.md,
// Candidates files). The reference searches OLS live; mesa-anyjev has no
// network in the annotate path, so a CandidateSource answers from a candidates
// file of recorded search results (docs/annotate.md) and applies the
// reference's filters, merge and search log to them exactly as the live search
// does.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::cards {

struct Candidate {
  std::string label;
  std::string curie;
  std::string iri;
  std::string ontology_id;
  std::string description;
  std::vector<std::string> synonyms;
  bool has_children = false;
  int rank = 0;       // position in its query's result list
  std::string query;  // the query that found it ("children:<iri>" for kids)

  // {label, curie, ontology_id, description[:300], synonyms[:5],
  //  has_children}: the candidate as question states show it.
  nlohmann::ordered_json AsState() const;
};

// "http://purl.obolibrary.org/obo/<PrefixOf(curie)>_<local>"; "" when the
// CURIE has no ":".
std::string IriFor(std::string_view curie);

inline constexpr int kSearchSize = 20;     // hits read per query
inline constexpr int kChildrenSize = 10;   // children read per term
inline constexpr int kMaxCandidates = 12;  // ols.max_candidates default
inline constexpr std::string_view kBiomeIri =
    "http://purl.obolibrary.org/obo/ENVO_00000428";

// One recorded hit, as OLS returned it (before the filters).
struct RecordedHit {
  std::string label;
  std::string curie;
  std::string iri;
  std::string description;
  std::vector<std::string> synonyms;
  bool has_children = false;
  bool is_root = false;
};

// A recorded query: its hits in OLS order, or the error it raised.
struct RecordedSearch {
  std::vector<RecordedHit> hits;
  std::optional<std::string> error;
};

// Candidates after filters and merge, with the group's search log
// ({ontology_id, queries, raw_hits, filtered_out, [errors], n_candidates,
// [parent]}).
struct SearchResult {
  std::vector<Candidate> candidates;
  nlohmann::ordered_json log;
};

class CandidateSource {
 public:
  // Parses and validates a candidates file's JSON text; INVALID_ARGUMENT
  // names the offending field as a JSON path ("$.searches[2].hits[0].curie").
  static absl::StatusOr<CandidateSource> FromJson(std::string_view text);
  // Reads `path` and parses it; errors name the path.
  static absl::StatusOr<CandidateSource> Load(const std::string& path);

  // search_candidates(queries, ontology): the first 3 queries that are not
  // blank (stripped), the first kSearchSize hits of each, the filters per
  // query, merged by CURIE (first wins), sorted by (rank, curie), capped at
  // `max_candidates`. A query the file lacks found nothing (raw_hits 0); a
  // recorded error is logged as "<query>: <error>" and the search goes on.
  SearchResult SearchCandidates(const std::vector<std::string>& queries,
                                std::string_view ontology_id,
                                int max_candidates = kMaxCandidates) const;

  // biome_candidates(queries): SearchCandidates over the file's "biomes"
  // (descendants of ENVO:00000428 in envo); the log gains "parent".
  SearchResult BiomeCandidates(const std::vector<std::string>& queries,
                               int max_candidates = kMaxCandidates) const;

  // The filtered first kChildrenSize children of `curie`, tagged
  // "children:<iri>". NOT_FOUND when the file did not record the call (the
  // reference then keeps the parent).
  absl::StatusOr<std::vector<Candidate>> Children(std::string_view curie) const;

 private:
  SearchResult Search(const std::vector<std::string>& queries,
                      std::string_view ontology_id, bool biome,
                      int max_candidates) const;

  // (ontology_id, query) -> recorded search; biome searches use "" as id.
  std::map<std::pair<std::string, std::string>, RecordedSearch> searches_;
  std::map<std::string, std::vector<RecordedHit>> children_;
};

// The reference's filters over one query's hits, in order: curie, iri and
// label non-empty; lower(PrefixOf(curie)) == ontology_id (drops imported
// terms); no roots; no label starting "obsolete" in any case; first of each
// CURIE. `dropped` receives the CURIE of every hit left out.
std::vector<Candidate> FilterHits(const std::vector<RecordedHit>& hits,
                                  std::string_view ontology_id,
                                  std::string_view query,
                                  std::vector<std::string>* dropped);

}  // namespace mesa_anyjev::cards
