// The frozen vocabularies and the ontology registry. Every string
// is part of an option list and so of a question key: editing one rotates
// the key.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace mesa_anyjev::cards {

// ASPECT_OPTIONS and their short ids (ASPECTS), in option order.
const std::vector<std::string>& AspectOptions();
const std::vector<std::string>& Aspects();

struct OntologyEntry {
  std::string id;                    // lower case, e.g. "ncbitaxon"
  std::string prefix;                // CURIE prefix in its canonical case
  std::string option_text;           // the column.ontology option
  std::vector<std::string> aspects;  // allowed aspects, in table order
};

// ONTOLOGY_REGISTRY in option order (12 entries).
const std::vector<OntologyEntry>& OntologyRegistry();
// The 12 ids in registry order.
std::vector<std::string> RegistryIds();

// The entry whose id equals lower(id); NOT_FOUND otherwise.
absl::StatusOr<const OntologyEntry*> Entry(std::string_view id);

// "" without a ":"; else the prefix in the registry's case, or upper-cased.
std::string PrefixOf(std::string_view curie);

// Every id for "other"; else the ids whose aspects hold `aspect`, in
// registry order.
std::vector<std::string> AllowedForAspect(std::string_view aspect);

// In registry order: id allowed for `aspect` (and in `in_play` when given).
std::vector<bool> MaskForAspect(
    std::string_view aspect,
    const std::optional<std::vector<std::string>>& in_play = std::nullopt);

// VALUE_KINDS, the options of avu.value_kind.
const std::vector<std::string>& ValueKinds();
inline constexpr std::string_view kTermLabel = "the term label";
inline constexpr std::string_view kSiteCode = "the site code";
inline constexpr std::string_view kColumnName = "the column name";
inline constexpr std::string_view kTopValue = "the most frequent data value";

}  // namespace mesa_anyjev::cards
