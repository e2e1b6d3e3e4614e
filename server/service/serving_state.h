// Where the daemon is in its life: loading -> serving -> draining. Handlers
// read it on every call; the lifecycle writes it.
#pragma once

#include <atomic>

namespace mesa_anyjev::service {

enum class ServingState { kLoading, kServing, kDraining };

class ServingStateFlag {
 public:
  ServingState get() const { return state_.load(std::memory_order_acquire); }
  void set(ServingState state) {
    state_.store(state, std::memory_order_release);
  }

 private:
  std::atomic<ServingState> state_{ServingState::kLoading};
};

}  // namespace mesa_anyjev::service
