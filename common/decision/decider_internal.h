// Shared by the files that implement the Decider (decider.cc,
// decider_adaptive.cc, decider_learning.cc, decider_artifacts.cc): its
// private per-call and per-question records, and small helpers. Not for use
// outside common/decision.
#pragma once

#include <cmath>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/decision/decider.h"
#include "common/decision/numpy_ops.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::decision {

struct Decider::Effective {
  PriorMode prior;
  Combine combine;
  bool canonical_order;
  std::optional<int> max_permutations;
  bool adaptive_shifts;
  std::optional<double> adaptive_margin;
  bool return_prompts;
  bool return_details;
  // The L1 artifacts and L2 routes of the call's questions, read once when
  // Decide starts: a concurrent swap (a bundle promote or rollback) can
  // then neither mix two versions in one call nor take away what the call
  // was admitted on. Keyed by question key; a key not here reads live.
  absl::flat_hash_map<std::string, std::shared_ptr<const TemperatureScaler>>
      artifacts;
  absl::flat_hash_map<std::string, std::optional<RoutedHead>> routes;
  // L2 features this call saw, per question key, for the adaptation
  // statistics once the call succeeds (one call runs on one thread).
  mutable std::vector<std::pair<std::string, Matrix>> features;
};

struct Decider::Observed {
  Question question;
  std::vector<std::string> states;
  std::vector<int> labels;
  int fits = 0;
  int next_fit = 30;
  bool fitting = false;
};

namespace decider_internal {

using Json = nlohmann::ordered_json;

inline std::vector<int> Identity(int k) {
  std::vector<int> out(k);
  std::iota(out.begin(), out.end(), 0);
  return out;
}

inline std::string Describe(const Question& question) {
  return absl::StrCat("question '", question.id(), "' (key ", question.key(),
                      ")");
}

inline Matrix RowOf(const std::vector<double>& v) {
  Matrix m(1, static_cast<Eigen::Index>(v.size()));
  for (size_t j = 0; j < v.size(); ++j) m(0, j) = v[j];
  return m;
}

inline std::vector<double> ToVector(
    const Eigen::Ref<const Eigen::RowVectorXd>& row) {
  return std::vector<double>(row.data(), row.data() + row.size());
}

// Mean over prompts of the label mass sum_j exp(lp[j]).
inline double AnswerMass(const std::vector<std::vector<double>>& lps) {
  std::vector<double> masses;
  for (const auto& lp : lps) {
    std::vector<double> e;
    for (double x : lp) e.push_back(std::exp(x));
    masses.push_back(PairwiseSum(e));
  }
  return Mean(masses);
}

inline Matrix Stack(const std::vector<std::vector<double>>& rows) {
  Matrix m(static_cast<Eigen::Index>(rows.size()),
           static_cast<Eigen::Index>(rows.empty() ? 0 : rows[0].size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) m(i, j) = rows[i][j];
  }
  return m;
}

// Deduplicating prompt registry: the reference scores each distinct
// rendered prompt once per call.
class Registry {
 public:
  size_t Add(text::ChatParts parts, std::vector<text::TokenId> ids) {
    std::string whole = absl::StrCat(parts.prefix, parts.suffix);
    const auto [it, inserted] = index_.try_emplace(whole, parts_.size());
    if (inserted) {
      parts_.push_back(std::move(parts));
      ids_.push_back(std::move(ids));
      texts_.push_back(std::move(whole));
    }
    return it->second;
  }
  bool empty() const { return parts_.empty(); }
  const std::vector<text::ChatParts>& parts() const { return parts_; }
  const std::vector<std::vector<text::TokenId>>& ids() const { return ids_; }
  const std::string& text(size_t i) const { return texts_[i]; }

 private:
  absl::flat_hash_map<std::string, size_t> index_;
  std::vector<text::ChatParts> parts_;
  std::vector<std::vector<text::TokenId>> ids_;
  std::vector<std::string> texts_;
};

}  // namespace decider_internal
}  // namespace mesa_anyjev::decision
