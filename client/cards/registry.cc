// The registry's tables (see registry.h); the strings are the reference's,
// byte for byte.
#include "client/cards/registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/cards/py_text.h"

namespace mesa_anyjev::cards {

const std::vector<std::string>& AspectOptions() {
  static const auto* options = new std::vector<std::string>{
      "taxon: the organisms observed, sampled or identified",
      "environment: the biome, habitat or environmental material at a site",
      "method: the sampling protocol, device, assay or processing step",
      "measurement: a measured quantity, quality or attribute of a thing",
      "unit: the unit of measure of a measured quantity",
      "data_type: the kind of record, identifier, dataset or information "
      "artifact",
      "location: a named place, region, plot or geographic feature",
      "other: none of the above or not an annotatable column",
  };
  return *options;
}

const std::vector<std::string>& Aspects() {
  static const auto* ids = new std::vector<std::string>{
      "taxon", "environment", "method",   "measurement",
      "unit",  "data_type",   "location", "other"};
  return *ids;
}

const std::vector<OntologyEntry>& OntologyRegistry() {
  static const auto* registry = new std::vector<OntologyEntry>{
      {"envo",
       "ENVO",
       "ENVO: environments, biomes, habitats and environmental materials",
       {"environment", "location", "measurement"}},
      {"ncbitaxon",
       "NCBITaxon",
       "NCBITaxon: organisms and taxa at every rank",
       {"taxon"}},
      {"pato",
       "PATO",
       "PATO: qualities and attributes of things (size, sex, age, colour)",
       {"measurement"}},
      {"uo",
       "UO",
       "UO: units of measurement (meter, degree Celsius, percent)",
       {"unit"}},
      {"obi",
       "OBI",
       "OBI: investigations, assays, protocols, devices and specimens",
       {"method", "measurement", "data_type"}},
      {"iao",
       "IAO",
       "IAO: information artifacts, data items, identifiers and documents",
       {"data_type", "method"}},
      {"pco",
       "PCO",
       "PCO: populations, communities and their collective properties",
       {"taxon", "measurement"}},
      {"bco",
       "BCO",
       "BCO: biological collections, sampling and identification processes",
       {"method"}},
      {"gaz",
       "GAZ",
       "GAZ: named geographic places and administrative regions",
       {"location", "environment"}},
      {"ro",
       "RO",
       "RO: relations between entities (part of, located in, participates in)",
       {"other"}},
      {"taxrank",
       "TAXRANK",
       "TAXRANK: taxonomic ranks (species, genus, family, order)",
       {"taxon", "data_type"}},
      {"genepio",
       "GENEPIO",
       "GENEPIO: sample collection, identification and metadata fields",
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
  const std::string wanted = PyLower(id);
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
  const std::string lowered = PyLower(prefix);
  for (const OntologyEntry& entry : OntologyRegistry()) {
    if (PyLower(entry.prefix) == lowered) return entry.prefix;
  }
  return PyUpper(prefix);
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

const std::vector<std::string>& ResourceTypeGeneral() {
  static const auto* v = new std::vector<std::string>{"Audiovisual",
                                                      "Book",
                                                      "BookChapter",
                                                      "Collection",
                                                      "ComputationalNotebook",
                                                      "ConferencePaper",
                                                      "ConferenceProceeding",
                                                      "DataPaper",
                                                      "Dataset",
                                                      "Dissertation",
                                                      "Event",
                                                      "Image",
                                                      "InteractiveResource",
                                                      "Journal",
                                                      "JournalArticle",
                                                      "Model",
                                                      "OutputManagementPlan",
                                                      "PeerReview",
                                                      "PhysicalObject",
                                                      "Preprint",
                                                      "Report",
                                                      "Service",
                                                      "Software",
                                                      "Sound",
                                                      "Standard",
                                                      "Text",
                                                      "Workflow",
                                                      "Other"};
  return *v;
}

const std::vector<std::string>& ContributorType() {
  static const auto* v = new std::vector<std::string>{"ContactPerson",
                                                      "DataCollector",
                                                      "DataCurator",
                                                      "DataManager",
                                                      "Distributor",
                                                      "Editor",
                                                      "HostingInstitution",
                                                      "Producer",
                                                      "ProjectLeader",
                                                      "ProjectManager",
                                                      "ProjectMember",
                                                      "RegistrationAgency",
                                                      "RegistrationAuthority",
                                                      "RelatedPerson",
                                                      "Researcher",
                                                      "ResearchGroup",
                                                      "RightsHolder",
                                                      "Sponsor",
                                                      "Supervisor",
                                                      "WorkPackageLeader",
                                                      "Other"};
  return *v;
}

const std::vector<std::string>& RelationType() {
  static const auto* v = new std::vector<std::string>{
      "IsCitedBy",       "Cites",          "IsSupplementTo", "IsSupplementedBy",
      "IsContinuedBy",   "Continues",      "IsDescribedBy",  "Describes",
      "IsPartOf",        "HasPart",        "IsReferencedBy", "References",
      "IsDocumentedBy",  "Documents",      "IsCompiledBy",   "Compiles",
      "IsVariantFormOf", "IsDerivedFrom",  "IsSourceOf",     "IsVersionOf",
      "HasVersion",      "IsNewVersionOf", "IsObsoletedBy"};
  return *v;
}

const std::vector<std::string>& DateType() {
  static const auto* v = new std::vector<std::string>{
      "Accepted", "Available", "Copyrighted", "Collected", "Created",
      "Issued",   "Submitted", "Updated",     "Valid",     "Withdrawn"};
  return *v;
}

const std::vector<std::string>& DescriptionType() {
  static const auto* v = new std::vector<std::string>{
      "Abstract",        "Methods",       "SeriesInformation",
      "TableOfContents", "TechnicalInfo", "Other"};
  return *v;
}

}  // namespace mesa_anyjev::cards
