// Test tool: loads a Qwen3 checkpoint through the daemon's Qwen3Backend and
// answers one JSON request on stdin with what the backend computes, for the
// transformers parity tests (tests/e2e/test_qwen3_parity.py).
//
//   qwen3_dump DIR [dtype] [attention] [device] [cpu_gemm]
//                                     < {"prompts": [[ids]], "layers": [..],
//                                         "label_ids": [..], "top_k": k}
//   -> {"hidden": [p][l][h], "label_logprobs": [p][i], "top": [p][[id, lp]],
//       "identity": "...", "weight_bytes": n}
//   or, when the backend refuses, exit 1 with "CODE: message" on stderr.
#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/time/clock.h"
#include "common/text/bpe_tokenizer.h"
#include "server/engine/qwen3_backend.h"
#include "server/model/qwen3_loader.h"

namespace {

using nlohmann::json;

// VmRSS of this process in bytes.
int64_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(1 << 20, '\n');
  }
  return -1;
}

// Counts what the engine reports, for the cache tests.
struct CountingObserver : mesa_anyjev::engine::EngineObserver {
  int64_t hits = 0, misses = 0, tokens = 0, passes = 0;
  void OnPrefixLookups(int64_t h, int64_t m, int64_t) override {
    hits += h;
    misses += m;
  }
  void OnBatch(int64_t, int64_t t, absl::Duration) override {
    tokens += t;
    ++passes;
  }
};

// One request: "prompts" (each a group of one whole prompt) or "groups"
// ([{"prefix": ids, "suffixes": [ids]}]), "layers", "label_ids", "top_k".
// Outputs are per prompt, groups in order then suffixes in order.
std::vector<mesa_anyjev::PromptGroup> Groups(const json& request) {
  std::vector<mesa_anyjev::PromptGroup> groups;
  const auto labels = request.value("label_ids", std::vector<int32_t>{});
  for (const auto& prompt : request.value("prompts", json::array())) {
    groups.push_back({prompt.get<std::vector<int32_t>>(), {{}}, labels});
  }
  for (const auto& g : request.value("groups", json::array())) {
    groups.push_back({g.at("prefix").get<std::vector<int32_t>>(),
                      g.at("suffixes").get<std::vector<std::vector<int32_t>>>(),
                      labels});
  }
  return groups;
}

// Runs a request's work and drops the results (for timing).
absl::Status RunOnly(mesa_anyjev::Backend& backend, const json& request) {
  const auto groups = Groups(request);
  const mesa_anyjev::CallControl control;
  const auto layers = request.value("layers", std::vector<int32_t>{});
  if (!layers.empty()) {
    return backend.HiddenStates(groups, layers, control).status();
  }
  return backend.Logprobs(groups, request.value("top_k", 0), control).status();
}

// "parts": [{"first_group": g, "stopped": "cancelled" | "deadline" | null}]
// makes the call a merged one, as the job queue hands the backend: one
// member per part (its groups from first_group up to the next part's), each
// member's caller already stopped as named. Without it, one member.
struct Members {
  std::vector<std::vector<mesa_anyjev::PromptGroup>> groups;
  std::vector<std::unique_ptr<std::atomic<bool>>> flags;
  std::vector<mesa_anyjev::engine::ForwardMember> members;
};

std::unique_ptr<Members> MembersOf(
    const json& request, std::vector<mesa_anyjev::PromptGroup> groups) {
  auto out = std::make_unique<Members>();
  const json parts = request.value("parts", json::array());
  if (parts.empty()) {
    out->groups.push_back(std::move(groups));
    out->members.push_back({&out->groups.back(), {}});
    return out;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const size_t first = parts[i].at("first_group").get<size_t>();
    const size_t end = i + 1 < parts.size()
                           ? parts[i + 1].at("first_group").get<size_t>()
                           : groups.size();
    out->groups.emplace_back(groups.begin() + first, groups.begin() + end);
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string stopped =
        parts[i].contains("stopped") && parts[i]["stopped"].is_string()
            ? parts[i]["stopped"].get<std::string>()
            : "";
    out->flags.push_back(
        std::make_unique<std::atomic<bool>>(stopped == "cancelled"));
    out->members.push_back(
        {&out->groups[i],
         {stopped == "deadline" ? absl::Now() : absl::InfiniteFuture(),
          out->flags.back().get()}});
  }
  return out;
}

