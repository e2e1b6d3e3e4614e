// What the daemon does with the engine's events beyond its metrics: a lost
// device handed to the daemon's handler on a thread of its own (the engine
// thread only reports it), the engine's notes into the log, and each pass
// appended to engine.pass_records when that is set.
#pragma once

#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "server/engine/engine_observer.h"

namespace mesa_anyjev::daemon {

class EngineEvents final : public engine::EngineObserver {
 public:
  // `on_device_lost` runs once, on a thread of its own. `pass_records`: a
  // file to append to ("": none); one that cannot be opened is said in the
  // log and left off.
  EngineEvents(std::function<void(const absl::Status&)> on_device_lost,
               const std::string& pass_records);
  ~EngineEvents() override;  // joins the handler's thread

  void OnDeviceLost(const absl::Status& status) override;
  void OnNote(const std::string& line) override;
  void OnPass(const engine::PassRecord& pass) override;

 private:
  std::function<void(const absl::Status&)> on_device_lost_;
  std::once_flag lost_once_;
  std::thread handler_;
  std::ofstream records_;
};

}  // namespace mesa_anyjev::daemon
