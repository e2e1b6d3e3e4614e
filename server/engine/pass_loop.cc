#include "server/engine/pass_loop.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status/status_macros.h"
#include "server/model/device_fault.h"

namespace mesa_anyjev::engine {
namespace {

// The planner's refusal of a group the KV pool cannot hold, worded with the
// setting that sizes the pool (the planner knows no configuration).
absl::Status NamePool(absl::Status status,
                      const std::optional<PoolShortfall>& shortfall) {
  if (!absl::IsResourceExhausted(status) || !shortfall.has_value()) {
    return status;
  }
  return absl::ResourceExhaustedError(
      shortfall->Describe("the pool (engine.kv_pool_bytes)"));
}

}  // namespace

// A call whose work has begun: its groups as the planner works through
// them, and its output as the passes fill it in.
struct PassLoop::Active {
  HeldCall* call = nullptr;
  PlanWork work;
  // Output o is prompt (group, suffix) where[o].
  std::vector<std::pair<size_t, size_t>> where;
  int64_t delivered = 0;
  ForwardOutput output;
};

// A pass planned, and whose work it holds.
struct PassLoop::Planned {
  PlannedPass pass;
  ForwardTask task;
  std::vector<HeldCall*> calls;  // with work in the pass, in planning order
  std::vector<PassRecord::Share> shares;
};

PassLoop::PassLoop(model::PassRunner* runner, PassLoopOptions options,
                   EngineObserver* observer)
    : runner_(runner),
      options_(std::move(options)),
      observer_(observer),
      blocks_(options_.kv.num_blocks, options_.kv.block_tokens,
              options_.prefix_caching),
      planner_(&blocks_, options_.batch_tokens) {}

PassLoop::~PassLoop() = default;

absl::Status PassLoop::Check(const ForwardJob& job) const {
  const bool logprobs = std::holds_alternative<LogprobsTask>(job.task);
  RETURN_IF_ERROR(CheckPromptGroups(job.groups, options_.vocab_size,
                                    /*check_labels=*/logprobs));
  if (const auto* task = std::get_if<LogprobsTask>(&job.task)) {
    if (task->top_k < 0 || task->top_k > options_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("top_k: ", task->top_k,
                                                     " is outside [0, ",
                                                     options_.vocab_size, "]"));
    }
  } else {
    RETURN_IF_ERROR(CheckResolvedLayers(
        std::get<HiddenStatesTask>(job.task).layers, options_.n_layers));
  }
  std::optional<PoolShortfall> shortfall;
  return NamePool(PassPlanner::Check(job.groups, blocks_, &shortfall),
                  shortfall);
}

absl::StatusOr<bool> PassLoop::Step(HeldCalls& calls) {
  Sweep(calls);
  HoldIfPlanned();
  std::optional<Planned> planned = Plan(calls);
  if (!planned.has_value()) return false;
  Read(planned->task, *planned);
  const int64_t evictions = blocks_.evictions();
  ++passes_;
  const std::optional<InjectedFault> fault =
      options_.faults.has_value() ? options_.faults->NextPass() : std::nullopt;
  const absl::Time start = absl::Now();
  absl::StatusOr<model::PassOutput> out =
      runner_->RunPass(planned->pass.plan, fault);
  planner_.Finish(out.ok());
  Report(*planned, absl::Now() - start, evictions);
  if (!out.ok()) {
    Fail(calls, *planned, out.status());
    if (model::IsDeviceLost(out.status())) return out.status();
    return true;
  }
  if (observer_ != nullptr) {
    for (const std::string& note : out->notes) observer_->OnNote(note);
  }
  Deliver(calls, *planned, *out);
  return true;
}

void PassLoop::Sweep(HeldCalls& calls) {
  std::vector<HeldCall*> stopped;
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&calls.mu());
    for (HeldCall* call : calls.All()) {
      if (call->job.caller.ShouldStop(now)) stopped.push_back(call);
    }
  }
  for (HeldCall* call : stopped) {
    if (const auto it = active_.find(call->id); it != active_.end()) {
      planner_.Drop(it->second->work);
      active_.erase(it);
    }
    calls.AnswerStopped(call, now);
  }
}

void PassLoop::HoldIfPlanned() {
  if (!options_.faults.has_value()) return;
  const std::optional<std::string> until =
      options_.faults->HoldBefore(passes_ + 1);
  if (!until.has_value()) return;
  if (observer_ != nullptr) {
    observer_->OnNote(absl::StrCat("engine held before pass ", passes_ + 1,
                                   " until ", *until,
                                   " exists (--inject-faults)"));
  }
  // A test's hold: it makes the file once the calls it sends are held.
  std::error_code error;
  while (!std::filesystem::exists(*until, error)) {
    absl::SleepFor(absl::Milliseconds(5));
  }
}

