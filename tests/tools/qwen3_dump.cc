// Test tool: loads a Qwen3 checkpoint as the daemon does (its model runner
// under the engine's pass loop, reached through the engine's queue) and
// answers one JSON request on stdin with what the engine computes, for the
// transformers parity tests (tests/e2e/test_qwen3_parity.py), the benchmarks
// and the GPU check.
//
//   qwen3_dump DIR [dtype] [attention] [device] [cpu_gemm] [--set k=v ...]
//                                     < {"prompts": [[ids]], "layers": [..],
//                                         "label_ids": [..], "top_k": k}
//   -> {"hidden": [p][l][h], "label_logprobs": [p][i], "top": [p][[id, lp]],
//       "identity": "...", "weight_bytes": n}
//   or, when the backend refuses, exit 1 with "CODE: message" on stderr.
// --set takes any configuration key as the daemon's --set does (model.* and
// engine.*, e.g. a variant of the GPU check), checked by the same loader:
// an unknown key or a bad value exits 2. The request's own fields
// (batch_tokens, kv_pool_bytes, kv_block_tokens, prefix_caching, threads)
// override the configuration.
//
// {"time_prefill": {"shapes": [{"tokens": t, "batch": b}], "repeat": r}}
// times each shape's call (b prompts of t new tokens, logprobs of one label
// at each last position) r times after one warm-up, fresh random ids every
// time, so that nothing is found in the prefix cache (the reply counts what
// was: it must be 0). {"profile": {"tokens": t, "batch": b}} runs one such
// call under the profiler after a warm-up (tests/tools/pass_anatomy.h);
// with "shapes" one call of each, as {"anatomies": [...]}.
//
// --serve keeps one load for many requests: one JSON request a line on
// stdin, one answer a line on stdout ({"error": "CODE: message"} for a
// refusal), the load's settings from --set only.
#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/config/config_loader.h"
#include "common/config/set_flag.h"
#include "common/text/bpe_tokenizer.h"
#include "server/engine/checkpoint_model.h"
#include "server/engine/engine.h"
#include "server/model/qwen3_loader.h"
#include "tests/tools/pass_anatomy.h"

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
  int64_t hits = 0, misses = 0, reused = 0, tokens = 0, passes = 0;
  void OnPrefixLookups(int64_t h, int64_t m, int64_t r) override {
    hits += h;
    misses += m;
    reused += r;
  }
  void OnPass(const mesa_anyjev::engine::PassRecord& pass) override {
    tokens += pass.tokens;
    ++passes;
  }
};

// The checkpoint served as the daemon serves it: the runner under the
// engine's pass loop. The engine is never started: its work runs on this
// thread (Engine::RunHere), where the profiler of a "profile" request sees
// the passes.
struct Served {
  std::unique_ptr<mesa_anyjev::engine::CheckpointModel> checkpoint;
  std::unique_ptr<mesa_anyjev::engine::Engine> engine;
};

absl::StatusOr<Served> Serve(const mesa_anyjev::config::ModelConfig& config,
                             const mesa_anyjev::config::EngineConfig& engine,
                             CountingObserver* observer) {
  namespace e = mesa_anyjev::engine;
  Served served;
  auto checkpoint = e::LoadCheckpoint(config, engine);
  if (!checkpoint.ok()) return checkpoint.status();
  served.checkpoint = *std::move(checkpoint);
  served.engine = std::make_unique<e::Engine>(e::EngineOptions{}, observer);
  served.engine->SetLoop(std::make_unique<e::PassLoop>(
      served.checkpoint->runner.get(), served.checkpoint->LoopOptions(engine),
      observer));
  return served;
}

