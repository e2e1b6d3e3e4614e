#include "tests/tools/pass_anatomy.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "server/model/stages.h"

namespace mesa_anyjev::tools {
namespace {

using nlohmann::json;

// --- The profiler API, the one place that knows its version differences.
// torch 2.11 (the GPU host's) and 2.15 (ours) declare the same
// prepareProfiler(config, activities), enableProfiler(config, activities,
// scopes = {}), disableProfiler() and the KinetoEvent accessors used below
// (torch/csrc/autograd/profiler_kineto.h); 2.15 adds an activity filter and
// profiler extensions to prepareProfiler and reorders ExperimentalConfig's
// constructor (profiler_metrics first in 2.11), so the config is built from
// defaults only. KinetoEvent::activityType() is libkineto's ActivityType,
// whose values below are the same in both (kineto/ActivityType.h: 2.15
// numbers them explicitly, 2.11 implicitly in the same order).
enum KinetoActivity : uint8_t {
  kCpuOp = 0,
  kGpuMemcpy = 3,
  kGpuMemset = 4,
  kKernel = 5,
  kCudaRuntime = 7,
  kCudaDriver = 8,
};

std::unique_ptr<torch::autograd::profiler::ProfilerResult> Profile(
    const std::function<void()>& run, bool cuda) {
  namespace profiler = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const torch::profiler::impl::ProfilerConfig config(
      torch::profiler::impl::ProfilerState::KINETO);
  std::set<ActivityType> activities{ActivityType::CPU};
  if (cuda) activities.insert(ActivityType::CUDA);
  profiler::prepareProfiler(config, activities);
  profiler::enableProfiler(config, activities);
  run();
  return profiler::disableProfiler();
}
// --- end of the profiler API.

constexpr char kPrefix[] = "mesa.";

// The stages a transformer layer runs (per-layer figures); the output
// gathers run once per layer too.
const std::set<std::string>& LayerStages() {
  static const auto* stages = new std::set<std::string>{
      "input_norm",        "qkv_proj",   "qk_norm",      "rotary",
      "qk_norm_rotary",    "kv_write",   "attention",    "attention_gather",
      "attention_scatter", "o_proj",     "residual_add", "post_norm",
      "gate_up_proj",      "activation", "down_proj",    "gather_outputs"};
  return *stages;
}

struct Interval {
  std::string name;
  uint64_t start = 0, end = 0;
};

double Ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

class Scopes {
 public:
  // The stage scopes inside `call`, sorted by start.
  Scopes(std::vector<Interval> scopes) : scopes_(std::move(scopes)) {
    std::sort(scopes_.begin(), scopes_.end(),
              [](const Interval& a, const Interval& b) {
                return a.start != b.start ? a.start < b.start : a.end > b.end;
              });
  }

  // The innermost scope open at `t`; -1 for none.
  int Innermost(uint64_t t) const {
    int found = -1;
    for (size_t i = 0; i < scopes_.size() && scopes_[i].start <= t; ++i) {
      if (scopes_[i].end >= t) found = static_cast<int>(i);
    }
    return found;
  }

  // Each scope's time without the scopes nested in it.
  std::vector<uint64_t> Exclusive() const {
    std::vector<uint64_t> own(scopes_.size());
    for (size_t i = 0; i < scopes_.size(); ++i) {
      own[i] = scopes_[i].end - scopes_[i].start;
    }
    for (size_t i = 0; i < scopes_.size(); ++i) {
      // The parent: the innermost scope before it that contains it.
      for (size_t j = i; j-- > 0;) {
        if (scopes_[j].end >= scopes_[i].end) {
          own[j] -= std::min(own[j], scopes_[i].end - scopes_[i].start);
          break;
        }
      }
    }
    return own;
  }

  const Interval& operator[](int i) const {
    return scopes_[static_cast<size_t>(i)];
  }
  size_t size() const { return scopes_.size(); }

