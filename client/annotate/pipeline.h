// `annotate` for one card (docs/annotate.md): the static plan, then
// Q0 dataset.ontology_applies (audit only), Q1-Q3 per column, term.fits
// groups per (column, ontology), per site and for the dataset's taxa,
// specificity, Q7 value kinds and AVUs, dedup, Q8 avu.keep and the max_avus
// cap. Decides and proposes; writes nothing.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "client/annotate/run_result.h"
#include "client/backends/provider.h"
#include "client/cards/candidates.h"
#include "client/cards/card.h"
#include "client/policy/policy.h"
#include "common/config/config.h"
#include "common/decision/level.h"

namespace mesa_anyjev::annotate {

// MAX_TAXON_AVUS: the dataset keeps at most two taxa.
inline constexpr int kMaxTaxonAvus = 2;

struct AnnotateOptions {
  decision::Level level = decision::Level::kAuto;
  config::PolicyConfig policy;
  // The write policy's thresholds and profiles; null = the shipped M5
  // defaults (policy_defaults.yaml). Must outlive the run.
  const policy::Policy* rules = nullptr;
  // Recorded search results; null skips every stage that needs candidates
  // (term.fits, specificity, sites, taxa, and so Q7 and Q8).
  const cards::CandidateSource* candidates = nullptr;
  std::string actor = "mesa-anyjev";
  std::string run_id;  // "" = a fresh UUID4
  // Called before each batch is asked (a progress bar's label).
  std::function<void(const std::string& question_id, size_t states)> on_ask;
};

// The skip notice for a run without candidates.
inline constexpr char kNoCandidatesNotice[] =
    "no --candidates file: term.fits, avu.value_kind and avu.keep skipped";

// One run. The provider's running priors are reset first, so two runs
// on one card give the same decisions. Errors: FAILED_PRECONDITION when the
// level cannot be served (naming the question and what is missing),
// NOT_FOUND for an unknown policy profile, else the provider's error.
absl::StatusOr<RunResult> Annotate(const cards::DatasetCard& card,
                                   client::Provider& provider,
                                   const AnnotateOptions& options);

// A random (version 4) UUID in its canonical text form.
std::string NewRunId();

}  // namespace mesa_anyjev::annotate
