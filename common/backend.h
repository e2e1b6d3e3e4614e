// The Backend seam: what the decision code needs from a model and nothing
// more, so that it runs unchanged over every model it can be given.
// Implementations: the fake model (common/), the daemon's local Qwen3
// (server/), the CLI's daemon proxy, the gateway and the composite
// (client/).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/text/chat_template.h"
#include "common/text/tokenizer.h"

namespace mesa_anyjev {

using text::TokenId;

// A choice question's options are labelled A..Z: no backend serves wider.
inline constexpr int32_t kMaxChoiceOptions = 26;

struct Capabilities {
  bool hidden_states = false;  // HiddenStates is served (L2 possible)
  bool early_stop = false;     // the forward stops at the deepest layer asked
  int32_t max_choice_k = kMaxChoiceOptions;
  int32_t logprob_top_k = 0;  // cap on top-k (0: the whole vocabulary)
  int32_t n_layers = 0;
  int32_t hidden_size = 0;
  int32_t vocab_size = 0;
};

struct ModelIdentity {
  std::string name;       // "fake", "Qwen/Qwen3-8B"
  std::string identity;   // sha256 hex: the fingerprint bundles are bound to
  std::string dtype;      // "float32", "bfloat16"
  std::string device;     // "cpu", "cuda:0"
  std::string attention;  // attention implementation
};

// One shared prefix and several suffixes: prompt i = prefix + suffixes[i].
struct PromptGroup {
  std::vector<TokenId> prefix;
  std::vector<std::vector<TokenId>> suffixes;
  std::vector<TokenId> label_ids;  // Logprobs gathers these for every prompt
};

struct TopToken {
  TokenId id = 0;
  double logprob = 0.0;
};

struct PromptLogprobs {
  std::vector<double> label_logprobs;  // aligned with the group's label_ids
  std::vector<TopToken> top;           // most likely first
  int32_t n_tokens = 0;
};

// Accelerator memory a model holds (CUDA's caching allocator).
struct DeviceMemory {
  int64_t allocated_bytes = 0;  // held by live tensors
  int64_t reserved_bytes = 0;   // reserved from the device by the allocator
};

// The device a model runs on, as GetModelInfo and the metrics report it.
struct DeviceInfo {
  std::string name;                // "NVIDIA GB10", "cpu"
  std::string compute_capability;  // "12.1"; empty on the CPU
  bool shared_memory = true;       // the system's memory: CPU, integrated GPU
  std::string driver_cuda;         // "13.0"; empty on the CPU
  std::string runtime_cuda;
};

// How urgently a call wants the model: the engine builds each pass from
// interactive work first (a curator's single question) and fills it with
// batch work (a dataset run, a bench, a fit).
enum class Priority { kInteractive = 0, kBatch = 1 };
// "interactive", "batch"; the value a name spells, nullopt for any other.
const char* PriorityName(Priority priority);
std::optional<Priority> PriorityNamed(std::string_view name);
std::string PriorityNames();  // "interactive or batch", for messages

// Who waits for a call's answer: its deadline and cancel flag, the tenant
// the work is for and its priority class, and the one rule for a caller that
// stopped waiting, wherever it is found stopped (the queue, the forward, a
// merged call's member).
struct Caller {
  // A constructor, not an aggregate: {deadline, &flag} leaves the tenant
  // and the class at their defaults without a missing-initializer warning.
  Caller(absl::Time deadline_ = absl::InfiniteFuture(),
         const std::atomic<bool>* cancelled_ = nullptr,
         std::string tenant_ = {}, Priority priority_ = Priority::kInteractive)
      : deadline(deadline_),
        cancelled(cancelled_),
        tenant(std::move(tenant_)),
        priority(priority_) {}

  absl::Time deadline;
  const std::atomic<bool>* cancelled;  // the caller's own
  // The tenant whose token the call carried (empty: auth off, or the
  // daemon's own work such as its warm-up); the engine shares passes
  // between tenants by the tokens their work costs.
  std::string tenant;
  Priority priority;

  bool Cancelled() const {
    return cancelled != nullptr && cancelled->load(std::memory_order_relaxed);
  }
  bool ShouldStop(absl::Time now) const {
    return now >= deadline || Cancelled();
  }
  // CANCELLED when it cancelled, else DEADLINE_EXCEEDED once its deadline
  // passed ("<where>: ..."); OK while it waits.
  absl::Status StopStatus(absl::Time now, const char* where) const;
};

// Prompt tokens one call may send to the model in all (a Decide or Fit
// builds its prompts in several rounds; each round charges its groups here
// before it runs, so the work stays within the limit).
struct TokenBudget {
  int64_t limit = 0;            // 0: unbounded
  const char* limit_name = "";  // named in the refusal
  std::atomic<int64_t> used{0};

