// Typed questions, the three decision primitives of the AnyJev method
// (docs/decision.md, Questions and keys): choice (2..26 options), noul (Yes/No)
// and score (2..10 ordered levels, or equal-width bins over a scale). A
// question's key is the identity its priors, L1 artifacts and L2 heads are
// stored under, computed exactly as anyjev 0.2.0's Question.key.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"  // kMaxChoiceOptions

namespace mesa_anyjev::decision {

enum class QuestionKind { kChoice, kNoul, kScore };

// "choice", "noul", "score".
const char* QuestionKindName(QuestionKind kind);
absl::StatusOr<QuestionKind> ParseQuestionKind(std::string_view name);

inline constexpr int kMinScoreLevels = 2;
inline constexpr int kMaxScoreLevels = 10;

class Question {
 public:
  // choice: 2..26 unique options, shown in this order unless permuted.
  static absl::StatusOr<Question> Choice(std::string text,
                                         std::vector<std::string> options,
                                         std::string name = "");
  // noul: options ("Yes", "No"); p_true = probs[0].
  static Question Noul(std::string text, std::string name = "");
  // score over `bins` equal-width bins of [lo, hi] (options "0 to 0.25",
  // ...); value = sum p_k * bin midpoint.
  static absl::StatusOr<Question> ScoreBins(std::string text, int bins = 5,
                                            double lo = 0.0, double hi = 1.0,
                                            std::string name = "");
  // score over explicit ordered levels; value = sum p_k * k.
  static absl::StatusOr<Question> ScoreLevels(std::string text,
                                              std::vector<std::string> levels,
                                              std::string name = "");
  // A question as stored in an observations record (kind, text, options,
  // name; score questions ordered, default scale, no centers), as the
  // reference rebuilds it when loading observations.
  static Question FromStored(QuestionKind kind, std::string text,
                             std::vector<std::string> options,
                             std::string name);

  // Custom answer labels (choice and score only): shown instead of A, B, ...
  // or 1, 2, ...; each must be a single token. An extension of the method:
  // the key then also covers the labels, so such a question never shares
  // priors or artifacts with the plain one.
  absl::Status SetCustomLabels(std::vector<std::string> labels);

  QuestionKind kind() const { return kind_; }
  const std::string& text() const { return text_; }
  const std::vector<std::string>& options() const { return options_; }
  const std::string& name() const { return name_; }
  int k() const { return static_cast<int>(options_.size()); }
  bool ordered() const { return ordered_; }
  double scale_lo() const { return scale_lo_; }
  double scale_hi() const { return scale_hi_; }
  const std::optional<std::vector<double>>& centers() const { return centers_; }
  const std::vector<std::string>& custom_labels() const {
    return custom_labels_;
  }

  // First 16 hex characters of sha256 over json.dumps({"centers", "kind",
  // "options", "scale", "text"}, sort_keys=True, ensure_ascii=False).
  const std::string& key() const { return key_; }
  // The name, or "q_" + key[:8].
  std::string id() const;
  // The value each option stands for (score only): the level index, or the
  // bin midpoint lo + (hi - lo) * (i + 0.5) / K.
  std::vector<double> BinCenters() const;
  // A score whose options are its own equal-width bins over its scale: it
  // travels as bins and a scale (the receiver rebuilds the same key), any
  // other score as levels.
  bool IsScoreBins() const;

 private:
  Question(QuestionKind kind, std::string text,
           std::vector<std::string> options, std::string name, double lo,
           double hi, bool ordered, std::optional<std::vector<double>> centers);
  void ComputeKey();

  QuestionKind kind_;
  std::string text_;
  std::vector<std::string> options_;
  std::string name_;
  double scale_lo_ = 0.0;
  double scale_hi_ = 1.0;
  bool ordered_ = false;
  std::optional<std::vector<double>> centers_;
  std::vector<std::string> custom_labels_;
  std::string key_;
};

}  // namespace mesa_anyjev::decision
