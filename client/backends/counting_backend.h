// A Backend that forwards to another and counts every prompt it scores, as
// the reference's count_prompts does, so runs and the bench report prompts
// the same way whatever the backend kind.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "common/backend.h"

namespace mesa_anyjev::client {

class CountingBackend : public ForwardingBackend {
 public:
  explicit CountingBackend(Backend* inner) : ForwardingBackend(inner) {}

  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) override {
    Count(groups);
    return ForwardingBackend::Logprobs(groups, top_k, control);
  }
  absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) override {
    Count(groups);
    return ForwardingBackend::HiddenStates(groups, layers, control);
  }

  int64_t prompts() const { return prompts_.load(std::memory_order_relaxed); }

 private:
  void Count(const std::vector<PromptGroup>& groups) {
    int64_t n = 0;
    for (const PromptGroup& group : groups) {
      n += static_cast<int64_t>(group.suffixes.size());
    }
    prompts_.fetch_add(n, std::memory_order_relaxed);
  }

  std::atomic<int64_t> prompts_{0};
};

}  // namespace mesa_anyjev::client
