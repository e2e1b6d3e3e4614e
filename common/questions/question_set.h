// The reference's 17 fixed-key questions and the frozen vocabularies their
// options come from (docs/reference.md, Frozen vocabularies). Wording and
// options are part of each question's key: editing one string rotates that key
// and shows up as drift against questions.lock.json.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/decision/question.h"

namespace mesa_anyjev::questions {

// ASPECT_OPTIONS, in the order of the short ids ASPECTS.
inline constexpr std::array<std::string_view, 8> kAspectIds = {
    "taxon", "environment", "method",   "measurement",
    "unit",  "data_type",   "location", "other"};
inline constexpr std::array<std::string_view, 8> kAspectOptions = {
    "taxon: the organisms observed, sampled or identified",
    "environment: the biome, habitat or environmental material at a site",
    "method: the sampling protocol, device, assay or processing step",
    "measurement: a measured quantity, quality or attribute of a thing",
    "unit: the unit of measure of a measured quantity",
    "data_type: the kind of record, identifier, dataset or information "
    "artifact",
    "location: a named place, region, plot or geographic feature",
    "other: none of the above or not an annotatable column"};

// The option texts of ONTOLOGY_REGISTRY, in registry order (the option order
// of column.ontology).
inline constexpr std::array<std::string_view, 12> kOntologyOptions = {
    "ENVO: environments, biomes, habitats and environmental materials",
    "NCBITaxon: organisms and taxa at every rank",
    "PATO: qualities and attributes of things (size, sex, age, colour)",
    "UO: units of measurement (meter, degree Celsius, percent)",
    "OBI: investigations, assays, protocols, devices and specimens",
    "IAO: information artifacts, data items, identifiers and documents",
    "PCO: populations, communities and their collective properties",
    "BCO: biological collections, sampling and identification processes",
    "GAZ: named geographic places and administrative regions",
    "RO: relations between entities (part of, located in, participates in)",
    "TAXRANK: taxonomic ranks (species, genus, family, order)",
    "GENEPIO: sample collection, identification and metadata fields"};

// VALUE_KINDS: the options of avu.value_kind.
inline constexpr std::array<std::string_view, 4> kValueKinds = {
    "the term label", "the site code", "the column name",
    "the most frequent data value"};

// DataCite Metadata Schema 4.x vocabularies, in schema order.
// ResourceTypeGeneral (28 > the 26-option cap) is asked only as a noul per
// member, so it is no option list of any question.
inline constexpr std::array<std::string_view, 28> kResourceTypeGeneral = {
    "Audiovisual",
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
inline constexpr std::array<std::string_view, 21> kContributorTypes = {
    "ContactPerson",
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
inline constexpr std::array<std::string_view, 23> kRelationTypes = {
    "IsCitedBy",       "Cites",          "IsSupplementTo", "IsSupplementedBy",
    "IsContinuedBy",   "Continues",      "IsDescribedBy",  "Describes",
    "IsPartOf",        "HasPart",        "IsReferencedBy", "References",
    "IsDocumentedBy",  "Documents",      "IsCompiledBy",   "Compiles",
    "IsVariantFormOf", "IsDerivedFrom",  "IsSourceOf",     "IsVersionOf",
    "HasVersion",      "IsNewVersionOf", "IsObsoletedBy"};
inline constexpr std::array<std::string_view, 10> kDateTypes = {
    "Accepted", "Available", "Copyrighted", "Collected", "Created",
    "Issued",   "Submitted", "Updated",     "Valid",     "Withdrawn"};
inline constexpr std::array<std::string_view, 6> kDescriptionTypes = {
    "Abstract",        "Methods",       "SeriesInformation",
    "TableOfContents", "TechnicalInfo", "Other"};

// What a question's state is about.
enum class Scope { kDataset, kColumn, kSite, kAvu };
// "dataset", "column", "site", "avu".
const char* ScopeName(Scope scope);

// One question of the set: its id is the decision::Question's name.
struct QuestionEntry {
  decision::Question question;
  Scope scope;
  // The noul asked instead when a backend cannot take the choice's K.
  std::optional<std::string> twin;

  const std::string& id() const { return question.name(); }
};

class QuestionSet {
 public:
  // The reference's 17 questions, in the reference's order.
  static const QuestionSet& Reference();

  // Checks what the reference's tests assert of any set: non-empty unique
  // ids, unique keys, every twin defined and a noul, every choice with more
  // than 8 options twinned. INVALID_ARGUMENT names the question.
  static absl::StatusOr<QuestionSet> Create(std::vector<QuestionEntry> entries);

  const std::vector<QuestionEntry>& entries() const { return entries_; }
  // NOT_FOUND naming the id when it is not in the set, with the closest
  // id when one is near enough to be a typo ("did you mean 'term.fits'?").
  absl::StatusOr<const QuestionEntry*> Find(std::string_view id) const;
  // The id closest to a mistyped `id` (util::ClosestName: a few edits, or
  // a unique prefix); "" when none is near, or `id` is over 128 bytes.
  std::string Closest(std::string_view id) const;

 private:
  explicit QuestionSet(std::vector<QuestionEntry> entries)
      : entries_(std::move(entries)) {}

  std::vector<QuestionEntry> entries_;
};

// The largest choice asked without a twin: the gateway's max_choice_k.
inline constexpr int kMaxUntwinnedChoice = 8;

}  // namespace mesa_anyjev::questions
