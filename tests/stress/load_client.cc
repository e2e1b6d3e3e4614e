// load_client: the accounting load generator of the reliability plan
// (docs/reliability.md). Asynchronous
// (gRPC's callback API), a fixed number of calls in flight, one terminal
// status counted per call sent, and every latency kept for exact
// percentiles. C++ so that the client is not what limits the rate.
//
//   load_client --address A --in-flight 16 --seconds 60 --mix logprobs=1
//   load_client --address A --idle 500     (connect, report, wait for stdin)
//   load_client --address A --ping-abuse   (keepalive pings every second,
//                                           no calls: how long until the
//                                           daemon closes the connection)
//
// Prints one JSON object. Kinds in --mix: logprobs (a valid two-prompt
// group), tokenize, bad (no groups: INVALID_ARGUMENT), cancel (a valid
// Logprobs cancelled by the client at once), decide (an L0 Decide of two
// states, a text and a JSON one, by a choice and a yes/no question).
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "mesa/anyjev/v1/decisions.grpc.pb.h"
#include "mesa/anyjev/v1/inference.grpc.pb.h"

namespace {

namespace v1 = mesa::anyjev::v1;
using Clock = std::chrono::steady_clock;
using WallClock = std::chrono::system_clock;  // what gRPC deadlines take

enum class Kind { kLogprobs, kTokenize, kBad, kCancel, kDecide };

struct Options {
  std::string address;
  std::string token_env;
  int in_flight = 16;
  int channels = 1;
  double seconds = 10;
  double deadline_s = 30;
  std::string mix = "logprobs=1";
  int idle = 0;
  bool ping_abuse = false;
};

std::shared_ptr<grpc::Channel> Connect(const std::string& address, int index) {
  grpc::ChannelArguments args;
  // Its own subchannel: one TCP connection per channel, not one shared.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("mesa.load_client.channel", index);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

bool WaitReady(const std::shared_ptr<grpc::Channel>& channel) {
  return channel->WaitForConnected(WallClock::now() + std::chrono::seconds(30));
}

// Weights "logprobs=8,bad=1" as a table of kinds to draw from.
std::vector<Kind> ParseMix(const std::string& mix) {
  static const std::map<std::string, Kind> kNames = {
      {"logprobs", Kind::kLogprobs},
      {"tokenize", Kind::kTokenize},
      {"bad", Kind::kBad},
      {"cancel", Kind::kCancel},
      {"decide", Kind::kDecide}};
  std::vector<Kind> table;
  for (absl::string_view part : absl::StrSplit(mix, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(part, '=');
    int weight = 0;
    const auto it = kNames.find(kv.first);
    if (it == kNames.end() || !absl::SimpleAtoi(kv.second, &weight) ||
        weight < 0 || weight > 1000) {
      throw CLI::ValidationError("--mix",
                                 "bad entry '" + std::string(part) +
                                     "' (kind=weight, kinds: "
                                     "logprobs tokenize bad cancel decide)");
    }
    table.insert(table.end(), weight, it->second);
  }
  if (table.empty()) throw CLI::ValidationError("--mix", "no kind has weight");
  return table;
}

struct Sample {
  grpc::StatusCode code;
  uint32_t micros;
};

class Load;

// One call in flight at a time; on completion it records and starts the next.
class Slot {
 public:
  Slot(Load* load, v1::Inference::Stub* stub, v1::Decisions::Stub* decisions,
       uint32_t seed)
      : load_(load), stub_(stub), decisions_(decisions), rng_(seed) {}
  void Start();
  std::vector<Sample>& samples() { return samples_; }

 private:
  void Done(const grpc::Status& status);

  Load* load_;
  v1::Inference::Stub* stub_;
  v1::Decisions::Stub* decisions_;
  std::mt19937 rng_;
  v1::LogprobsResponse logprobs_;
  v1::TokenizeResponse tokenize_;
  v1::DecideResponse decide_;
  Clock::time_point started_;
  std::vector<Sample> samples_;
};

class Load {
 public:
  Load(const Options& options, std::vector<Kind> mix,
       v1::LogprobsRequest logprobs)
      : options_(options),
        mix_(std::move(mix)),
        logprobs_(std::move(logprobs)) {
    tokenize_.add_texts("load client: a short text to tokenize");
    decide_.set_level("L0");
    decide_.add_states()->set_text("Report 7: the sky was grey at the site");
    decide_.add_states()->set_json(
        R"({"site": 7, "sky": ["grey", "low cloud"]})");
    v1::Question* choice = decide_.add_questions();
    choice->set_id("sky");
    choice->set_kind("choice");
    choice->set_text("What colour was the sky?");
    for (const char* option : {"blue", "grey", "red"})
      choice->add_options(option);
    v1::Question* noul = decide_.add_questions();
    noul->set_id("cloud");
    noul->set_kind("noul");
    noul->set_text("Was there cloud?");
    const char* token = options.token_env.empty()
                            ? nullptr
                            : std::getenv(options.token_env.c_str());
    if (token != nullptr) bearer_ = std::string("Bearer ") + token;
  }

  nlohmann::json Run(const std::vector<v1::Inference::Stub*>& stubs,
                     const std::vector<v1::Decisions::Stub*>& decisions) {
    for (int i = 0; i < options_.in_flight; ++i) {
      slots_.push_back(std::make_unique<Slot>(
          this, stubs[i % stubs.size()], decisions[i % decisions.size()],
          static_cast<uint32_t>(7919 * i + 1)));
    }
    started_ = Clock::now();
    end_ = started_ + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(options_.seconds));
    active_ = options_.in_flight;
    for (auto& slot : slots_) slot->Start();
    {
      std::unique_lock<std::mutex> lock(mu_);
      idle_.wait(lock, [this] { return active_ == 0; });
    }
    return Report(
        std::chrono::duration<double>(Clock::now() - started_).count());
  }

  bool running() const { return Clock::now() < end_; }
  void SlotFinished() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--active_ == 0) idle_.notify_all();
  }
  Kind Draw(std::mt19937& rng) const {
    return mix_[std::uniform_int_distribution<size_t>(0, mix_.size() - 1)(rng)];
  }
  std::shared_ptr<grpc::ClientContext> Context() const {
    auto context = std::make_shared<grpc::ClientContext>();
    context->set_deadline(
        WallClock::now() +
        std::chrono::duration_cast<WallClock::duration>(
            std::chrono::duration<double>(options_.deadline_s)));
    if (!bearer_.empty()) context->AddMetadata("authorization", bearer_);
    return context;
  }
  const v1::LogprobsRequest& logprobs() const { return logprobs_; }
  const v1::LogprobsRequest& bad() const { return bad_; }
  const v1::TokenizeRequest& tokenize() const { return tokenize_; }
  const v1::DecideRequest& decide() const { return decide_; }

