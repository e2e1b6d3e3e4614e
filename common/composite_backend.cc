#include "common/composite_backend.h"

#include <utility>

namespace mesa_anyjev {

CompositeBackend::CompositeBackend(std::unique_ptr<Backend> logprobs,
                                   std::unique_ptr<HiddenStatesSource> hidden)
    : logprobs_(std::move(logprobs)), hidden_(std::move(hidden)) {
  identity_ = hidden_->identity();
  identity_.attention = "composite: " + logprobs_->identity().name +
                        " logprobs, " + hidden_->identity().name + " hidden";
  const Capabilities& l = logprobs_->capabilities();
  const Capabilities& h = hidden_->capabilities();
  capabilities_ = h;
  // Below L2 the readout is the logprobs side's (a gateway's top 20).
  capabilities_.max_choice_k = l.max_choice_k;
  capabilities_.logprob_top_k = l.logprob_top_k;
  capabilities_.vocab_size = l.vocab_size;
}

}  // namespace mesa_anyjev