// Every job at once, as callers' calls reach the engine, then the engine's
// work on this thread until each is answered.
std::vector<absl::StatusOr<mesa_anyjev::engine::ForwardOutput>> RunJobs(
    mesa_anyjev::engine::Engine& engine,
    const std::vector<std::pair<std::vector<mesa_anyjev::PromptGroup>,
                                mesa_anyjev::Caller>>& jobs,
    const mesa_anyjev::engine::ForwardTask& task) {
  namespace e = mesa_anyjev::engine;
  std::vector<absl::StatusOr<e::ForwardOutput>> out(jobs.size());
  size_t answered = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    absl::Status submitted = engine.TrySubmit(
        {task, jobs[i].first, jobs[i].second,
         [&out, &answered, i](absl::StatusOr<e::ForwardOutput> answer) {
           out[i] = std::move(answer);
           ++answered;
         }});
    if (!submitted.ok()) {
      out[i] = submitted;
      ++answered;
    }
  }
  engine.RunHere([&] { return answered == jobs.size(); });
  return out;
}

// One call's logprobs (top_k 0), for timing: only its status.
absl::Status Logprobs(Served& served,
                      const std::vector<mesa_anyjev::PromptGroup>& groups) {
  return RunJobs(*served.engine, {{groups, {}}},
                 mesa_anyjev::engine::LogprobsTask{0})[0]
      .status();
}

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
absl::Status RunOnly(Served& served, const json& request) {
  namespace e = mesa_anyjev::engine;
  const auto layers = request.value("layers", std::vector<int32_t>{});
  const e::ForwardTask task =
      layers.empty()
          ? e::ForwardTask(e::LogprobsTask{request.value("top_k", 0)})
          : e::ForwardTask(e::HiddenStatesTask{layers});
  return RunJobs(*served.engine, {{Groups(request), {}}}, task)[0].status();
}

// "parts": [{"first_group": g, "stopped": "cancelled" | "deadline" | null}]
// sends the request as several callers' calls at once: one call per part
// (its groups from first_group up to the next part's), each caller already
// stopped as named. Without it, one call.
struct Part {
  std::vector<mesa_anyjev::PromptGroup> groups;
  std::unique_ptr<std::atomic<bool>> cancelled;
  mesa_anyjev::Caller caller;
};

std::vector<Part> PartsOf(const json& request,
                          std::vector<mesa_anyjev::PromptGroup> groups) {
  const json parts = request.value("parts", json::array());
  std::vector<Part> out;
  if (parts.empty()) {
    out.push_back({std::move(groups), nullptr, {}});
    return out;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const size_t first = parts[i].at("first_group").get<size_t>();
    const size_t end = i + 1 < parts.size()
                           ? parts[i + 1].at("first_group").get<size_t>()
                           : groups.size();
    const std::string stopped =
        parts[i].contains("stopped") && parts[i]["stopped"].is_string()
            ? parts[i]["stopped"].get<std::string>()
            : "";
    Part part{{groups.begin() + first, groups.begin() + end},
              std::make_unique<std::atomic<bool>>(stopped == "cancelled"),
              {}};
    part.caller = {stopped == "deadline" ? absl::Now() : absl::InfiniteFuture(),
                   part.cancelled.get()};
    out.push_back(std::move(part));
  }
  return out;
}

// Every part's call at once, each a job of its own.
std::vector<absl::StatusOr<mesa_anyjev::engine::ForwardOutput>> RunParts(
    mesa_anyjev::engine::Engine& engine, const std::vector<Part>& parts,
    const mesa_anyjev::engine::ForwardTask& task) {
  std::vector<
      std::pair<std::vector<mesa_anyjev::PromptGroup>, mesa_anyjev::Caller>>
      jobs;
  for (const Part& part : parts) jobs.push_back({part.groups, part.caller});
  return RunJobs(engine, jobs, task);
}

