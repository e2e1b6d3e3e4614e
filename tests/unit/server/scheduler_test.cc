// The scheduler on a simulated engine (no threads, no clock): closed-loop
// tenants that keep calls in flight, a pass that takes work a group at a
// time in the scheduler's order up to its budget, and each tenant's tokens
// compared with its max-min fair share (weighted water-filling of the
// pass budget over the tenants' demands), as Kubernetes' API Priority and
// Fairness tests its fair queuing.
#include "server/engine/scheduler.h"

#include <catch2/catch.hpp>
#include <deque>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace mesa_anyjev::engine {
namespace {

// A tenant of the simulation: `in_flight` calls kept held (a new one as
// soon as one finishes, or only every `every` passes), each of `groups`
// groups of `group_tokens` tokens.
struct Client {
  std::string tenant;
  Priority priority = Priority::kBatch;
  int in_flight = 1;
  int groups = 16;
  int64_t group_tokens = 100;
  int every = 0;  // 0: closed loop; k: one call every k passes
};

struct Result {
  std::map<std::string, int64_t> tokens;         // computed per tenant
  std::vector<std::vector<std::string>> passes;  // tenants, planning order
  int64_t total = 0;
};

class Simulation {
 public:
  Simulation(SchedulerPolicy policy, std::vector<Client> clients,
             std::vector<TenantShare> shares = {}, int64_t budget = 1000)
      : scheduler_(policy, {4096, 0, 0}),
        clients_(std::move(clients)),
        budget_(budget) {
    scheduler_.SetTenants(shares);
  }

  Result Run(int passes) {
    Result result;
    for (int p = 0; p < passes; ++p) {
      Arrive(p);
      std::vector<std::string> order;
      int64_t room = budget_;
      std::vector<Scheduler::JobId> planned;  // fully planned this pass
      while (room > 0) {
        const auto next = scheduler_.Next(
            [&](Scheduler::JobId id) { return calls_.at(id).left > 0; });
        if (!next.has_value()) break;
        Call& call = calls_.at(*next);
        const int64_t tokens = clients_[call.client].group_tokens;
        scheduler_.Charge(*next, tokens);
        room -= tokens;
        result.tokens[clients_[call.client].tenant] += tokens;
        result.total += tokens;
        order.push_back(clients_[call.client].tenant);
        if (--call.left == 0) planned.push_back(*next);
      }
      // The pass ran: the calls it completed are answered.
      for (Scheduler::JobId id : planned) {
        scheduler_.Finish(id);
        --held_[calls_.at(id).client];
        calls_.erase(id);
      }
      result.passes.push_back(order);
    }
    return result;
  }

 private:
  struct Call {
    size_t client = 0;
    int left = 0;  // groups not planned yet
  };

  void Arrive(int pass) {
    held_.resize(clients_.size());
    for (size_t c = 0; c < clients_.size(); ++c) {
      const Client& client = clients_[c];
      if (client.every > 0 && pass % client.every != 0) continue;
      const int want = client.every > 0 ? held_[c] + 1 : client.in_flight;
      while (held_[c] < want) {
        const Scheduler::JobId id = next_id_++;
        REQUIRE(scheduler_
                    .Admit(id, client.tenant, client.priority,
                           client.groups * client.group_tokens)
                    .ok());
        calls_[id] = {c, client.groups};
        ++held_[c];
      }
    }
  }

