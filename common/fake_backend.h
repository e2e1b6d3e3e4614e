// The fake model: a deterministic, in-process Backend with no weights, used by
// CI and demos, the reference's fake model made deterministic in C++ so the
// CLI, the daemon and the parity tests share it. It decodes each prompt,
// parses the AnyJev readout text (state, option lines or the Yes/No line) and
// scores options with the reference's default_fake_content plus a position
// bias, so decisions, L0 debiasing, L1 calibration and L2 heads all have
// something real to work on. Hidden states carry a planted, linearly readable
// signal of the winning option that grows with depth.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/text/fake_tokenizer.h"

namespace mesa_anyjev {

// The fake model's temperature unless told otherwise.
inline constexpr double kFakeTemperature = 0.7;

struct FakeBackendOptions {
  // Seconds each Logprobs / HiddenStates call takes (checked against the
  // call's deadline and cancel flag every millisecond); 0 = immediate.
  double delay_s = 0;
  // Divides every label logit and the hidden states' position signal: the
  // same answers, sharper or flatter probabilities. Another temperature is
  // another model: its name is "fake-t<T>" (FakeModelName) and its identity
  // differs, so two fakes can be compared (bench compare) and bundles of one
  // are refused by the other.
  double temperature = kFakeTemperature;
};

// "fake" at the default temperature, else "fake-t<T>" (%g: "fake-t1.4").
std::string FakeModelName(double temperature);

// What the fake reads out of a prompt's text.
struct FakePrompt {
  std::string state;                 // "(empty)" already mapped to ""
  std::vector<std::string> labels;   // displayed order
  std::vector<std::string> options;  // aligned with labels
};

// Parses a readout prompt as AnyJev's fake does: the state is the text
// between "State:\n" and "\n\nQuestion:" ("" when there is no "State:\n");
// every line `^([A-Z]|\d+)\. (.*)$` appends (label, option); a line
// `^Answer (Yes|No) or (Yes|No)\.$` replaces both lists with the two words.
// Special tokens (<|im_end|> etc.) count as line breaks, so a Qwen3-style
// chat render parses like the plain fallback text.
FakePrompt ParseFakePrompt(std::string_view text);

// True for AnyJev's content-free probe states: "N/A", "" and "[MASK]".
bool IsContentFreeProbe(std::string_view state);

// The reference's default_fake_content(state, option), exactly, so fake
// decisions match anyjev's fake backend to the last bit:
// an MD5 jitter in [-0.2, 0.2), plus for "Yes"/"No" the candidate/column word
// overlap rule, and for any other option 1.0 when its head word occurs in the
// lower-cased state. Lower-casing follows Python's str.lower() for ASCII,
// Latin-1, Latin Extended-A, Greek and Cyrillic; other scripts are unchanged.
double DefaultFakeContent(std::string_view state, std::string_view option);

class FakeBackend : public Backend {
 public:
  static constexpr std::string_view kVersion = "mesa-anyjev-fake-v1";
  static constexpr int32_t kNumLayers = 4;
  static constexpr int32_t kHiddenSize = 64;
  static constexpr int32_t kMaxChoiceK = kMaxChoiceOptions;
  static constexpr double kTemperature = kFakeTemperature;  // the default
  // Logit of "the rest of the vocabulary", spread evenly over non-label ids.
  static constexpr double kRestLogit = -5.0;
  static constexpr std::array<double, 4> kPositionBias = {0.6, 0.2, 0.0, -0.1};
  // Hidden-state layout of the last-position vector.
  static constexpr int32_t kStateDim0 = 26;   // dims 26..37: state vector
  static constexpr int32_t kOptionDim0 = 38;  // dims 38..49: winner's text
  static constexpr int32_t kHashDims = 12;
  // Noise scale at layer l: kNoiseFloor + kNoiseSlope * (1 - l / n_layers).
  static constexpr double kNoiseFloor = 0.02;
  static constexpr double kNoiseSlope = 0.4;

  explicit FakeBackend(FakeBackendOptions options = {});

  const ModelIdentity& identity() const override { return identity_; }
  const Capabilities& capabilities() const override { return capabilities_; }
  const text::Tokenizer& tokenizer() const override { return tokenizer_; }
  // No chat template: prompts use the fallback "{system}\n\n{user}\nAnswer:",
  // as the reference's fake backend does.
  const text::ChatTemplate& chat_template() const override {
    return chat_template_;
  }
  const text::FakeTokenizer& fake_tokenizer() const { return tokenizer_; }

  // Full-vocabulary log-softmax: the bare label token of each displayed label
  // gets (content + position bias) / temperature, every other id shares a
  // logit of kRestLogit. A prompt with no parsable options is uniform.
  // top_k < 0 is INVALID_ARGUMENT; top_k above vocab_size returns them all.
  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) override;

  // Last-position hidden states. The signal vector v has dims 0..25 =
  // position bias / temperature of the displayed positions, 26..37 = a unit
  // vector of the state text, 38..49 = a unit vector of the text of the
  // option with the largest content (zero for probes and option-less
  // prompts). Layer l = v * (l/4)^2 + Gaussian noise of scale
  // 0.02 + 0.4 * (1 - l/4), seeded by (prompt text, l): layer 0 is noise and
  // the last layer is nearly exact. An empty `layers` asks for every layer
  // 0..4; the groups' label_ids are ignored.
  absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) override;

  // Prompts computed so far (both calls) and calls that reached computing.
  int64_t prompts_seen() const {
    return prompts_seen_.load(std::memory_order_relaxed);
  }
  int64_t calls() const { return calls_.load(std::memory_order_relaxed); }

 private:
  // Validates ids (and label ids when `check_labels`), then sleeps delay_s
  // while watching `control`.
  absl::Status Prepare(const std::vector<PromptGroup>& groups,
                       bool check_labels, const CallControl& control) const;
  // Log-probabilities of every vocabulary id for one prompt's text.
  std::vector<double> FullLogprobs(const FakePrompt& prompt) const;
  // The last-position vector before depth scaling and noise.
  std::vector<double> SignalVector(const FakePrompt& prompt) const;

  const FakeBackendOptions options_;
  const text::FakeTokenizer tokenizer_;
  const text::ChatTemplate chat_template_ = text::ChatTemplate::None();
  ModelIdentity identity_;
  Capabilities capabilities_;
  std::atomic<int64_t> prompts_seen_{0};
  std::atomic<int64_t> calls_{0};
};

}  // namespace mesa_anyjev
