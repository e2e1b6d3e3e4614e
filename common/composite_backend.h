// The router's model (issue 8): logprobs from one Backend (the gateway),
// hidden states from another (a mesa-anyjevd with the local model), one
// decider on top. Prompts are built with the logprobs side's tokenizer and
// chat template; the hidden side receives them as text and tokenizes them
// itself, so only the label ids have to agree (checked at start by
// CheckLabelAgreement of common/backend.h, the check the CLI's composite
// runs too). Bundles are keyed by the hidden side's model, as the
// reference's composite is named after hf_model.
//
// Why a second composite beside client/backends' CompositeProvider: that
// one joins two deciders (the CLI's below L2, the daemon's at L2, with the
// daemon's heads); this one joins two models under one decider, so the
// router fits and serves its own heads on the remote hidden states.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/backend.h"

namespace mesa_anyjev {

// Where the composite's hidden states come from (a remote mesa-anyjevd).
class HiddenStatesSource {
 public:
  virtual ~HiddenStatesSource() = default;
  virtual const ModelIdentity& identity() const = 0;
  virtual const Capabilities& capabilities() const = 0;
  // As Backend::HiddenStates; prompts are built with the composite's
  // tokenizer.
  virtual absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) = 0;
};

class CompositeBackend : public Backend {
 public:
  CompositeBackend(std::unique_ptr<Backend> logprobs,
                   std::unique_ptr<HiddenStatesSource> hidden);

  const ModelIdentity& identity() const override { return identity_; }
  const Capabilities& capabilities() const override { return capabilities_; }
  const text::Tokenizer& tokenizer() const override {
    return logprobs_->tokenizer();
  }
  const text::ChatTemplate& chat_template() const override {
    return logprobs_->chat_template();
  }
  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) override {
    return logprobs_->Logprobs(groups, top_k, control);
  }
  absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) override {
    return hidden_->HiddenStates(groups, layers, control);
  }

 private:
  std::unique_ptr<Backend> logprobs_;
  std::unique_ptr<HiddenStatesSource> hidden_;
  ModelIdentity identity_;
  Capabilities capabilities_;
};

}  // namespace mesa_anyjev