  Scheduler scheduler_;
  std::vector<Client> clients_;
  const int64_t budget_;
  std::map<Scheduler::JobId, Call> calls_;
  std::vector<int> held_;
  Scheduler::JobId next_id_ = 1;
};

// Weighted max-min fair shares of `capacity` over demands (water-filling):
// a tenant asking less than its share gets what it asks, the rest is split
// by weight among the others.
std::map<std::string, double> MaxMinFair(std::map<std::string, double> demand,
                                         std::map<std::string, double> weight,
                                         double capacity) {
  std::map<std::string, double> share;
  while (!demand.empty()) {
    double weights = 0;
    for (const auto& [t, d] : demand) weights += weight[t];
    bool satisfied = false;
    for (auto it = demand.begin(); it != demand.end();) {
      if (it->second <= capacity * weight[it->first] / weights) {
        share[it->first] = it->second;
        capacity -= it->second;
        it = demand.erase(it);
        satisfied = true;
      } else {
        ++it;
      }
    }
    if (!satisfied) {
      for (const auto& [t, d] : demand)
        share[t] = capacity * weight[t] / weights;
      break;
    }
  }
  return share;
}

double Jain(const std::vector<double>& x) {
  const double sum = std::accumulate(x.begin(), x.end(), 0.0);
  double squares = 0;
  for (double v : x) squares += v * v;
  return sum * sum / (static_cast<double>(x.size()) * squares);
}

TEST_CASE(
    "two pipelines with 8 and 2 calls in flight share the engine by tokens, "
    "not calls") {
  const std::vector<Client> clients = {{"wide", Priority::kBatch, 8},
                                       {"narrow", Priority::kBatch, 2}};
  const Result fair = Simulation(SchedulerPolicy::kFair, clients).Run(400);
  const double wide = static_cast<double>(fair.tokens.at("wide"));
  const double narrow = static_cast<double>(fair.tokens.at("narrow"));
  CHECK(Jain({wide, narrow}) >= 0.98);
  CHECK(wide / narrow == Approx(1.0).epsilon(0.1));
  // The same load in arrival order goes to whoever keeps more calls held.
  const Result fifo = Simulation(SchedulerPolicy::kFifo, clients).Run(400);
  CHECK(static_cast<double>(fifo.tokens.at("wide")) /
            static_cast<double>(fifo.tokens.at("narrow")) ==
        Approx(4.0).epsilon(0.1));
}

TEST_CASE("weights 3 and 1 give three quarters and one quarter") {
  const Result r = Simulation(SchedulerPolicy::kFair,
                              {{"heavy", Priority::kBatch, 2},
                               {"light", Priority::kBatch, 8}},
                              {{"heavy", 3.0, 0, 0}, {"light", 1.0, 0, 0}})
                       .Run(400);
  CHECK(static_cast<double>(r.tokens.at("heavy")) /
            static_cast<double>(r.tokens.at("light")) ==
        Approx(3.0).epsilon(0.1));
}

TEST_CASE(
    "a tenant asking less than its share gets all it asks, the others split "
    "the rest max-min fairly") {
  // budget 1000 a pass; "trickle" asks 10 groups x 100 tokens every 10
  // passes (100 a pass), far below a third.
  // a and b keep work held all along (b with fewer calls); trickle asks
  // for one call now and then.
  const std::vector<Client> clients = {
      {"a", Priority::kBatch, 4},
      {"b", Priority::kBatch, 2},
      {"trickle", Priority::kBatch, 1, 10, 100, 10}};
  const int passes = 500;
  const Result r = Simulation(SchedulerPolicy::kFair, clients).Run(passes);
  const double capacity = static_cast<double>(r.total);
  const auto fair = MaxMinFair(
      {{"a", capacity}, {"b", capacity}, {"trickle", 100.0 * passes}},
      {{"a", 1}, {"b", 1}, {"trickle", 1}}, capacity);
  for (const auto& [tenant, share] : fair) {
    INFO(tenant << ": " << r.tokens.at(tenant) << " of a fair " << share);
    CHECK(static_cast<double>(r.tokens.at(tenant)) ==
          Approx(share).epsilon(0.1));
  }
}

TEST_CASE("work-conserving: a tenant alone gets every pass full") {
  // Two calls held, so the next is there when one is fully planned.
  const Result r =
      Simulation(SchedulerPolicy::kFair, {{"alone", Priority::kBatch, 2}})
          .Run(50);
  CHECK(r.total == 50 * 1000);
}

TEST_CASE("interactive work goes into each pass before batch work") {
  Scheduler s(SchedulerPolicy::kFair, {64, 0, 0});
  REQUIRE(s.Admit(1, "pipeline", Priority::kBatch, 5000).ok());
  REQUIRE(s.Admit(2, "pipeline", Priority::kBatch, 5000).ok());
  s.Charge(1, 4000);  // the pipeline's first pass ran
  REQUIRE(s.Admit(3, "curator", Priority::kInteractive, 50).ok());
  const auto any = [](Scheduler::JobId) { return true; };
  CHECK(s.Next(any) == std::optional<Scheduler::JobId>(3));
  // Once it has no work left to plan, the batch work fills the pass, the
  // tenant's oldest call first.
  CHECK(s.Next([](Scheduler::JobId id) { return id != 3; }) ==
        std::optional<Scheduler::JobId>(1));
  // FIFO knows no classes: arrival order.
  Scheduler fifo(SchedulerPolicy::kFifo, {64, 0, 0});
  REQUIRE(fifo.Admit(1, "pipeline", Priority::kBatch, 5000).ok());
  REQUIRE(fifo.Admit(3, "curator", Priority::kInteractive, 50).ok());
  CHECK(fifo.Next(any) == std::optional<Scheduler::JobId>(1));
}

TEST_CASE("a tenant back after an idle spell banks no credit") {
  Scheduler s(SchedulerPolicy::kFair, {64, 0, 0});
  REQUIRE(s.Admit(1, "a", Priority::kBatch, 100).ok());
  s.Charge(1, 10000);  // a ran alone for a long while
  s.Finish(1);
  REQUIRE(s.Admit(2, "b", Priority::kBatch, 100).ok());
  // b arrives with nobody busy: lifted to where the class stands, so a's
  // history does not put b ahead of a for 10,000 tokens.
  CHECK(s.counter(Priority::kBatch, "b") == Approx(10000));
  REQUIRE(s.Admit(3, "a", Priority::kBatch, 100).ok());
  const auto any = [](Scheduler::JobId) { return true; };
  CHECK(s.Next(any) ==
        std::optional<Scheduler::JobId>(2));  // same counter, older
  s.Charge(2, 100);
  CHECK(s.Next(any) == std::optional<Scheduler::JobId>(3));
}

TEST_CASE(
    "per-tenant limits refuse one tenant's excess by name and admit another's "
    "call") {
  Scheduler s(SchedulerPolicy::kFair, {100, 2, 1000});
  s.SetTenants({{"big", 1.0, 3, 0}, {"small", 1.0, 0, 0}});
  std::string by;
  // A tenant with nothing held is always admitted one call, however large.
  REQUIRE(s.Admit(1, "small", Priority::kBatch, 5000).ok());
  absl::Status refused = s.Admit(2, "small", Priority::kBatch, 10, &by);
  CHECK(absl::IsResourceExhausted(refused));
  CHECK(by == "tenant_tokens");
  CHECK_THAT(std::string(refused.message()),
             Catch::Contains("tenant 'small' has 5000 prompt tokens held") &&
                 Catch::Contains("engine.tenant_max_queued_tokens"));
  // Its own limit (3 calls) over the default (2).
  for (Scheduler::JobId id = 10; id < 13; ++id) {
    REQUIRE(s.Admit(id, "big", Priority::kBatch, 1).ok());
  }
  refused = s.Admit(13, "big", Priority::kBatch, 1, &by);
  CHECK(by == "tenant_calls");
  CHECK_THAT(std::string(refused.message()),
             Catch::Contains("tenant 'big' has 3 calls held") &&
                 Catch::Contains("max_queued_calls in the tokens file"));
  CHECK(s.Admit(20, "other", Priority::kInteractive, 1).ok());
  // A lone tenant (one token) has the capacity alone for its limit.
  Scheduler alone(SchedulerPolicy::kFair, {100, 2, 1000});
  alone.SetTenants({{"default", 1.0, 0, 0}});
  for (Scheduler::JobId id = 1; id <= 5; ++id) {
    CHECK(alone.Admit(id, "default", Priority::kBatch, 600).ok());
  }
  // Finished calls free their tenant's room.
  s.Finish(10);
  CHECK(s.Admit(13, "big", Priority::kBatch, 1).ok());
  // The total capacity still bounds everything.
  Scheduler tiny(SchedulerPolicy::kFair, {1, 0, 0});
  REQUIRE(tiny.Admit(1, "a", Priority::kBatch, 1).ok());
  CHECK_THAT(
      std::string(tiny.Admit(2, "b", Priority::kBatch, 1, &by).message()),
      Catch::Contains("queue full: 1 calls") &&
          Catch::Contains("server.queue_capacity"));
  CHECK(by == "capacity");
  // It counts the calls waiting: one in a pass leaves room for the next,
  // and a call answered before its pass frees its place.
  tiny.Charge(1, 1);
  REQUIRE(tiny.Admit(2, "b", Priority::kBatch, 1).ok());
  CHECK_FALSE(tiny.Admit(3, "c", Priority::kBatch, 1).ok());
  tiny.Finish(2);
  CHECK(tiny.Admit(3, "c", Priority::kBatch, 1).ok());
}

TEST_CASE("interactive work beside batch work shortens the pass, fair only",
          "[scheduler]") {
  for (const SchedulerPolicy policy :
       {SchedulerPolicy::kFair, SchedulerPolicy::kFifo}) {
    Scheduler s(policy, {100, 0, 0});
    REQUIRE(s.Admit(1, "curator", Priority::kInteractive, 10).ok());
    CHECK_FALSE(s.InteractiveBesideBatch());  // alone: passes stay full
    REQUIRE(s.Admit(2, "pipe", Priority::kBatch, 10).ok());
    CHECK(s.InteractiveBesideBatch() == (policy == SchedulerPolicy::kFair));
    s.Charge(1, 10);  // in a pass, not yet answered: still held
    CHECK(s.InteractiveBesideBatch() == (policy == SchedulerPolicy::kFair));
    s.Finish(1);
    CHECK_FALSE(s.InteractiveBesideBatch());
  }
}

}  // namespace
}  // namespace mesa_anyjev::engine
