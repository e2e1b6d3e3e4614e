#include "common/util/suggest.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mesa_anyjev::util {

int EditDistance(std::string_view a, std::string_view b) {
  auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  };
  const size_t n = a.size(), m = b.size();
  // Three rows: the transposition looks two rows back.
  std::vector<int> before(m + 1), previous(m + 1), row(m + 1);
  for (size_t j = 0; j <= m; ++j) previous[j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= m; ++j) {
      const int cost = same(a[i - 1], b[j - 1]) ? 0 : 1;
      row[j] =
          std::min({previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) &&
          same(a[i - 2], b[j - 1])) {
        row[j] = std::min(row[j], before[j - 2] + 1);
      }
    }
    before.swap(previous);
    previous.swap(row);
  }
  return previous[m];
}

std::optional<std::string> ClosestName(
    std::string_view word, const std::vector<std::string>& candidates) {
  if (word.empty()) return std::nullopt;
  const int allowed = std::max<int>(1, static_cast<int>(word.size()) / 3);
  std::optional<std::string> best;
  int best_distance = allowed + 1;
  std::vector<const std::string*> prefixed;
  for (const std::string& candidate : candidates) {
    if (candidate == word) continue;
    const int d = EditDistance(word, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
    if (absl::StartsWithIgnoreCase(
            candidate, absl::string_view(word.data(), word.size()))) {
      prefixed.push_back(&candidate);
    }
  }
  if (best.has_value()) return best;
  if (prefixed.size() == 1) return *prefixed.front();
  return std::nullopt;
}

std::string DidYouMean(std::string_view word,
                       const std::vector<std::string>& candidates) {
  const std::optional<std::string> closest = ClosestName(word, candidates);
  return closest ? absl::StrCat(" (did you mean '", *closest, "'?)") : "";
}

}  // namespace mesa_anyjev::util