 private:
  static double Percentile(std::vector<uint32_t>& sorted, double q) {
    if (sorted.empty()) return 0;
    const size_t i =
        std::min(sorted.size() - 1,
                 static_cast<size_t>(q * static_cast<double>(sorted.size())));
    return sorted[i] / 1000.0;
  }
  static nlohmann::json Latency(std::vector<uint32_t> micros) {
    std::sort(micros.begin(), micros.end());
    return {{"p50", Percentile(micros, 0.50)},
            {"p99", Percentile(micros, 0.99)},
            {"max", micros.empty() ? 0.0 : micros.back() / 1000.0}};
  }

  nlohmann::json Report(double seconds) {
    std::map<grpc::StatusCode, std::vector<uint32_t>> by_code;
    std::vector<uint32_t> all;
    for (auto& slot : slots_) {
      for (const Sample& s : slot->samples()) {
        by_code[s.code].push_back(s.micros);
        all.push_back(s.micros);
      }
    }
    nlohmann::json codes = nlohmann::json::object();
    nlohmann::json latency = nlohmann::json::object();
    for (auto& [code, micros] : by_code) {
      const std::string name = CodeName(code);
      codes[name] = micros.size();
      latency[name] = Latency(micros);
    }
    return {{"calls", all.size()},
            {"seconds", seconds},
            {"rate", static_cast<double>(all.size()) / seconds},
            {"in_flight", options_.in_flight},
            {"channels", options_.channels},
            {"mix", options_.mix},
            {"codes", codes},
            {"latency_ms", Latency(all)},
            {"latency_ms_by_code", latency}};
  }

