// Decision accessors (see decision.h).
#include "common/decision/decision.h"

#include <algorithm>
#include <functional>

namespace mesa_anyjev::decision {

int Decision::answer_index() const { return ArgMax(probs); }

double Decision::confidence() const {
  return *std::max_element(probs.begin(), probs.end());
}

double Decision::margin() const {
  if (probs.size() < 2) return probs.empty() ? 0.0 : probs[0];
  std::vector<double> sorted = probs;
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(),
                    std::greater<>());
  return sorted[0] - sorted[1];
}

std::optional<double> Decision::p_true() const {
  if (kind != QuestionKind::kNoul) return std::nullopt;
  return probs[0];
}

}  // namespace mesa_anyjev::decision