absl::StatusOr<json> Answer(mesa_anyjev::engine::ForwardModel& model,
                            const json& request) {
  using mesa_anyjev::engine::OutputAs;
  const std::unique_ptr<Members> call = MembersOf(request, Groups(request));
  json out = json::object();
  const auto layers = request.value("layers", std::vector<int32_t>{});
  if (!layers.empty()) {
    auto hidden = OutputAs<mesa_anyjev::HiddenStatesResult>(model.Run(
        {mesa_anyjev::engine::HiddenStatesTask{layers}, call->members}));
    if (!hidden.ok()) return hidden.status();
    json rows = json::array();
    const size_t h = static_cast<size_t>(hidden->hidden_size);
    for (int32_t p = 0; p < hidden->n_prompts; ++p) {
      json per_layer = json::array();
      for (size_t l = 0; l < layers.size(); ++l) {
        const float* begin = hidden->values.data() +
                             (static_cast<size_t>(p) * layers.size() + l) * h;
        per_layer.push_back(std::vector<float>(begin, begin + h));
      }
      rows.push_back(per_layer);
    }
    out["hidden"] = rows;
  }
  if (request.contains("label_ids") || request.value("top_k", 0) > 0) {
    auto logprobs = OutputAs<mesa_anyjev::engine::GroupLogprobs>(
        model.Run({mesa_anyjev::engine::LogprobsTask{request.value("top_k", 0)},
                   call->members}));
    if (!logprobs.ok()) return logprobs.status();
    json label_rows = json::array(), top = json::array();
    for (const auto& group : *logprobs) {
      for (const auto& prompt : group) {
        label_rows.push_back(prompt.label_logprobs);
        json entries = json::array();
        for (const auto& t : prompt.top) entries.push_back({t.id, t.logprob});
        top.push_back(entries);
      }
    }
    out["label_logprobs"] = label_rows;
    out["top"] = top;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using nlohmann::json;
  if (argc < 2) {
    std::cerr << "usage: qwen3_dump DIR [dtype] [attention] [device] "
                 "[cpu_gemm] < request.json\n";
    return 2;
  }
  mesa_anyjev::config::ModelConfig config;
  config.path = argv[1];
  if (argc > 2) config.dtype = argv[2];
  if (argc > 3) config.attention = argv[3];
  if (argc > 4) config.device = argv[4];
  if (argc > 5) config.cpu_gemm = argv[5];
  const json request = json::parse(std::cin);
  // model.threads, as the daemon sets it (0: every core).
  config.threads = request.value("threads", 0);
  if (request.value("measure_rss", false)) {
    // Resident memory that the tokenizer and the weights add, each alone,
    // after libtorch's runtime is warm.
    (void)at::ones({8, 8}).matmul(at::ones({8, 8})).sum().item<float>();
    const int64_t rss0 = ResidentBytes();
    auto tokenizer = mesa_anyjev::text::BpeTokenizer::FromFile(
        config.path + "/tokenizer.json");
    const int64_t rss1 = ResidentBytes();
    auto opened = mesa_anyjev::model::OpenQwen3(config.path, {});
    auto loaded =
        opened.ok()
            ? mesa_anyjev::model::LoadQwen3(*std::move(opened), {})
            : absl::StatusOr<mesa_anyjev::model::LoadedQwen3>(opened.status());
    const int64_t rss2 = ResidentBytes();
    if (!tokenizer.ok() || !loaded.ok()) {
      std::cerr << "load failed\n";
      return 1;
    }
    std::cout << json{{"tokenizer_rss", rss1 - rss0},
                      {"weights_rss", rss2 - rss1},
                      {"weight_bytes", loaded->weight_bytes}}
                     .dump()
              << "\n";
    return 0;
  }
  mesa_anyjev::config::EngineConfig engine;
  engine.batch_tokens = request.value("batch_tokens", engine.batch_tokens);
  engine.kv_pool_bytes = request.value("kv_pool_bytes", engine.kv_pool_bytes);
  engine.kv_block_tokens =
      request.value("kv_block_tokens", engine.kv_block_tokens);
  engine.prefix_caching = request.value("prefix_caching", true);
  CountingObserver observer;
  auto backend =
      mesa_anyjev::engine::Qwen3Backend::Load(config, engine, &observer);
  if (!backend.ok()) {
    std::cerr << backend.status().message() << "\n";
    return 1;
  }
  if (request.contains("time_prefill")) {
    // Prefill throughput: `batch` prompts of `tokens` ids, logprobs of one
    // label at the last position, `repeat` times after one warm-up.
    const json& t = request["time_prefill"];
    const int tokens = t.value("tokens", 512), batch = t.value("batch", 1);
    const int repeat = t.value("repeat", 5);
    std::vector<mesa_anyjev::PromptGroup> prompts(static_cast<size_t>(batch));
    for (int b = 0; b < batch; ++b) {
      for (int i = 0; i < tokens; ++i) {
        prompts[b].prefix.push_back((i * 7919 + b * 104729) % 151000);
      }
      prompts[b].suffixes = {{}};
      prompts[b].label_ids = {32};
    }
    const mesa_anyjev::CallControl control;
    if (!(*backend)->Logprobs(prompts, 0, control).ok()) return 1;
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < repeat; ++r) {
      if (!(*backend)->Logprobs(prompts, 0, control).ok()) return 1;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count() /
        repeat;
    std::cout << json{{"seconds_per_forward", seconds},
                      {"tokens_per_second", tokens * batch / seconds}}
                     .dump()
              << "\n";
    return 0;
  }
  if (request.contains("time")) {
    // Seconds per pass over `calls`, best of `repeat` after one warm-up;
    // or over each of `passes` (lists of calls), best after the first, so
    // that a timed pass does not find its prefixes cached by an earlier one.
    const json& t = request["time"];
    std::vector<const json*> passes;
    if (t.contains("passes")) {
      for (const json& pass : t["passes"]) passes.push_back(&pass);
    } else {
      for (int r = 0; r <= t.value("repeat", 3); ++r) {
        passes.push_back(&t.at("calls"));
      }
    }
    double best = 1e300;
    for (size_t r = 0; r < passes.size(); ++r) {
      const auto start = std::chrono::steady_clock::now();
      for (const json& call : *passes[r]) {
        if (absl::Status s = RunOnly(**backend, call); !s.ok()) {
          std::cerr << s.message() << "\n";
          return 1;
        }
      }
      const double seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start)
                                 .count();
      if (r > 0) best = std::min(best, seconds);
    }
    std::cout << json{{"seconds", best}, {"tokens_run", observer.tokens}}.dump()
              << "\n";
    return 0;
  }
  if (request.contains("calls")) {
    json answers = json::array();
    for (const json& call : request["calls"]) {
      auto answer = Answer(**backend, call);
      if (!answer.ok()) {
        std::cerr << answer.status().ToString() << "\n";
        return 1;
      }
      answers.push_back(*std::move(answer));
    }
    std::cout << json{{"calls", answers},
                      {"prefix_hits", observer.hits},
                      {"prefix_misses", observer.misses},
                      {"tokens_run", observer.tokens},
                      {"passes", observer.passes}}
                     .dump()
              << "\n";
    return 0;
  }
  auto answer = Answer(**backend, request);
  if (!answer.ok()) {
    std::cerr << answer.status().ToString() << "\n";
    return 1;
  }
  (*answer)["identity"] = (*backend)->identity().identity;
  (*answer)["weight_bytes"] = (*backend)->weight_bytes();
  (*answer)["n_layers"] = (*backend)->capabilities().n_layers;
  (*answer)["passes"] = observer.passes;
  std::cout << answer->dump() << "\n";
  return 0;
}