 private:
  std::vector<Interval> scopes_;
};

std::string Stage(const std::string& scope) {
  const std::string name = scope.substr(sizeof(kPrefix) - 1);
  return name == "call" || name == "pass" ? "unstaged host work" : name;
}

struct Row {
  int64_t count = 0;
  uint64_t ns = 0, host_ns = 0;
};

// Union of intervals, sorted by start; total length within [t0, t1].
std::vector<std::pair<uint64_t, uint64_t>> Merge(
    std::vector<std::pair<uint64_t, uint64_t>> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& s : spans) {
    if (!merged.empty() && s.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, s.second);
    } else {
      merged.push_back(s);
    }
  }
  return merged;
}

uint64_t Overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) {
  const uint64_t lo = std::max(a0, b0), hi = std::min(a1, b1);
  return hi > lo ? hi - lo : 0;
}

}  // namespace

json PassAnatomy(const std::function<void()>& run, bool cuda, int64_t layers) {
  std::chrono::steady_clock::time_point begin, end;
  const auto result = Profile(
      [&] {
        begin = std::chrono::steady_clock::now();
        {
          model::Stages call("mesa.call");
          run();
        }
        end = std::chrono::steady_clock::now();
      },
      cuda);
  const auto& events = result->events();
  const auto call = std::find_if(events.begin(), events.end(), [](auto& e) {
    return e.name() == "mesa.call";
  });
  if (call == events.end()) {
    throw std::runtime_error("the profiler recorded no mesa.call scope");
  }
  const uint64_t t0 = call->startNs(), t1 = call->endNs();
  const uint64_t thread = call->startThreadId();
  auto on_host = [&](const auto& e) {
    return e.deviceType() == c10::DeviceType::CPU &&
           e.startThreadId() == thread && e.startNs() >= t0 && e.endNs() <= t1;
  };

  std::vector<Interval> scope_list, ops;
  // Host times of launches: CUDA runtime and driver calls by CUPTI's
  // correlation id, operators by the profiler's own (two id spaces).
  std::unordered_map<uint64_t, uint64_t> launches, op_starts;
  std::vector<const torch::autograd::profiler::KinetoEvent*> device;
  for (const auto& e : events) {
    const bool staged = e.name().rfind(kPrefix, 0) == 0;
    const uint8_t type = e.activityType();
    if (staged && on_host(e)) {
      scope_list.push_back({e.name(), e.startNs(), e.endNs()});
    } else if (type == kCpuOp && on_host(e)) {
      ops.push_back({e.name(), e.startNs(), e.endNs()});
      op_starts.emplace(e.correlationId(), e.startNs());
    } else if (type == kCudaRuntime || type == kCudaDriver) {
      launches[e.correlationId()] = e.startNs();
    } else if (type == kKernel || type == kGpuMemset || type == kGpuMemcpy) {
      device.push_back(&e);
    }
  }
  const Scopes scopes(std::move(scope_list));
  const std::vector<uint64_t> exclusive = scopes.Exclusive();
  std::map<std::string, Row> rows;
  int64_t passes = 0;
  for (size_t i = 0; i < scopes.size(); ++i) {
    const int s = static_cast<int>(i);
    rows[Stage(scopes[s].name)].host_ns += exclusive[i];
    if (scopes[s].name == "mesa.pass") ++passes;
  }

  int64_t unattributed = 0, outside_span = 0;
  uint64_t overlap_ns = 0;
  if (!cuda) {
    // Operators: the top-level ones (not inside another operator) count,
    // and the stage's host time is its time.
    std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    uint64_t covered_until = 0;
    for (const Interval& op : ops) {
      if (op.start < covered_until) continue;
      covered_until = op.end;
      const int s = scopes.Innermost(op.start);
      ++rows[s < 0 ? "unstaged host work" : Stage(scopes[s].name)].count;
    }
    for (auto& [name, row] : rows) row.ns = row.host_ns;
  } else {
    // Kernels and copies on the device, each given to the stage that was
    // open when the host launched it (the CUDA runtime call of the same
    // correlation id, else the operator it is linked to).
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    uint64_t busy_sum = 0;
    for (const auto* e : device) {
      const uint64_t s0 = std::max(e->startNs(), t0);
      const uint64_t s1 = std::min(e->endNs(), t1);
      if (s1 <= s0) {
        ++outside_span;  // another call's, or clocks that disagree
        continue;
      }
      busy.push_back({s0, s1});
      busy_sum += s1 - s0;
      std::string stage;
      if (e->activityType() == kGpuMemcpy) {
        const std::string name = e->name();
        stage = name.find("HtoD") != std::string::npos ? "copies host to device"
                : name.find("DtoH") != std::string::npos
                    ? "copies device to host"
                    : "copies on the device";
      } else {
        int s = -1;
        if (const auto at = launches.find(e->correlationId());
            at != launches.end()) {
          s = scopes.Innermost(at->second);
        } else if (const auto op = op_starts.find(e->linkedCorrelationId());
                   op != op_starts.end()) {
          s = scopes.Innermost(op->second);
        }
        if (s < 0) ++unattributed;
        stage = s < 0 ? "unattributed kernels" : Stage(scopes[s].name);
      }
      Row& row = rows[stage];
      ++row.count;
      row.ns += s1 - s0;
    }
    const auto merged = Merge(std::move(busy));
    uint64_t busy_union = 0;
    for (const auto& m : merged) busy_union += m.second - m.first;
    overlap_ns = busy_sum - busy_union;
    // The device's idle time, and how much of it the host spent planning.
    uint64_t idle = 0, idle_planning = 0, cursor = t0;
    auto idle_span = [&](uint64_t a, uint64_t b) {
      if (b <= a) return;
      idle += b - a;
      for (size_t i = 0; i < scopes.size(); ++i) {
        const Interval& s = scopes[static_cast<int>(i)];
        if (s.name == "mesa.plan" || s.name == "mesa.inputs_to_device") {
          idle_planning += Overlap(a, b, s.start, s.end);
        }
      }
    };
    for (const auto& m : merged) {
      idle_span(cursor, m.first);
      cursor = std::max(cursor, m.second);
    }
    idle_span(cursor, t1);
    rows["device idle while the host plans"].ns = idle_planning;
    rows["device idle between kernels"].ns = idle - idle_planning;
  }

  json out_rows = json::array();
  uint64_t sum = 0;
  int64_t layer_count = 0;
  uint64_t layer_ns = 0;
  for (const auto& [name, row] : rows) {
    sum += row.ns;
    const bool per_layer = LayerStages().count(name) > 0;
    if (per_layer) {
      layer_count += row.count;
      layer_ns += row.ns;
    }
    json r = {{"stage", name},
              {"count", row.count},
              {"ms", Ms(row.ns)},
              {"host_ms", Ms(row.host_ns)},
              {"per_layer", per_layer}};
    out_rows.push_back(std::move(r));
  }
  std::sort(out_rows.begin(), out_rows.end(), [](const json& a, const json& b) {
    return a["ms"].get<double>() > b["ms"].get<double>();
  });
  const double wall_ms =
      std::chrono::duration<double, std::milli>(end - begin).count();
  const double n = static_cast<double>(std::max<int64_t>(layers, 1));
  return {{"unit", cuda ? "kernels" : "operators"},
          {"wall_ms", wall_ms},
          {"span_ms", Ms(t1 - t0)},
          {"sum_ms", Ms(sum)},
          {"passes", passes},
          {"layers", layers},
          {"rows", out_rows},
          {"per_layer",
           {{"count", static_cast<double>(layer_count) / n},
            {"ms", Ms(layer_ns) / n}}},
          {"unattributed", unattributed},
          {"outside_span", outside_span},
          {"overlap_ms", Ms(overlap_ns)}};
}

}  // namespace mesa_anyjev::tools
