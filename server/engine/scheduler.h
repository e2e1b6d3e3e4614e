// Who the engine serves next (docs/architecture.md, "Scheduling"): the calls
// it holds, by priority class and tenant, the limits a call must pass to be
// held at all, and the order in which passes take work from them.
//
// - Classes are strict: a pass takes interactive work first and fills the
//   rest of its budget with batch work. A running pass is never interrupted
//   (the pass is the unit of preemption).
// - Inside a class, tenants with work held share the engine in proportion
//   to their weights, counted in the tokens their work costs (new tokens run
//   through the model: a cached prefix is free), not in calls: start-time
//   fair queuing over virtual token counters, as the Virtual Token Counter
//   of "Fairness in Serving Large Language Models" (OSDI 2024) counts them.
//   Each (class, tenant) has a counter that grows by tokens / weight as its
//   work is planned; the next work is the oldest call of the tenant with the
//   lowest counter. A tenant whose work arrives after a spell with none has
//   its counter lifted to the lowest of those with work, so an idle spell
//   banks no credit (and its share, while idle, went to the others: the
//   order is work-conserving); with nobody's work held, to the counter last
//   charged in its class.
// - Limits: calls held in all (server.queue_capacity: memory), and per
//   tenant calls and prompt tokens held (its entry in the tokens file, else
//   engine.tenant_max_queued_*), so one pipeline cannot fill the engine.
// - FIFO (engine.scheduler: fifo): arrival order across classes and
//   tenants, as the engine ran before; the limits still hold.
//
// Plain bookkeeping, no clock and no lock: the engine holds its own lock
// around it, and the unit tests drive it with a simulated engine.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/backend.h"

namespace mesa_anyjev::engine {

// A tenant's weight and limits (0: the engine's default limit).
struct TenantShare {
  std::string name;
  double weight = 1.0;
  int32_t max_queued_calls = 0;
  int64_t max_queued_tokens = 0;
};

enum class SchedulerPolicy { kFair = 0, kFifo = 1 };

struct SchedulerLimits {
  int32_t capacity = 256;     // calls held in all (server.queue_capacity)
  int32_t tenant_calls = 0;   // per tenant by default; 0: no limit
  int64_t tenant_tokens = 0;  // per tenant by default; 0: no limit
};

class Scheduler {
 public:
  using JobId = uint64_t;

  Scheduler(SchedulerPolicy policy, SchedulerLimits limits);

  // The tenants' weights and limits, on load and on every reload; a tenant
  // not named has weight 1 and, when several tenants are named, the default
  // limits (auth off, "", and a lone tenant: the capacity alone).
  void SetTenants(const std::vector<TenantShare>& tenants);

  // Holds call `id` of `tenant` in `priority` costing `tokens` prompt
  // tokens, or RESOURCE_EXHAUSTED naming the limit it would pass (and how
  // to change it), holding nothing. `refused_by`, when given, gets which
  // limit refused: "capacity", "tenant_calls" or "tenant_tokens".
  absl::Status Admit(JobId id, const std::string& tenant, Priority priority,
                     int64_t tokens, std::string* refused_by = nullptr);

  // The call to take work from next among those `eligible` allows, in
  // scheduling order; nullopt when there is none.
  std::optional<JobId> Next(const std::function<bool(JobId)>& eligible) const;

  // `tokens` of call `id`'s work were planned into a pass: its tenant's
  // counter in its class moves by tokens / weight.
  void Charge(JobId id, int64_t tokens);

  // The call is answered (or dropped): it leaves the scheduler.
  void Finish(JobId id);

  bool Holds(JobId id) const { return jobs_.contains(id); }
  // Whether interactive work is held beside batch work, which it goes
  // before (fair only: fifo knows no classes).
  bool InteractiveBesideBatch() const;
  int64_t size() const { return static_cast<int64_t>(jobs_.size()); }
  // Calls held and not yet in a pass: what the capacity bounds and the
  // queue depth shows.
  int64_t waiting() const { return waiting_; }
  int64_t tokens_of(const std::string& tenant) const;
  SchedulerPolicy policy() const { return policy_; }
  // A (class, tenant)'s counter: tokens / weight planned for it (tests,
  // metrics).
  double counter(Priority priority, const std::string& tenant) const;

 private:
  struct Held {
    std::string tenant;
    Priority priority;
    int64_t tokens = 0;
    uint64_t arrival = 0;
    bool started = false;  // charged for a pass
  };
  struct Flow {              // one (class, tenant)
    std::deque<JobId> jobs;  // in arrival order
    double counter = 0;
  };
  using FlowKey = std::pair<int, std::string>;  // (class, tenant)

  const TenantShare& ShareOf(const std::string& tenant) const;
  // The lowest counter among the flows of `priority` with work held.
  std::optional<double> LowestBusy(Priority priority) const;
  std::optional<JobId> NextFifo(
      const std::function<bool(JobId)>& eligible) const;

  const SchedulerPolicy policy_;
  const SchedulerLimits limits_;
  std::map<std::string, TenantShare> tenants_;
  TenantShare default_share_;
  absl::flat_hash_map<JobId, Held> jobs_;
  std::map<FlowKey, Flow> flows_;
  absl::flat_hash_map<std::string, std::pair<int32_t, int64_t>> held_by_tenant_;
  uint64_t arrivals_ = 0;
  int64_t waiting_ = 0;  // held and not yet in a pass: what the capacity bounds
  // Per class, the counter of the flow last charged.
  double last_served_[2] = {0, 0};
};

}  // namespace mesa_anyjev::engine
