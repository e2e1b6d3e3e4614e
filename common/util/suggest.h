// "Did you mean": the closest of a few known names to a mistyped one, for
// commands, flags and question ids. Small lists only (a CLI's verbs, a
// question set), so a plain edit distance is enough.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mesa_anyjev::util {

// Optimal-string-alignment distance (insertions, deletions, substitutions
// and adjacent transpositions), case-insensitive.
int EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is close enough to be a typo: at
// most max(1, size/3) edits (ties: the first), or `word` is a prefix of
// exactly one candidate. nullopt when nothing is close.
std::optional<std::string> ClosestName(
    std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'X'?)" for ClosestName, else "".
std::string DidYouMean(std::string_view word,
                       const std::vector<std::string>& candidates);

}  // namespace mesa_anyjev::util