PassLoop::Active& PassLoop::ActiveOf(HeldCall& call) {
  std::unique_ptr<Active>& slot = active_[call.id];
  if (slot != nullptr) return *slot;
  slot = std::make_unique<Active>(
      Active{&call,
             planner_.Prepare(call.job.groups, static_cast<int64_t>(call.id)),
             {},
             0,
             {}});
  const std::vector<PromptGroup>& groups = call.job.groups;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < groups[g].suffixes.size(); ++i) {
      slot->where.push_back({g, i});
    }
  }
  if (const auto* task = std::get_if<HiddenStatesTask>(&call.job.task)) {
    HiddenStatesResult hidden;
    hidden.layers = task->layers;
    hidden.n_prompts = static_cast<int32_t>(slot->where.size());
    hidden.hidden_size = options_.hidden_size;
    hidden.values.resize(slot->where.size() * task->layers.size() *
                         static_cast<size_t>(options_.hidden_size));
    slot->output = std::move(hidden);
  } else {
    GroupLogprobs rows(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      rows[g].resize(groups[g].suffixes.size());
    }
    slot->output = std::move(rows);
  }
  return *slot;
}

std::optional<PassLoop::Planned> PassLoop::Plan(HeldCalls& calls) {
  Planned planned;
  std::vector<std::pair<HeldCall*, absl::Status>> refused;
  {
    absl::MutexLock lock(&calls.mu());
    const std::shared_ptr<void> stage = runner_->OpenStage("mesa.schedule");
    const auto has_work = [this](const HeldCall& c) {
      const auto it = active_.find(c.id);
      return it == active_.end() || !it->second->work.done();
    };
    // A part-planned group holds blocks across passes: it goes first, so
    // the pool is never split between two of them.
    HeldCall* call = nullptr;
    for (const auto& [id, active] : active_) {
      if (active->work.open()) call = active->call;
    }
    if (call == nullptr) call = calls.Next(has_work);
    if (call == nullptr) return std::nullopt;
    planned.task = call->job.task;
    const auto* hidden = std::get_if<HiddenStatesTask>(&planned.task);
    int32_t layers = options_.n_layers;
    if (hidden != nullptr) {
      layers = 0;
      for (int32_t l : hidden->layers) layers = std::max(layers, l);
    }
    // Interactive work held beside batch work rides in a shorter pass: its
    // callers wait for the pass running and then this one, so this one
    // bounds their wait. Alone (auth off: every call), passes stay full.
    // The passes of batch work right after it stay short too: a caller's
    // next question, sent as its answer lands, waits for one of those.
    const bool beside = calls.InteractiveBesideBatch();
    const bool after = !beside && short_passes_left_ > 0 &&
                       call->job.caller.priority == Priority::kBatch;
    short_passes_left_ = beside  ? options_.short_passes_after_interactive
                         : after ? short_passes_left_ - 1
                                 : 0;
    const int64_t budget =
        beside || after ? options_.interactive_pass_tokens : 0;
    (void)planner_.Begin(layers, budget);  // the last pass is settled by now
    while (call != nullptr) {
      Active& active = ActiveOf(*call);
      const int64_t before = planner_.pass_tokens();
      absl::StatusOr<bool> room = planner_.Add(active.work);
      const int64_t tokens = planner_.pass_tokens() - before;
      if (!room.ok()) {
        planner_.Drop(active.work);
        active_.erase(call->id);
        refused.push_back(
            {call, NamePool(room.status(), planner_.shortfall())});
      } else if (tokens > 0) {
        calls.Charge(*call, tokens);
        if (std::find(planned.calls.begin(), planned.calls.end(), call) ==
            planned.calls.end()) {
          planned.calls.push_back(call);
        }
        planned.shares.push_back(
            {call->job.caller.tenant, call->job.caller.priority, tokens});
      }
      if (room.ok() && !*room) break;
      call = calls.Next([&](const HeldCall& c) {
        return c.job.task == planned.task && has_work(c) &&
               std::none_of(refused.begin(), refused.end(),
                            [&](const auto& r) { return r.first == &c; });
      });
    }
    planned.pass = planner_.Take();
  }
  for (auto& [call, status] : refused) calls.Answer(call, std::move(status));
  if (planned.pass.plan.keys.segments.empty()) return std::nullopt;
  return planned;
}

