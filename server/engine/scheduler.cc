#include "server/engine/scheduler.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status/retry_after.h"

namespace mesa_anyjev::engine {
namespace {

constexpr Priority kClasses[] = {Priority::kInteractive, Priority::kBatch};

absl::Status Refuse(std::string message) {
  return WithRetryAfter(absl::ResourceExhaustedError(std::move(message)),
                        kQueueFullRetryAfter);
}

std::string Named(const std::string& tenant) {
  return tenant.empty() ? std::string("(no token)")
                        : absl::StrCat("'", tenant, "'");
}

}  // namespace

Scheduler::Scheduler(SchedulerPolicy policy, SchedulerLimits limits)
    : policy_(policy), limits_(limits) {}

void Scheduler::SetTenants(const std::vector<TenantShare>& tenants) {
  tenants_.clear();
  for (const TenantShare& t : tenants) tenants_[t.name] = t;
}

const TenantShare& Scheduler::ShareOf(const std::string& tenant) const {
  const auto it = tenants_.find(tenant);
  return it == tenants_.end() ? default_share_ : it->second;
}

absl::Status Scheduler::Admit(JobId id, const std::string& tenant,
                              Priority priority, int64_t tokens,
                              std::string* refused_by) {
  auto refused = [&](const char* limit, std::string message) {
    if (refused_by != nullptr) *refused_by = limit;
    return Refuse(std::move(message));
  };
  // The capacity bounds the calls waiting, as the queue depth counts them;
  // a tenant's limits count its calls in a pass too.
  if (waiting_ >= limits_.capacity) {
    return refused("capacity",
                   absl::StrCat("queue full: ", limits_.capacity,
                                " calls already wait for the model "
                                "(server.queue_capacity); retry later"));
  }
  // A tenant's own limits, else the defaults, which guard tenants against
  // each other: without a tenant (auth off) or with one alone (a single
  // token) the capacity is the only limit.
  const TenantShare& share = ShareOf(tenant);
  const bool named = !tenant.empty() && tenants_.size() > 1;
  const auto held = held_by_tenant_.contains(tenant)
                        ? held_by_tenant_.at(tenant)
                        : std::pair<int32_t, int64_t>{0, 0};
  const int32_t max_calls = share.max_queued_calls > 0 ? share.max_queued_calls
                            : named                    ? limits_.tenant_calls
                                                       : 0;
  if (max_calls > 0 && held.first >= max_calls) {
    return refused(
        "tenant_calls",
        absl::StrCat(
            "tenant ", Named(tenant), " has ", held.first,
            " calls held by the model (waiting or in a pass), its limit "
            "(max_queued_calls "
            "in the tokens file, else engine.tenant_max_queued_calls); "
            "retry later"));
  }
  const int64_t max_tokens = share.max_queued_tokens > 0
                                 ? share.max_queued_tokens
                             : named ? limits_.tenant_tokens
                                     : 0;
  // A tenant with nothing held is always admitted one call, however large:
  // the call's own size has its limits (limits.*), and a limit that could
  // refuse a call forever would be no share at all.
  if (max_tokens > 0 && held.first > 0 && held.second + tokens > max_tokens) {
    return refused(
        "tenant_tokens",
        absl::StrCat("tenant ", Named(tenant), " has ", held.second,
                     " prompt tokens held by the model and this call adds ",
                     tokens, ", past its limit of ", max_tokens,
                     " (max_queued_tokens in the tokens file, else "
                     "engine.tenant_max_queued_tokens); retry later"));
  }
  Flow& flow = flows_[{static_cast<int>(priority), tenant}];
  if (flow.jobs.empty()) {
    // Back after a spell with nothing held: no credit for the spell. With
    // nobody busy, the last counter served is where the class stands.
    const std::optional<double> lowest = LowestBusy(priority);
    flow.counter =
        std::max(flow.counter,
                 lowest.value_or(last_served_[static_cast<size_t>(priority)]));
  }
  flow.jobs.push_back(id);
  jobs_[id] = Held{tenant, priority, tokens, arrivals_++};
  ++waiting_;
  auto& mine = held_by_tenant_[tenant];
  ++mine.first;
  mine.second += tokens;
  return absl::OkStatus();
}

std::optional<double> Scheduler::LowestBusy(Priority priority) const {
  std::optional<double> lowest;
  for (const auto& [key, flow] : flows_) {
    if (key.first != static_cast<int>(priority) || flow.jobs.empty()) continue;
    if (!lowest.has_value() || flow.counter < *lowest) lowest = flow.counter;
  }
  return lowest;
}

std::optional<Scheduler::JobId> Scheduler::Next(
    const std::function<bool(JobId)>& eligible) const {
  if (policy_ == SchedulerPolicy::kFifo) return NextFifo(eligible);
  for (Priority priority : kClasses) {
    std::optional<JobId> best;
    double best_counter = 0;
    uint64_t best_arrival = 0;
    for (const auto& [key, flow] : flows_) {
      if (key.first != static_cast<int>(priority)) continue;
      // The flow's oldest call that may take part; later ones only when the
      // older cannot (another task, or all of it planned already).
      for (JobId id : flow.jobs) {
        if (!eligible(id)) continue;
        const uint64_t arrival = jobs_.at(id).arrival;
        if (!best.has_value() || flow.counter < best_counter ||
            (flow.counter == best_counter && arrival < best_arrival)) {
          best = id;
          best_counter = flow.counter;
          best_arrival = arrival;
        }
        break;
      }
    }
    if (best.has_value()) return best;
  }
  return std::nullopt;
}

std::optional<Scheduler::JobId> Scheduler::NextFifo(
    const std::function<bool(JobId)>& eligible) const {
  std::optional<JobId> best;
  uint64_t best_arrival = std::numeric_limits<uint64_t>::max();
  for (const auto& [key, flow] : flows_) {
    for (JobId id : flow.jobs) {
      if (!eligible(id)) continue;
      if (jobs_.at(id).arrival < best_arrival) {
        best = id;
        best_arrival = jobs_.at(id).arrival;
      }
      break;  // a flow's calls are in arrival order
    }
  }
  return best;
}

bool Scheduler::InteractiveBesideBatch() const {
  return policy_ == SchedulerPolicy::kFair &&
         LowestBusy(Priority::kInteractive).has_value() &&
         LowestBusy(Priority::kBatch).has_value();
}

void Scheduler::Charge(JobId id, int64_t tokens) {
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  Held& held = it->second;
  if (!held.started) {
    held.started = true;
    --waiting_;
  }
  Flow& flow = flows_[{static_cast<int>(held.priority), held.tenant}];
  flow.counter += static_cast<double>(tokens) / ShareOf(held.tenant).weight;
  last_served_[static_cast<size_t>(held.priority)] = flow.counter;
}

void Scheduler::Finish(JobId id) {
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  const Held& held = it->second;
  Flow& flow = flows_[{static_cast<int>(held.priority), held.tenant}];
  flow.jobs.erase(std::find(flow.jobs.begin(), flow.jobs.end(), id));
  auto& mine = held_by_tenant_[held.tenant];
  --mine.first;
  mine.second -= held.tokens;
  if (mine.first == 0) held_by_tenant_.erase(held.tenant);
  if (!held.started) --waiting_;
  jobs_.erase(it);
}

int64_t Scheduler::tokens_of(const std::string& tenant) const {
  const auto it = held_by_tenant_.find(tenant);
  return it == held_by_tenant_.end() ? 0 : it->second.second;
}

double Scheduler::counter(Priority priority, const std::string& tenant) const {
  const auto it = flows_.find({static_cast<int>(priority), tenant});
  return it == flows_.end() ? 0 : it->second.counter;
}

}  // namespace mesa_anyjev::engine
