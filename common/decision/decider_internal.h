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
#include <utility>
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

// A question as one call reads it: its label tokens, the shifts it is read
// under (raw and ordered questions: the identity) and the key of that
// listing, under which its running and content-free priors are kept.
struct Decider::Listing {
  Question question;
  ResolvedLabels labels;
  std::vector<std::vector<int>> perms;  // [P][K]
  std::string key;

  int n_perms() const { return static_cast<int>(perms.size()); }
};

// The prior L0 divides out of a question's readouts in one call: an L1
// artifact's frozen prior where it has the listing's shape, else the
// call's mode (batch, content-free, none).
struct Decider::PriorChoice {
  PriorMode mode;
  std::shared_ptr<const TemperatureScaler> frozen;  // set when it applies
  double strength;

  // The prior [P, K], given the batch and content-free priors the call has.
  std::optional<Matrix> Pick(const std::optional<Matrix>& batch,
                             const std::optional<Matrix>& content_free) const {
    if (frozen != nullptr) return frozen->prior;
    switch (mode) {
      case PriorMode::kBatch:
        return batch;
      case PriorMode::kContentFree:
        return content_free;
      case PriorMode::kNone:
        return std::nullopt;
    }
    return std::nullopt;
  }
  // What the diagnostics call it: "frozen:<method>" or the mode's name.
  std::string Name() const {
    return frozen != nullptr ? absl::StrCat("frozen:", frozen->prior_method)
                             : PriorModeName(mode);
  }
};

struct Decider::Observed {
  Question question;
  std::vector<std::string> states;
  std::vector<int> labels;
  int fits = 0;
  int next_fit = 30;
  bool fitting = false;

  // The record as an export file holds it.
  nlohmann::ordered_json ToJson() const {
    nlohmann::ordered_json out;
    out["question_id"] = question.id();
    out["kind"] = QuestionKindName(question.kind());
    out["text"] = question.text();
    out["options"] = question.options();
    out["states"] = states;
    out["labels"] = labels;
    out["fits"] = fits;
    out["next_fit"] = next_fit;
    return out;
  }
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

// What one state read under a question's shifts, in reading order: the
// shifts, the label log-probs [P'][K] and their softmax, and the prompt
// texts when the call asked for them.
struct ShiftReadout {
  std::vector<std::vector<int>> perms;
  std::vector<std::vector<double>> logprobs;
  std::vector<std::vector<double>> probs;
  std::vector<std::string> prompts;

  void Add(const std::vector<int>& perm, const std::vector<double>& lp) {
    perms.push_back(perm);
    logprobs.push_back(lp);
    probs.push_back(Softmax(lp));
  }
  // p_pos_raw [P', K]: row j is the readout of shift perms[j] by position.
  Matrix p_pos_raw() const { return Stack(probs); }
};

// The prior an L0 decision divides out: rows [P', K] for the shifts its
// readout read (none: no prior), the exponent, and the name the
// diagnostics give it.
struct AppliedPrior {
  std::optional<Matrix> rows;
  double strength = 0.0;
  std::string method;
};

// p_pos_raw divided by prior^strength, row by row, renormalised; unchanged
// without a prior.
Matrix Corrected(const Matrix& p_pos_raw, const std::optional<Matrix>& prior,
                 double strength);
// Rows `index` of `m`, in that order.
Matrix RowsOf(const Matrix& m, const std::vector<int>& index);
// raw: the first shift's restricted softmax (the caller's order), with what
// every label readout carries (answer mass, shifts, raw probabilities).
Decision RawDecision(const ShiftReadout& read, bool details);
// L0: every shift corrected by `prior`, combined over the shifts.
Decision L0Decision(const ShiftReadout& read, const AppliedPrior& prior,
                    Combine combine, bool details);

// Deduplicating prompt registry: the reference scores each distinct
// rendered prompt once per call. `owner` is the index of the state a prompt
// renders (-1 for a probe), the first one's where states repeat: a refusal
// of the prompt names that state.
class Registry {
 public:
  size_t Add(text::ChatParts parts, std::vector<text::TokenId> ids,
             int owner = -1) {
    std::string whole = absl::StrCat(parts.prefix, parts.suffix);
    const auto [it, inserted] = index_.try_emplace(whole, parts_.size());
    if (inserted) {
      parts_.push_back(std::move(parts));
      ids_.push_back(std::move(ids));
      texts_.push_back(std::move(whole));
      owners_.push_back(owner);
    }
    return it->second;
  }
  bool empty() const { return parts_.empty(); }
  const std::vector<text::ChatParts>& parts() const { return parts_; }
  const std::vector<std::vector<text::TokenId>>& ids() const { return ids_; }
  const std::vector<int>& owners() const { return owners_; }
  const std::string& text(size_t i) const { return texts_[i]; }

 private:
  absl::flat_hash_map<std::string, size_t> index_;
  std::vector<text::ChatParts> parts_;
  std::vector<std::vector<text::TokenId>> ids_;
  std::vector<std::string> texts_;
  std::vector<int> owners_;
};

}  // namespace decider_internal
}  // namespace mesa_anyjev::decision
