// The registry's tables (see registry.h); the strings are the reference's,
// byte for byte.
#include "client/cards/registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/questions/question_set.h"
#include "common/text/py_text.h"

namespace mesa_anyjev::cards {

// The option texts are the question set's (they are part of question keys);
// the registry adds ids and allowed aspects.
const std::vector<std::string>& AspectOptions() {
  static const auto* options = new std::vector<std::string>(
      questions::kAspectOptions.begin(), questions::kAspectOptions.end());
  return *options;
}

const std::vector<std::string>& Aspects() {
  static const auto* ids = new std::vector<std::string>(
      questions::kAspectIds.begin(), questions::kAspectIds.end());
  return *ids;
}

const std::vector<OntologyEntry>& OntologyRegistry() {
  static const auto* registry = new std::vector<OntologyEntry>{
      {"envo",
       "ENVO",
       std::string(questions::kOntologyOptions[0]),
       {"environment", "location", "measurement"}},
      {"ncbitaxon",
       "NCBITaxon",
       std::string(questions::kOntologyOptions[1]),
       {"taxon"}},
      {"pato",
       "PATO",
       std::string(questions::kOntologyOptions[2]),
       {"measurement"}},
      {"uo", "UO", std::string(questions::kOntologyOptions[3]), {"unit"}},
      {"obi",
       "OBI",
       std::string(questions::kOntologyOptions[4]),
       {"method", "measurement", "data_type"}},
      {"iao",
       "IAO",
       std::string(questions::kOntologyOptions[5]),
       {"data_type", "method"}},
      {"pco",
       "PCO",
       std::string(questions::kOntologyOptions[6]),
       {"taxon", "measurement"}},
      {"bco", "BCO", std::string(questions::kOntologyOptions[7]), {"method"}},
      {"gaz",
       "GAZ",
       std::string(questions::kOntologyOptions[8]),
       {"location", "environment"}},
      {"ro", "RO", std::string(questions::kOntologyOptions[9]), {"other"}},
      {"taxrank",
       "TAXRANK",
       std::string(questions::kOntologyOptions[10]),
       {"taxon", "data_type"}},
      {"genepio",
       "GENEPIO",
       std::string(questions::kOntologyOptions[11]),
       {"method", "data_type"}},
  };
  return *registry;
}

std::vector<std::string> RegistryIds() {
  std::vector<std::string> ids;
  for (const OntologyEntry& entry : OntologyRegistry()) ids.push_back(entry.id);
  return ids;
}

absl::StatusOr<const OntologyEntry*> Entry(std::string_view id) {
  const std::string wanted = text::PyLower(id);
  for (const OntologyEntry& entry : OntologyRegistry()) {
    if (entry.id == wanted) return &entry;
  }
  return absl::NotFoundError(
      absl::StrCat("'", std::string(id), "' is not in the ontology registry"));
}

std::string PrefixOf(std::string_view curie) {
  const size_t colon = curie.find(':');
  if (colon == std::string_view::npos) return "";
  const std::string_view prefix = curie.substr(0, colon);
  const std::string lowered = text::PyLower(prefix);
  for (const OntologyEntry& entry : OntologyRegistry()) {
    if (text::PyLower(entry.prefix) == lowered) return entry.prefix;
  }
  return text::PyUpper(prefix);
}

std::vector<std::string> AllowedForAspect(std::string_view aspect) {
  if (aspect == "other") return RegistryIds();
  std::vector<std::string> ids;
  for (const OntologyEntry& entry : OntologyRegistry()) {
    if (std::find(entry.aspects.begin(), entry.aspects.end(), aspect) !=
        entry.aspects.end()) {
      ids.push_back(entry.id);
    }
  }
  return ids;
}

std::vector<bool> MaskForAspect(
    std::string_view aspect,
    const std::optional<std::vector<std::string>>& in_play) {
  const std::vector<std::string> allowed = AllowedForAspect(aspect);
  std::vector<bool> mask;
  for (const OntologyEntry& entry : OntologyRegistry()) {
    bool on =
        std::find(allowed.begin(), allowed.end(), entry.id) != allowed.end();
    if (on && in_play.has_value()) {
      on = std::find(in_play->begin(), in_play->end(), entry.id) !=
           in_play->end();
    }
    mask.push_back(on);
  }
  return mask;
}

const std::vector<std::string>& ValueKinds() {
  static const auto* kinds = new std::vector<std::string>{
      std::string(kTermLabel), std::string(kSiteCode), std::string(kColumnName),
      std::string(kTopValue)};
  return *kinds;
}

}  // namespace mesa_anyjev::cards
