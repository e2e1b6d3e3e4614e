#include "server/daemon/engine_events.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "absl/time/time.h"

namespace mesa_anyjev::daemon {

EngineEvents::EngineEvents(
    std::function<void(const absl::Status&)> on_device_lost,
    const std::string& pass_records)
    : on_device_lost_(std::move(on_device_lost)) {
  if (pass_records.empty()) return;
  records_.open(pass_records, std::ios::app);
  if (!records_) {
    spdlog::warn(
        "engine.pass_records: cannot open {} for appending; no pass "
        "records are written",
        pass_records);
  }
}

EngineEvents::~EngineEvents() {
  if (handler_.joinable()) handler_.join();
}

void EngineEvents::OnDeviceLost(const absl::Status& status) {
  std::call_once(lost_once_, [&] {
    handler_ = std::thread([this, status] { on_device_lost_(status); });
  });
}

void EngineEvents::OnNote(const std::string& line) {
  spdlog::info("engine: {}", line);
}

void EngineEvents::OnPass(const engine::PassRecord& pass) {
  if (!records_.is_open()) return;
  nlohmann::json shares = nlohmann::json::array();
  for (const engine::PassRecord::Share& s : pass.shares) {
    shares.push_back({{"tenant", s.tenant},
                      {"class", PriorityName(s.priority)},
                      {"tokens", s.tokens}});
  }
  const nlohmann::json line = {{"pass", pass.number},
                               {"tokens", pass.tokens},
                               {"segments", pass.segments},
                               {"rows", pass.rows},
                               {"seconds", absl::ToDoubleSeconds(pass.took)},
                               {"shares", shares}};
  // One line a pass, flushed: a reader sees whole passes as they end.
  records_ << line.dump() << '\n' << std::flush;
}

}  // namespace mesa_anyjev::daemon
