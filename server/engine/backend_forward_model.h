// The ForwardModel over a model that has only the Backend seam (the fake
// model, the router's composite): a merged call is one Backend call over
// every member's groups, so it costs what one call does (one synthetic delay
// on the fake, one remote call in router mode). The seam carries one
// deadline and one cancel flag per call: a merged call runs to its latest
// member's deadline, and a watcher raises its flag once every member has
// stopped.
#pragma once

#include <memory>
#include <vector>

#include "common/backend.h"
#include "server/engine/forward_call.h"

namespace mesa_anyjev::engine {

class BackendForwardModel final : public ForwardModel {
 public:
  // `backend` outlives the adapter.
  explicit BackendForwardModel(Backend* backend);
  ~BackendForwardModel() override;

  absl::StatusOr<ForwardOutput> Run(const ForwardCall& call) override;

 private:
  class StopWatch;
  absl::StatusOr<ForwardOutput> RunGroups(
      const std::vector<PromptGroup>& groups, const ForwardTask& task,
      const CallControl& control);

  Backend* const backend_;
  std::unique_ptr<StopWatch> watch_;
};

}  // namespace mesa_anyjev::engine
