// A question as one call reads it (docs/decision.md, L0: shifts and
// priors): its label tokens, the shifts it is read under (raw and ordered
// questions: the identity; noul: its two phrasings; else cyclic shifts,
// optionally of the canonical order) and the key of that listing. The
// content-free cache and the running priors are kept per listing key, so
// per-call canonical_order or max_permutations never mix the readouts of two
// listings.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/decision/call_settings.h"
#include "common/decision/label_resolver.h"
#include "common/decision/level.h"
#include "common/decision/prompt_reader.h"
#include "common/decision/question.h"

namespace mesa_anyjev::decision {

struct Listing {
  Question question;
  ResolvedLabels labels;
  std::vector<std::vector<int>> perms;  // [P][K]
  std::string key;

  int n_perms() const { return static_cast<int>(perms.size()); }
};

// The shifts `question` is read under at `level`: perm[j] is the option
// shown at position j.
std::vector<std::vector<int>> Shifts(const Question& question, Level level,
                                     const CallSettings& call);
// "<question key>|<shift>;<shift>...": the package caches per question key
// only; with per-call shift options the shifts are part of what a cached
// prior means.
std::string ListingKey(const Question& question,
                       const std::vector<std::vector<int>>& perms);
absl::StatusOr<Listing> ListingOf(PromptReader& reader,
                                  const Question& question, Level level,
                                  const CallSettings& call);

}  // namespace mesa_anyjev::decision