void PassLoop::Read(const ForwardTask& task, Planned& planned) {
  model::PassReading& read = planned.pass.plan.read;
  if (const auto* hidden = std::get_if<HiddenStatesTask>(&task)) {
    read.layers = hidden->layers;
    int32_t deepest = 0;
    for (int32_t l : hidden->layers) deepest = std::max(deepest, l);
    read.final_norm = deepest == options_.n_layers;
    read.layers_run = deepest;
    return;
  }
  read.logprobs = true;
  read.top_k = std::get<LogprobsTask>(task).top_k;
  read.final_norm = true;
  read.layers_run = options_.n_layers;
  // Each row's label ids, rows shorter than the widest repeating their
  // last (an empty row: id 0).
  model::PassArrays& a = planned.pass.plan.arrays;
  std::vector<const std::vector<TokenId>*> labels;
  for (const RowOwner& row : planned.pass.rows) {
    const Active& active =
        *active_.at(static_cast<Scheduler::JobId>(row.owner));
    const size_t g = active.where[static_cast<size_t>(row.output)].first;
    labels.push_back(&active.call->job.groups[g].label_ids);
    a.label_width =
        std::max(a.label_width, static_cast<int64_t>(labels.back()->size()));
  }
  for (const std::vector<TokenId>* row : labels) {
    for (int64_t k = 0; k < a.label_width; ++k) {
      a.labels.push_back(row->empty()
                             ? 0
                             : (*row)[static_cast<size_t>(std::min<int64_t>(
                                   k, static_cast<int64_t>(row->size()) - 1))]);
    }
  }
}

void PassLoop::Deliver(HeldCalls& calls, Planned& planned,
                       const model::PassOutput& out) {
  const model::PassPlan& plan = planned.pass.plan;
  const int64_t width = plan.arrays.label_width;
  const int32_t top_k = plan.read.top_k;
  for (size_t r = 0; r < planned.pass.rows.size(); ++r) {
    const RowOwner& row = planned.pass.rows[r];
    Active& active = *active_.at(static_cast<Scheduler::JobId>(row.owner));
    const auto [g, i] = active.where[static_cast<size_t>(row.output)];
    const PromptGroup& group = active.call->job.groups[g];
    if (auto* rows = std::get_if<GroupLogprobs>(&active.output)) {
      PromptLogprobs& dst = (*rows)[g][i];
      for (size_t k = 0; k < group.label_ids.size(); ++k) {
        dst.label_logprobs.push_back(
            out.labels[r * static_cast<size_t>(width) + k]);
      }
      for (int32_t k = 0; k < top_k; ++k) {
        const size_t at =
            r * static_cast<size_t>(top_k) + static_cast<size_t>(k);
        dst.top.push_back(
            {static_cast<TokenId>(out.top_ids[at]), out.top_values[at]});
      }
      dst.n_tokens =
          static_cast<int32_t>(group.prefix.size() + group.suffixes[i].size());
    } else {
      auto& hidden = std::get<HiddenStatesResult>(active.output);
      const size_t row_values =
          hidden.layers.size() * static_cast<size_t>(hidden.hidden_size);
      std::memcpy(
          hidden.values.data() + static_cast<size_t>(row.output) * row_values,
          out.hidden.data() + r * row_values, row_values * sizeof(float));
    }
    ++active.delivered;
  }
  const absl::Time now = absl::Now();
  for (HeldCall* call : planned.calls) {
    const auto it = active_.find(call->id);
    if (it == active_.end() || !it->second->work.done() ||
        it->second->delivered <
            static_cast<int64_t>(it->second->where.size())) {
      continue;
    }
    const std::unique_ptr<Active> finished = std::move(it->second);
    active_.erase(it);
    if (call->job.caller.ShouldStop(now)) {
      calls.AnswerStopped(call, now);
    } else {
      calls.Answer(call, std::move(finished->output));
    }
  }
}

void PassLoop::Fail(HeldCalls& calls, Planned& planned,
                    const absl::Status& status) {
  const absl::Time now = absl::Now();
  for (HeldCall* call : planned.calls) {
    if (const auto it = active_.find(call->id); it != active_.end()) {
      planner_.Drop(it->second->work);
      active_.erase(it);
    }
    if (call->job.caller.ShouldStop(now) && !model::IsDeviceLost(status)) {
      calls.AnswerStopped(call, now);
    } else {
      calls.Answer(call, status);
    }
  }
}

void PassLoop::Report(const Planned& planned, absl::Duration took,
                      int64_t evictions) {
  if (observer_ == nullptr) return;
  PassRecord record;
  record.number = passes_;
  record.segments = planned.pass.segments();
  record.tokens = planned.pass.tokens;
  record.rows = static_cast<int64_t>(planned.pass.rows.size());
  record.shares = planned.shares;
  record.took = took;
  observer_->OnPass(record);
  const PlanStats& stats = planner_.stats();
  observer_->OnPrefixLookups(stats.prefix_hits - reported_.prefix_hits,
                             stats.prefix_misses - reported_.prefix_misses,
                             stats.reused_tokens - reported_.reused_tokens);
  reported_ = stats;
  observer_->OnPrefixEvictions(blocks_.evictions() - evictions);
  observer_->OnKvPool(blocks_.referenced(), blocks_.cached(),
                      blocks_.num_blocks(), options_.kv.block_bytes);
}

}  // namespace mesa_anyjev::engine
