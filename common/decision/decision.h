// A decision: the probabilities over one question's options for one state,
// the level it was served at, and what produced it (docs/decision.md,
// Levels; anyjev result.Decision), with what the CLI's DecisionRecord reads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/decision/level.h"
#include "common/decision/numpy_ops.h"
#include "common/decision/question.h"

namespace mesa_anyjev::decision {

struct DecisionDiagnostics {
  // raw, L0, L1: the prompts read.
  std::optional<double> answer_mass;    // mean label mass over prompts read
  std::vector<std::vector<int>> perms;  // permutations read, in order
  std::vector<double> raw_probs;        // shift 0 alone, option space
  std::optional<Matrix> p_pos_raw;      // [P, K] readouts by position
  // L0 and L1.
  std::string prior_method;  // "batch", "content_free", "none", "frozen:..."
  double prior_strength = 0.0;
  std::optional<Matrix> prior;  // [P, K] applied (already not ^strength)
  std::optional<double> order_flip_raw;
  std::optional<double> order_flip_l0;
  std::vector<double> l0_probs;
  // Adaptive shifts.
  bool adaptive = false;
  std::optional<double> stop_threshold;
  std::string stop_stat;
  bool stop_calibrated = false;
  // L1 and L2.
  std::optional<double> temperature;
  int n_calib = 0;
  // L2.
  std::string readout;  // "head:lda", "head:ridge"
  int exit_layer = 0;
  int blocks_executed = 0;
  int n_blocks = 0;
  bool early_stop = false;
  std::string listing;
  std::string routed_from;  // the head's question id when not an exact key
  bool reordered = false;
  bool adapted = false;
  int adapt_n = 0;
  std::string head_version;
  // Every level.
  // Set only when another model than the provider's own served it (the
  // composite's failover to the daemon): that model, and why.
  std::string served_by;
  std::string failover;
  int prompts = 0;            // prompts scored for this decision
  std::string prompt_sha256;  // of the prompt with the caller's order
  std::vector<std::string> prompt_texts;  // when asked for
};

struct Decision {
  std::string question_id;
  std::string question_key;
  QuestionKind kind = QuestionKind::kChoice;
  std::vector<std::string> options;
  Level level = Level::kRaw;  // served, never kAuto
  std::vector<double> probs;  // over options, sums to 1
  DecisionDiagnostics diagnostics;
  std::optional<double> score_value;  // score: sum p_k * center_k

  // Argmax (first on ties), its probability, and top-1 minus top-2 (0 for
  // one option), as the reference's rank_probs.
  int answer_index() const;
  double confidence() const;
  double margin() const;
  const std::string& answer() const { return options[answer_index()]; }
  // noul only: probs[0].
  std::optional<double> p_true() const;
};

}  // namespace mesa_anyjev::decision