// The answers of the parts that were served, in order, and each part's
// status ("OK" or "CODE: message") when there are parts; the first refusal
// when no part was served.
absl::StatusOr<json> Answer(mesa_anyjev::engine::Engine& engine,
                            const json& request) {
  namespace e = mesa_anyjev::engine;
  const std::vector<Part> parts = PartsOf(request, Groups(request));
  json out = json::object();
  // Each part's first failure (OK while it has none).
  std::vector<absl::Status> statuses(parts.size());
  const auto note = [&](size_t part, const absl::Status& status) {
    if (statuses[part].ok()) statuses[part] = status;
  };
  const auto layers = request.value("layers", std::vector<int32_t>{});
  if (!layers.empty()) {
    json rows = json::array();
    auto answers = RunParts(engine, parts, e::HiddenStatesTask{layers});
    for (size_t i = 0; i < answers.size(); ++i) {
      auto hidden =
          e::OutputAs<mesa_anyjev::HiddenStatesResult>(std::move(answers[i]));
      note(i, hidden.status());
      if (!hidden.ok()) continue;
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
    }
    out["hidden"] = rows;
  }
  if (request.contains("label_ids") || request.value("top_k", 0) > 0) {
    json label_rows = json::array(), top = json::array();
    auto answers =
        RunParts(engine, parts, e::LogprobsTask{request.value("top_k", 0)});
    for (size_t i = 0; i < answers.size(); ++i) {
      auto logprobs = e::OutputAs<e::GroupLogprobs>(std::move(answers[i]));
      note(i, logprobs.status());
      if (!logprobs.ok()) continue;
      for (const auto& group : *logprobs) {
        for (const auto& prompt : group) {
          label_rows.push_back(prompt.label_logprobs);
          json entries = json::array();
          for (const auto& t : prompt.top) entries.push_back({t.id, t.logprob});
          top.push_back(entries);
        }
      }
    }
    out["label_logprobs"] = label_rows;
    out["top"] = top;
  }
  const bool any = std::any_of(statuses.begin(), statuses.end(),
                               [](const absl::Status& st) { return st.ok(); });
  if (!any) return statuses.front();
  if (request.contains("parts")) {
    json named = json::array();
    for (const absl::Status& st : statuses) {
      named.push_back(st.ok() ? "OK" : st.ToString());
    }
    out["parts"] = named;
  }
  return out;
}

// The positional arguments as model.* keys, then every --set, through the
// daemon's configuration loader.
absl::StatusOr<mesa_anyjev::config::Config> ConfigFrom(int argc, char** argv) {
  using mesa_anyjev::config::Override;
  static constexpr const char* kPositional[] = {
      "model.path", "model.dtype", "model.attention", "model.device",
      "model.cpu_gemm"};
  std::vector<Override> positional, sets;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--set") {
      if (++i == argc) {
        return absl::InvalidArgumentError("--set needs section.field=value");
      }
      auto parsed = mesa_anyjev::config::ParseSetFlag(argv[i]);
      if (!parsed.ok()) return parsed.status();
      sets.push_back(*std::move(parsed));
    } else if (positional.size() < std::size(kPositional)) {
      positional.push_back({kPositional[positional.size()], arg, "argument"});
    } else {
      return absl::InvalidArgumentError("one argument too many: " + arg);
    }
  }
  mesa_anyjev::config::LoadOptions options;
  options.flags = std::move(positional);
  options.flags.insert(options.flags.end(), sets.begin(), sets.end());
  return mesa_anyjev::config::LoadConfig(options);
}

// `batch` prompts of `tokens` random ids, each a group of one whole prompt
// with one label: ids no earlier call used, so nothing is cached.
std::vector<mesa_anyjev::PromptGroup> FreshPrompts(int64_t tokens,
                                                   int64_t batch,
                                                   std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> id(1000, 99999);
  std::vector<mesa_anyjev::PromptGroup> prompts(static_cast<size_t>(batch));
  for (auto& prompt : prompts) {
    for (int64_t i = 0; i < tokens; ++i) prompt.prefix.push_back(id(rng));
    prompt.suffixes = {{}};
    prompt.label_ids = {32};
  }
  return prompts;
}

