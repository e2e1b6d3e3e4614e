// mesa-anyjevd: the long-running gRPC daemon. Flags here, lifecycle in
// daemon.cc. Exit codes: 0 drained cleanly, 1 runtime failure, 2 usage or
// configuration error, 75 the model's device failed (its CUDA context is
// unusable: a supervisor starts a fresh process), 128+N a second signal N.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/config/config_loader.h"
#include "common/config/set_flag.h"
#include "common/util/build_info.h"
#include "server/daemon/daemon.h"
#include "server/daemon/signal_watcher.h"
#include "server/engine/fault_plan.h"
#include "server/model/device_fault.h"

namespace {

using mesa_anyjev::config::Override;

int Main(int argc, char** argv) {
  mesa_anyjev::daemon::SignalWatcher::BlockSignals();
  spdlog::set_default_logger(spdlog::stderr_color_mt("mesa-anyjevd"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  CLI::App app{
      "mesa-anyjevd: serves logprobs, hidden states and decisions "
      "of a resident LLM over gRPC"};
  std::string config_path, model, backend, listen, port_file, metrics_listen;
  std::string inject_faults;
  std::vector<std::string> sets;
  bool version = false, print_config = false;
  app.add_option("--config", config_path, "YAML configuration file");
  app.add_option("--model", model,
                 "checkpoint directory, or 'fake' (model.path)");
  app.add_option("--backend", backend,
                 "local (the model at --model) or composite: a router over "
                 "the gateway and the daemon at client.address "
                 "(model.backend)")
      ->check(CLI::IsMember({"local", "composite"}));
  app.add_option("--listen", listen,
                 "host:port for gRPC; port 0 picks one (server.listen)");
  app.add_option("--port-file", port_file,
                 "write the bound gRPC port here (server.port_file)");
  app.add_option(
      "--metrics-listen", metrics_listen,
      "host:port for /metrics; '' turns it off (server.metrics_listen)");
  app.add_option("--set", sets,
                 "override any key: section.field=value (repeatable)");
  app.add_flag("--version", version, "print the version and exit");
  app.add_flag("--print-config", print_config,
               "print the effective configuration and exit");
  // Tests only (docs/reliability.md, "GPU faults"): a flag, never a config
  // key, so that no configuration file or environment variable can arm it;
  // left out of --help.
  app.add_option("--inject-faults", inject_faults)->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (version) {
    std::cout << "mesa-anyjevd " << mesa_anyjev::util::kVersion << " ("
              << mesa_anyjev::util::kCommit << ")\n";
    return 0;
  }

  mesa_anyjev::config::LoadOptions options;
  options.config_path = config_path;
  options.env = mesa_anyjev::config::ProcessEnvironment();
  auto flag = [&](const std::string& key, const std::string& value,
                  const std::string& name) {
    options.flags.push_back(Override{key, value, "flag " + name});
  };
  if (app.count("--model")) flag("model.path", model, "--model");
  if (app.count("--backend")) flag("model.backend", backend, "--backend");
  if (app.count("--listen")) flag("server.listen", listen, "--listen");
  if (app.count("--port-file"))
    flag("server.port_file", port_file, "--port-file");
  if (app.count("--metrics-listen")) {
    flag("server.metrics_listen", metrics_listen, "--metrics-listen");
  }
  for (const std::string& set : sets) {
    auto parsed = mesa_anyjev::config::ParseSetFlag(set);
    if (!parsed.ok()) {
      std::cerr << "mesa-anyjevd: " << parsed.status().message() << "\n";
      return 2;
    }
    options.flags.push_back(*std::move(parsed));
  }
  auto config = mesa_anyjev::config::LoadConfig(options);
  if (!config.ok()) {
    std::cerr << "mesa-anyjevd: " << config.status().message() << "\n";
    return 2;
  }
  if (print_config) {
    std::cout << mesa_anyjev::config::ToYaml(*config);
    return 0;
  }
  auto level = spdlog::level::from_str(config->log.level);
  spdlog::set_level(level);
  std::optional<mesa_anyjev::engine::FaultPlan> faults;
  if (!inject_faults.empty()) {
    auto plan = mesa_anyjev::engine::FaultPlan::Parse(inject_faults);
    if (!plan.ok()) {
      std::cerr << "mesa-anyjevd: " << plan.status().message() << "\n";
      return 2;
    }
    faults = *std::move(plan);
  }

  mesa_anyjev::daemon::Daemon daemon(*std::move(config), std::move(faults));
  mesa_anyjev::daemon::SignalWatcher signals;
  signals.Start(
      [&daemon](int signal_number) {
        spdlog::info(
            "signal {}: starting the drain (send it again to exit now)",
            signal_number);
        daemon.RequestShutdown();
      },
      [&daemon] { daemon.ReloadTenants(); });
  const int code = daemon.Run();
  if (code == mesa_anyjev::model::kDeviceLostExitCode) {
    // The model's tensors live in a dead CUDA context: freeing them as the
    // destructors would can abort the process instead of exiting with the
    // code a supervisor reads.
    spdlog::default_logger()->flush();
    std::_Exit(code);
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