  // gRPC's codes are absl's, number for number, and so are their names.
  static std::string CodeName(grpc::StatusCode code) {
    return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  }

  const Options& options_;
  const std::vector<Kind> mix_;
  const v1::LogprobsRequest logprobs_;
  const v1::LogprobsRequest bad_;
  v1::TokenizeRequest tokenize_;
  v1::DecideRequest decide_;
  std::string bearer_;
  std::vector<std::unique_ptr<Slot>> slots_;
  Clock::time_point started_, end_;
  std::mutex mu_;
  std::condition_variable idle_;
  int active_ = 0;
};

void Slot::Start() {
  if (!load_->running()) {
    load_->SlotFinished();
    return;
  }
  // The callback owns the context: it may run (and start the next call)
  // before this function returns.
  std::shared_ptr<grpc::ClientContext> context = load_->Context();
  started_ = Clock::now();
  auto done = [this, context](grpc::Status status) { Done(status); };
  switch (load_->Draw(rng_)) {
    case Kind::kTokenize:
      stub_->async()->Tokenize(context.get(), &load_->tokenize(), &tokenize_,
                               done);
      break;
    case Kind::kBad:
      stub_->async()->Logprobs(context.get(), &load_->bad(), &logprobs_, done);
      break;
    case Kind::kCancel:
      stub_->async()->Logprobs(context.get(), &load_->logprobs(), &logprobs_,
                               done);
      context->TryCancel();
      break;
    case Kind::kLogprobs:
      stub_->async()->Logprobs(context.get(), &load_->logprobs(), &logprobs_,
                               done);
      break;
    case Kind::kDecide:
      decisions_->async()->Decide(context.get(), &load_->decide(), &decide_,
                                  done);
      break;
  }
}

void Slot::Done(const grpc::Status& status) {
  const auto took = std::chrono::duration_cast<std::chrono::microseconds>(
      Clock::now() - started_);
  samples_.push_back(
      {status.error_code(),
       static_cast<uint32_t>(std::min<int64_t>(took.count(), UINT32_MAX))});
  Start();  // the next call, from the callback thread (non-blocking)
}

// The valid request: a state prefix with two suffixes, labels " A" and " B"
// as this model tokenizes them.
v1::LogprobsRequest ValidRequest(v1::Inference::Stub* stub, const Load* load) {
  v1::TokenizeRequest tokenize;
  tokenize.add_texts("A");
  tokenize.add_texts("B");
  v1::TokenizeResponse ids;
  auto context = load->Context();
  const grpc::Status status = stub->Tokenize(context.get(), tokenize, &ids);
  if (!status.ok() || ids.items_size() != 2) {
    std::cerr << "load_client: Tokenize failed: " << status.error_message()
              << "\n";
    std::exit(1);
  }
  v1::LogprobsRequest request;
  v1::PromptGroup* group = request.add_groups();
  group->mutable_prefix()->set_text(
      "State:\nthe load client's state\n\nQuestion: Is it?\nOptions:\n");
  group->add_suffixes()->set_text("A. yes\nB. no\nAnswer:");
  group->add_suffixes()->set_text("A. no\nB. yes\nAnswer:");
  for (const auto& item : ids.items()) group->add_label_ids(item.ids(0));
  return request;
}