// The "time_prefill" request: per shape, seconds per call (median of
// `repeat` after a warm-up), fresh ids every call, and what the engine
// counted meanwhile (reused prefix tokens must be 0).
absl::StatusOr<json> TimePrefill(Served& served,
                                 const CountingObserver& observer,
                                 const json& t) {
  std::mt19937_64 rng(t.value("seed", 1));
  const int repeat = t.value("repeat", 5);
  const json shapes = t.contains("shapes")
                          ? t["shapes"]
                          : json::array({{{"tokens", t.value("tokens", 512)},
                                          {"batch", t.value("batch", 1)}}});
  json results = json::array();
  for (const json& shape : shapes) {
    const int64_t tokens = shape.at("tokens"), batch = shape.value("batch", 1);
    std::vector<std::vector<mesa_anyjev::PromptGroup>> calls;
    for (int r = 0; r <= repeat; ++r) {
      calls.push_back(FreshPrompts(tokens, batch, rng));
    }
    if (auto s = Logprobs(served, calls[0]); !s.ok()) {
      return s;
    }
    const CountingObserver before = observer;
    std::vector<double> seconds;
    for (int r = 1; r <= repeat; ++r) {
      const auto start = std::chrono::steady_clock::now();
      if (auto s = Logprobs(served, calls[static_cast<size_t>(r)]); !s.ok()) {
        return s;
      }
      seconds.push_back(std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - start)
                            .count());
    }
    std::vector<double> sorted = seconds;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    results.push_back(
        {{"tokens", tokens},
         {"batch", batch},
         {"seconds", seconds},
         {"seconds_median", median},
         {"tokens_per_second", static_cast<double>(tokens * batch) / median},
         {"reused_tokens", observer.reused - before.reused},
         {"tokens_run", observer.tokens - before.tokens},
         {"passes_per_call",
          static_cast<double>(observer.passes - before.passes) / repeat}});
  }
  json out = {{"shapes", results}};
  // The single-shape form's fields, as before.
  out["seconds_per_forward"] = results[0]["seconds_median"];
  out["tokens_per_second"] = results[0]["tokens_per_second"];
  return out;
}

// The "profile" request: one call of fresh prompts under the profiler,
// after one unprofiled warm-up of the same shape.
absl::StatusOr<json> Profile(Served& served, const json& p, bool cuda) {
  std::mt19937_64 rng(p.value("seed", 2));
  const int64_t tokens = p.value("tokens", 512), batch = p.value("batch", 1);
  const auto warm = FreshPrompts(tokens, batch, rng);
  if (auto s = Logprobs(served, warm); !s.ok()) return s;
  const auto prompts = FreshPrompts(tokens, batch, rng);
  absl::Status status;
  json anatomy = mesa_anyjev::tools::PassAnatomy(
      [&] { status = Logprobs(served, prompts); }, cuda,
      served.checkpoint->capabilities.n_layers);
  if (!status.ok()) return status;
  anatomy["tokens"] = tokens * batch;
  anatomy["batch"] = batch;
  return anatomy;
}

// The "time" request: seconds per pass over `calls`, best of `repeat` after
// one warm-up; or over each of `passes` (lists of calls), best after the
// first, so that a timed pass does not find its prefixes cached by an
// earlier one.
absl::StatusOr<json> Time(Served& served, const json& t) {
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
      if (absl::Status s = RunOnly(served, call); !s.ok()) return s;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (r > 0) best = std::min(best, seconds);
  }
  return json{{"seconds", best}};
}

// One request after the load; the counters in the answer are this
// request's own.
absl::StatusOr<json> Handle(Served& served, const CountingObserver& observer,
                            const json& request, bool cuda) {
  const CountingObserver before = observer;
  absl::StatusOr<json> out;
  try {
    if (request.contains("profile")) {
      json anatomies = json::array();
      const json& p = request["profile"];
      for (const json& shape : p.value("shapes", json::array({p}))) {
        auto anatomy = Profile(served, shape, cuda);
        if (!anatomy.ok()) return anatomy.status();
        anatomies.push_back(*std::move(anatomy));
      }
      out =
          p.contains("shapes") ? json{{"anatomies", anatomies}} : anatomies[0];
    } else if (request.contains("time_prefill")) {
      out = TimePrefill(served, observer, request["time_prefill"]);
    } else if (request.contains("time")) {
      out = Time(served, request["time"]);
    } else if (request.contains("calls")) {
      json answers = json::array();
      for (const json& call : request["calls"]) {
        auto answer = Answer(*served.engine, call);
        if (!answer.ok()) return answer.status();
        answers.push_back(*std::move(answer));
      }
      out = json{{"calls", answers},
                 {"prefix_hits", observer.hits - before.hits},
                 {"prefix_misses", observer.misses - before.misses}};
    } else {
      out = Answer(*served.engine, request);
    }
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  }
  // A profile's passes are its own (the warm-up's are not in it).
  if (out.ok() && !request.contains("profile")) {
    (*out)["tokens_run"] = observer.tokens - before.tokens;
    (*out)["passes"] = observer.passes - before.passes;
  }
  return out;
}