  // INVALID_ARGUMENT naming the limit once the call's total would pass it.
  absl::Status Charge(int64_t tokens);
};

// Per-call control the backend checks between units of work, so a passed
// deadline or a cancelled caller stops the forward early.
struct CallControl {
  absl::Time deadline = absl::InfiniteFuture();
  const std::atomic<bool>* cancelled = nullptr;
  TokenBudget* budget = nullptr;  // outlives the call when set
  int64_t max_prompt_tokens = 0;  // per prompt; 0: unbounded
  const char* max_prompt_tokens_name = "limits.max_prompt_tokens";
  // The caller's mesa-anyjev-affinity key: a router passes it on with its
  // own calls to a pool of daemons, so they follow the caller's routing.
  std::string affinity;
  // Caller::tenant and Caller::priority of the call.
  std::string tenant;
  Priority priority = Priority::kInteractive;

  Caller caller() const { return {deadline, cancelled, tenant, priority}; }
  // Caller::ShouldStop and Caller::StopStatus for the call's caller.
  bool ShouldStop(absl::Time now) const { return caller().ShouldStop(now); }
  absl::Status StopStatus(absl::Time now, const char* where) const {
    return caller().StopStatus(now, where);
  }
};

// Hidden states at the last position: values[(p * layers + l) * hidden + h]
// for prompt p (groups in order, suffixes in order) and resolved layer l.
struct HiddenStatesResult {
  std::vector<int32_t> layers;  // resolved, non-negative, request order
  int32_t n_prompts = 0;
  int32_t hidden_size = 0;
  std::vector<float> values;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const ModelIdentity& identity() const = 0;
  virtual const Capabilities& capabilities() const = 0;
  virtual const text::Tokenizer& tokenizer() const = 0;
  // How prompts are rendered for this model (Qwen3's chat format, or the
  // decision method's no-template fallback).
  virtual const text::ChatTemplate& chat_template() const = 0;

  // Full-vocabulary log-softmax at the last position of each prompt, gathered
  // at the group's label ids, plus the top_k entries. Result: one vector per
  // group, one entry per suffix.
  virtual absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) = 0;

  // Residual stream after each requested block (0 = embeddings, n_layers =
  // after the final norm, negative counts from the end) at the last position.
  virtual absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) = 0;

  // Device memory held by the model, for metrics; nullopt on the host (CPU
  // models, the fake, remote backends). Safe from any thread.
  virtual std::optional<DeviceMemory> device_memory() const {
    return std::nullopt;
  }

  // The device of a local model; nullopt for the fake and remote backends.
  virtual std::optional<DeviceInfo> device_info() const { return std::nullopt; }
};

// A Backend that forwards everything to `inner` (which outlives it): the
// base of the wrappers that change one or two methods (scheduling,
// counting, faults in tests).
class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend* inner) : inner_(inner) {}

  const ModelIdentity& identity() const override { return inner_->identity(); }
  const Capabilities& capabilities() const override {
    return inner_->capabilities();
  }
  const text::Tokenizer& tokenizer() const override {
    return inner_->tokenizer();
  }
  const text::ChatTemplate& chat_template() const override {
    return inner_->chat_template();
  }
  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) override {
    return inner_->Logprobs(groups, top_k, control);
  }
  absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) override {
    return inner_->HiddenStates(groups, layers, control);
  }
  std::optional<DeviceMemory> device_memory() const override {
    return inner_->device_memory();
  }
  std::optional<DeviceInfo> device_info() const override {
    return inner_->device_info();
  }

 protected:
  Backend* inner() const { return inner_; }

 private:
  Backend* const inner_;
};

// The labels every served model must read as one token each, since a
// label's logprob is read at one position, and that the two halves of a
// composite must give the same ids: A..Z, Yes, No, 1..9.
std::vector<std::string> CheckedLabels();

// FAILED_PRECONDITION naming the labels of CheckedLabels() whose ids under
// `local` differ from `remote` (the other side's ids, in CheckedLabels()
// order), as the reference's composite refuses to start; OK when none do.
absl::Status CheckLabelAgreement(
    const text::Tokenizer& local,
    const std::vector<std::vector<TokenId>>& remote);

// What a backend checks before any work, whoever called it (an RPC or the
// decider): every token id in [0, vocab_size), no prompt without tokens,
// label ids in range when `check_labels`; INVALID_ARGUMENT naming
// groups[g].prefix / .suffixes[s] / .label_ids[k].
absl::Status CheckPromptGroups(const std::vector<PromptGroup>& groups,
                               int32_t vocab_size, bool check_labels);

// Every layer in [0, n_layers] (already resolved), INVALID_ARGUMENT else.
absl::Status CheckResolvedLayers(const std::vector<int32_t>& layers,
                                 int32_t n_layers);

// Resolves a requested layer against n_layers: -1 -> n_layers, ..., and
// refuses anything outside [0, n_layers] with the limit named.
absl::StatusOr<int32_t> ResolveLayer(int32_t layer, int32_t n_layers);

}  // namespace mesa_anyjev