// Opens `count` connections, says so, holds them until stdin closes, then
// reports how many are still open and answer one call each.
int HoldIdle(const Options& options) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  int connected = 0;
  for (int i = 0; i < options.idle; ++i) {
    channels.push_back(Connect(options.address, i));
    connected += WaitReady(channels.back()) ? 1 : 0;
  }
  std::cout << nlohmann::json{{"connected", connected}}.dump() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  int still_ready = 0, answered = 0;
  for (auto& channel : channels) {
    still_ready += channel->GetState(false) == GRPC_CHANNEL_READY ? 1 : 0;
    auto stub = v1::Inference::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(WallClock::now() + std::chrono::seconds(30));
    v1::GetModelInfoRequest request;
    v1::ModelInfo info;
    answered += stub->GetModelInfo(&context, request, &info).ok() ? 1 : 0;
  }
  std::cout << nlohmann::json{{"connected", connected},
                              {"still_ready", still_ready},
                              {"answered", answered}}
                   .dump()
            << std::endl;
  return connected == options.idle && answered == options.idle ? 0 : 1;
}

// A client that pings every second and sends nothing: the daemon allows one
// ping per 30 s without data, so it must close the connection (GOAWAY
// too_many_pings) while other clients go on being served.
int PingAbuse(const Options& options) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  auto channel = grpc::CreateCustomChannel(
      options.address, grpc::InsecureChannelCredentials(), args);
  if (!WaitReady(channel)) {
    std::cerr << "load_client: cannot connect to " << options.address << "\n";
    return 1;
  }
  const auto start = Clock::now();
  const bool changed = channel->WaitForStateChange(
      GRPC_CHANNEL_READY, WallClock::now() + std::chrono::seconds(120));
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << nlohmann::json{{"closed_by_server", changed},
                              {"seconds", seconds}}
                   .dump()
            << std::endl;
  return changed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"mesa-anyjev load client (reliability plan)"};
  app.add_option("--address", options.address, "daemon host:port")->required();
  app.add_option("--token-env", options.token_env,
                 "environment variable holding the bearer token");
  app.add_option("--in-flight", options.in_flight, "calls in flight")
      ->check(CLI::Range(1, 4096));
  app.add_option("--channels", options.channels, "connections to spread over")
      ->check(CLI::Range(1, 256));
  app.add_option("--seconds", options.seconds, "how long to send")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--deadline-s", options.deadline_s, "deadline of each call")
      ->check(CLI::Range(0.001, 3600.0));
  app.add_option("--mix", options.mix, "kind=weight,...");
  app.add_option("--idle", options.idle,
                 "hold this many idle connections instead of sending load")
      ->check(CLI::Range(0, 10000));
  app.add_flag("--ping-abuse", options.ping_abuse,
               "ping every second without calls until the daemon closes");
  CLI11_PARSE(app, argc, argv);
  if (options.idle > 0) return HoldIdle(options);
  if (options.ping_abuse) return PingAbuse(options);

  std::vector<Kind> mix;
  try {
    mix = ParseMix(options.mix);
  } catch (const CLI::Error& e) {
    return app.exit(e);
  }
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::Inference::Stub>> stubs;
  std::vector<v1::Inference::Stub*> raw;
  std::vector<std::unique_ptr<v1::Decisions::Stub>> decision_stubs;
  std::vector<v1::Decisions::Stub*> raw_decisions;
  for (int i = 0; i < options.channels; ++i) {
    channels.push_back(Connect(options.address, i));
    if (!WaitReady(channels.back())) {
      std::cerr << "load_client: cannot connect to " << options.address << "\n";
      return 1;
    }
    stubs.push_back(v1::Inference::NewStub(channels.back()));
    raw.push_back(stubs.back().get());
    decision_stubs.push_back(v1::Decisions::NewStub(channels.back()));
    raw_decisions.push_back(decision_stubs.back().get());
  }
  Load setup(options, mix, {});
  Load load(options, mix, ValidRequest(raw[0], &setup));
  std::cout << load.Run(raw, raw_decisions).dump() << std::endl;
  return 0;
}