// A single request's answer on stdout, or its error on stderr (exit 1).
int Respond(Served& served, const CountingObserver& observer,
            const json& request, bool cuda) {
  auto out = Handle(served, observer, request, cuda);
  if (!out.ok()) {
    // "time" callers read the message alone, as they always did.
    std::cerr << (request.contains("time") ? std::string(out.status().message())
                                           : out.status().ToString())
              << "\n";
    return 1;
  }
  const bool plain = !request.contains("calls") && !request.contains("time") &&
                     !request.contains("time_prefill") &&
                     !request.contains("profile");
  if (plain) {
    (*out)["identity"] = served.checkpoint->identity.identity;
    (*out)["weight_bytes"] = served.checkpoint->runner->shape().weight_bytes;
    (*out)["n_layers"] = served.checkpoint->capabilities.n_layers;
  }
  std::cout << out->dump() << "\n";
  return 0;
}

// The request fields that configure the load; under --serve they come
// from --set instead.
constexpr const char* kLoadFields[] = {"threads",        "batch_tokens",
                                       "kv_pool_bytes",  "kv_block_tokens",
                                       "prefix_caching", "measure_rss"};

}  // namespace

int main(int argc, char** argv) {
  using nlohmann::json;
  if (argc < 2) {
    std::cerr << "usage: qwen3_dump DIR [dtype] [attention] [device] "
                 "[cpu_gemm] [--set section.field=value ...] [--serve] "
                 "< request.json\n";
    return 2;
  }
  // --serve: a process that answers many requests (one JSON a line on
  // stdin, one a line on stdout) on one load, its settings from --set.
  bool serve = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--serve") {
      serve = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  auto loaded_config = ConfigFrom(static_cast<int>(args.size()), args.data());
  if (!loaded_config.ok()) {
    std::cerr << loaded_config.status().message() << "\n";
    return 2;
  }
  mesa_anyjev::config::ModelConfig config = loaded_config->model;
  const json request = serve ? json::object() : json::parse(std::cin);
  // model.threads, as the daemon sets it (0: every core).
  config.threads = request.value("threads", config.threads);
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
  mesa_anyjev::config::EngineConfig engine = loaded_config->engine;
  engine.batch_tokens = request.value("batch_tokens", engine.batch_tokens);
  engine.kv_pool_bytes = request.value("kv_pool_bytes", engine.kv_pool_bytes);
  engine.kv_block_tokens =
      request.value("kv_block_tokens", engine.kv_block_tokens);
  engine.prefix_caching =
      request.value("prefix_caching", engine.prefix_caching);
  CountingObserver observer;
  auto served = Serve(config, engine, &observer);
  if (!served.ok()) {
    std::cerr << served.status().message() << "\n";
    return 1;
  }
  const bool cuda = config.device.rfind("cuda", 0) == 0;
  if (!serve) return Respond(*served, observer, request, cuda);
  // One request a line, one answer a line, until stdin ends.
  for (std::string line; std::getline(std::cin, line);) {
    if (line.empty()) continue;
    const json next = json::parse(line);
    for (const char* fixed : kLoadFields) {
      if (next.contains(fixed)) {
        std::cout << json{{"error", std::string(fixed) +
                                        " is fixed at load under --serve"}}
                         .dump()
                  << std::endl;
        return 1;
      }
    }
    auto out = Handle(*served, observer, next, cuda);
    std::cout
        << (out.ok() ? *out : json{{"error", out.status().ToString()}}).dump()
        << std::endl;
  }
  return 0;
}
