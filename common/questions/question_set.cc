// The reference's question set (see question_set.h). Wording is the
// reference's, string for string, since every string is part of a key; the
// eight keys of the reference's published lock are checked by the unit
// tests.
#include "common/questions/question_set.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/text/utf8.h"
#include "common/util/enum_names.h"
#include "common/util/suggest.h"

namespace mesa_anyjev::questions {
namespace {

using decision::Question;

template <size_t N>
std::vector<std::string> Options(const std::array<std::string_view, N>& in) {
  return std::vector<std::string>(in.begin(), in.end());
}

QuestionEntry Noul(const char* id, Scope scope, const char* text) {
  return QuestionEntry{Question::Noul(text, id), scope, std::nullopt};
}

// The texts and options below are fixed and valid, so a failure is a
// programming error caught by every test run.
QuestionEntry Choice(const char* id, Scope scope, const char* text,
                     std::vector<std::string> options,
                     std::optional<std::string> twin = std::nullopt) {
  return QuestionEntry{*Question::Choice(text, std::move(options), id), scope,
                       std::move(twin)};
}

std::vector<QuestionEntry> ReferenceEntries() {
  std::vector<QuestionEntry> q;
  q.push_back(Noul("column.annotate", Scope::kColumn,
                   "Should this column receive an ontology-grounded "
                   "annotation? Answer No for record identifiers, internal "
                   "codes, timestamps and bookkeeping fields."));
  q.push_back(Choice("column.aspect", Scope::kColumn,
                     "Which aspect of the dataset does this column describe?",
                     Options(kAspectOptions)));
  q.push_back(Choice("column.ontology", Scope::kColumn,
                     "Which ontology should be searched for a term that "
                     "annotates this column?",
                     Options(kOntologyOptions), "column.ontology_fits"));
  q.push_back(Noul("column.ontology_fits", Scope::kColumn,
                   "Does the ontology described in the state contain the "
                   "right kind of term for annotating this column?"));
  q.push_back(Noul("term.fits", Scope::kColumn,
                   "Is the candidate ontology term a correct annotation for "
                   "the described column, site or dataset: the right concept "
                   "at an appropriate specificity, not merely related?"));
  q.push_back(Noul("term.fits.chooser", Scope::kColumn,
                   "Is the candidate ontology term the correct term for the "
                   "value the user wants to annotate with: the right concept "
                   "at an appropriate specificity, not merely related?"));
  q.push_back(Choice("avu.value_kind", Scope::kAvu,
                     "What should the AVU value be?", Options(kValueKinds)));
  q.push_back(Noul("avu.keep", Scope::kAvu,
                   "Given the annotations already selected for this dataset, "
                   "does this annotation add correct, non-redundant "
                   "information worth keeping?"));
  // M5.
  q.push_back(Noul("dataset.ontology_applies", Scope::kDataset,
                   "Does this ontology apply to the dataset as a whole: would "
                   "at least one of its terms correctly describe what the "
                   "dataset measures, observes, samples or records?"));
  q.push_back(Noul("datacite.resource_type_fits", Scope::kDataset,
                   "Is the DataCite ResourceTypeGeneral value the right "
                   "general type for this resource?"));
  q.push_back(Choice("datacite.contributor_type", Scope::kDataset,
                     "Which DataCite ContributorType best describes this "
                     "contributor's role?",
                     Options(kContributorTypes),
                     "datacite.contributor_type_fits"));
  q.push_back(Noul("datacite.contributor_type_fits", Scope::kDataset,
                   "Is the DataCite ContributorType value the right role for "
                   "this contributor?"));
  q.push_back(Choice("datacite.relation_type", Scope::kDataset,
                     "Which DataCite RelationType describes how this resource "
                     "relates to the related identifier?",
                     Options(kRelationTypes), "datacite.relation_type_fits"));
  q.push_back(Noul("datacite.relation_type_fits", Scope::kDataset,
                   "Is the DataCite RelationType value the right relation "
                   "from this resource to the related identifier?"));
  q.push_back(Choice("datacite.date_type", Scope::kDataset,
                     "Which DataCite DateType describes this date?",
                     Options(kDateTypes), "datacite.date_type_fits"));
  q.push_back(Noul("datacite.date_type_fits", Scope::kDataset,
                   "Is the DataCite DateType value the right type for this "
                   "date?"));
  q.push_back(Choice("datacite.description_type", Scope::kDataset,
                     "Which DataCite DescriptionType describes this "
                     "description text?",
                     Options(kDescriptionTypes)));
  return q;
}

constexpr util::EnumName<Scope> kScopeNames[] = {{Scope::kDataset, "dataset"},
                                                 {Scope::kColumn, "column"},
                                                 {Scope::kSite, "site"},
                                                 {Scope::kAvu, "avu"}};
static_assert(util::NamesEvery(kScopeNames, Scope::kAvu));

}  // namespace

const char* ScopeName(Scope scope) { return util::NameIn(kScopeNames, scope); }

const QuestionSet& QuestionSet::Reference() {
  static const QuestionSet* const kSet = [] {
    auto set = Create(ReferenceEntries());
    // The reference set is constant; an invalid one cannot ship past tests.
    if (!set.ok()) std::abort();
    return new QuestionSet(*std::move(set));
  }();
  return *kSet;
}

absl::StatusOr<QuestionSet> QuestionSet::Create(
    std::vector<QuestionEntry> entries) {
  std::set<std::string> ids, keys;
  for (const QuestionEntry& e : entries) {
    if (e.id().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "question with key ", e.question.key(), " has no id (name)"));
    }
    if (!ids.insert(e.id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("question id ", e.id(), " is defined twice"));
    }
    if (!keys.insert(e.question.key()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("question ", e.id(), " has key ", e.question.key(),
                       ", which another question already has"));
    }
  }
  for (const QuestionEntry& e : entries) {
    if (e.question.kind() == decision::QuestionKind::kChoice &&
        e.question.k() > kMaxUntwinnedChoice && !e.twin) {
      return absl::InvalidArgumentError(
          absl::StrCat("choice ", e.id(), " has K = ", e.question.k(), " > ",
                       kMaxUntwinnedChoice, " options and no noul twin"));
    }
    if (!e.twin) continue;
    const QuestionEntry* twin = nullptr;
    for (const QuestionEntry& other : entries) {
      if (other.id() == *e.twin) twin = &other;
    }
    if (twin == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("question ", e.id(),
                                                     " names twin ", *e.twin,
                                                     ", which is not defined"));
    }
    if (twin->question.kind() != decision::QuestionKind::kNoul) {
      return absl::InvalidArgumentError(absl::StrCat(
          "question ", e.id(), " names twin ", *e.twin, ", which is a ",
          decision::QuestionKindName(twin->question.kind()), ", not a noul"));
    }
  }
  return QuestionSet(std::move(entries));
}

absl::StatusOr<const QuestionEntry*> QuestionSet::Find(
    std::string_view id) const {
  for (const QuestionEntry& e : entries_) {
    if (e.id() == id) return &e;
  }
  std::string message =
      absl::StrCat("no question with id '", text::Printable(id), "'");
  if (const std::string near = Closest(id); !near.empty()) {
    absl::StrAppend(&message, " (did you mean '", near, "'?)");
  }
  return absl::NotFoundError(message);
}

std::string QuestionSet::Closest(std::string_view id) const {
  // Ids are short; a longer string is no typo of one (and the distance
  // costs its length times theirs).
  constexpr size_t kLongest = 128;
  if (id.size() > kLongest) return "";
  std::vector<std::string> ids;
  for (const QuestionEntry& e : entries_) ids.push_back(e.id());
  return util::ClosestName(id, ids).value_or("");
}

}  // namespace mesa_anyjev::questions
