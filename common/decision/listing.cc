// A question's listing in one call (see listing.h).
#include "common/decision/listing.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decision/permute.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {

std::vector<std::vector<int>> Shifts(const Question& question, Level level,
                                     const CallSettings& call) {
  if (level == Level::kRaw || question.ordered()) {
    return {Identity(question.k())};
  }
  if (question.kind() == QuestionKind::kNoul) return {{0, 1}, {1, 0}};
  std::vector<std::vector<int>> shifts =
      CyclicShifts(question.k(), call.max_permutations);
  if (!call.canonical_order) return shifts;
  // Rotating a listing sorted by option text makes the prompts a function
  // of the option set: any listing of the same options reads the same.
  const std::vector<int> canon = CanonicalOrder(question.options());
  for (auto& perm : shifts) {
    for (int& i : perm) i = canon[i];
  }
  return shifts;
}

std::string ListingKey(const Question& question,
                       const std::vector<std::vector<int>>& perms) {
  std::vector<std::string> parts;
  for (const auto& perm : perms) parts.push_back(absl::StrJoin(perm, ","));
  return absl::StrCat(question.key(), "|", absl::StrJoin(parts, ";"));
}

absl::StatusOr<Listing> ListingOf(PromptReader& reader,
                                  const Question& question, Level level,
                                  const CallSettings& call) {
  Listing listing{question, {}, Shifts(question, level, call), ""};
  ASSIGN_OR_RETURN(listing.labels, reader.Labels(question));
  listing.key = ListingKey(question, listing.perms);
  return listing;
}

}  // namespace mesa_anyjev::decision
