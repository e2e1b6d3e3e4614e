// `mesa-anyjev info`: what the daemon serves (model, shape, limits) and who
// the caller is to it (tenant, role).
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "client/backends/daemon_client.h"
#include "client/commands/commands.h"
#include "client/ui/terminal.h"

namespace mesa_anyjev::client {
namespace {

nlohmann::json DeviceJson(const DaemonInfo& info) {
  if (!info.device.has_value()) return nullptr;
  const DeviceInfo& d = *info.device;
  return {{"name", d.name},
          {"compute_capability", d.compute_capability},
          {"shared_memory", d.shared_memory},
          {"driver_cuda", d.driver_cuda},
          {"runtime_cuda", d.runtime_cuda}};
}

std::string DeviceText(const DeviceInfo& d) {
  std::string text = d.name;
  if (!d.compute_capability.empty()) {
    text += ", compute capability " + d.compute_capability + ", CUDA driver " +
            d.driver_cuda + ", runtime " + d.runtime_cuda;
  }
  return text + (d.shared_memory ? " (memory shared with the system)" : "");
}

nlohmann::json CallerJson(const DaemonInfo& info) {
  if (!info.caller.has_value()) return nullptr;
  const DaemonCaller& c = *info.caller;
  const auth::Tenant& t = c.tenant;
  return {{"auth", c.auth},
          {"tenant", t.name},
          {"role", auth::RoleName(t.role)},
          {"priority", PriorityName(c.priority)},
          {"default_priority", PriorityName(t.Resolve(std::nullopt))},
          {"max_priority", PriorityName(t.max_priority)},
          {"weight", t.weight},
          {"max_queued_calls", t.max_queued_calls},
          {"max_queued_tokens", t.max_queued_tokens}};
}

// "tenant pipe, role decide (weight 2, batch only)", or why there is none.
std::string CallerText(const DaemonCaller& c) {
  if (!c.auth) return "auth off: every caller may do everything";
  const auth::Tenant& t = c.tenant;
  std::ostringstream out;
  out << "tenant " << t.name << ", role " << auth::RoleName(t.role)
      << " (weight " << t.weight << ", class "
      << PriorityName(t.Resolve(std::nullopt))
      << (t.max_priority == Priority::kBatch ? " only" : " by default");
  if (t.max_queued_calls != 0) {
    out << ", max " << t.max_queued_calls << " calls queued";
  }
  if (t.max_queued_tokens != 0) {
    out << ", max " << t.max_queued_tokens << " tokens queued";
  }
  out << ")";
  return out.str();
}

nlohmann::json ToJson(const DaemonInfo& info) {
  const auto& id = info.identity;
  const auto& caps = info.capabilities;
  const auto& limits = info.limits;
  return {{"name", id.name},
          {"caller", CallerJson(info)},
          {"device_info", DeviceJson(info)},
          {"system_memory_available_bytes",
           info.system_memory_available.has_value()
               ? nlohmann::json(*info.system_memory_available)
               : nlohmann::json(nullptr)},
          {"identity", id.identity},
          {"dtype", id.dtype},
          {"device", id.device},
          {"attention", id.attention},
          {"n_layers", caps.n_layers},
          {"hidden_size", caps.hidden_size},
          {"vocab_size", caps.vocab_size},
          {"max_choice_k", caps.max_choice_k},
          {"hidden_states", caps.hidden_states},
          {"early_stop", caps.early_stop},
          {"limits",
           {{"max_groups", limits.max_groups},
            {"max_suffixes", limits.max_suffixes},
            {"max_prompt_tokens", limits.max_prompt_tokens},
            {"max_total_tokens", limits.max_total_tokens},
            {"max_layers", limits.max_layers},
            {"max_top_k", limits.max_top_k},
            {"max_label_ids", limits.max_label_ids},
            {"max_texts", limits.max_texts},
            {"max_text_bytes", limits.max_text_bytes},
            {"max_decide_states", limits.max_decide_states},
            {"max_decide_questions", limits.max_decide_questions},
            {"max_fit_states", limits.max_fit_states},
            {"max_decide_tokens", limits.max_decide_tokens}}}};
}

void PrintTable(const std::string& address, const DaemonInfo& info) {
  auto row = [](const std::string& key, const auto& value) {
    std::cout << "  " << std::left << std::setw(16) << key << value << "\n";
  };
  const auto& caps = info.capabilities;
  const auto& limits = info.limits;
  std::cout << "mesa-anyjevd at " << address << "\n";
  row("model", info.identity.name);
  if (info.caller.has_value()) row("caller", CallerText(*info.caller));
  row("identity", info.identity.identity);
  row("dtype / device", info.identity.dtype + " / " + info.identity.device);
  if (info.device.has_value()) row("device", DeviceText(*info.device));
  if (info.system_memory_available.has_value()) {
    char gb[32];
    std::snprintf(gb, sizeof gb, "%.2f GB",
                  static_cast<double>(*info.system_memory_available) / 1e9);
    row("memory available", std::string(gb) + " (the host's MemAvailable)");
  }
  row("attention", info.identity.attention);
  row("layers", caps.n_layers);
  row("hidden size", caps.hidden_size);
  row("vocab size", caps.vocab_size);
  row("max choice K", caps.max_choice_k);
  row("hidden states", std::string(caps.hidden_states ? "yes" : "no") +
                           (caps.early_stop ? " (early stop)" : ""));
  row("limits", "groups " + std::to_string(limits.max_groups) + ", suffixes " +
                    std::to_string(limits.max_suffixes) + ", prompt tokens " +
                    std::to_string(limits.max_prompt_tokens) +
                    ", total tokens " +
                    std::to_string(limits.max_total_tokens) + ", layers " +
                    std::to_string(limits.max_layers) + ", top-k " +
                    std::to_string(limits.max_top_k));
}

}  // namespace

int RunInfo(const config::Config& config, const OutputOptions& output) {
  auto client = DaemonClient::Create(config.client);
  if (!client.ok()) {
    std::cerr << "mesa-anyjev: " << client.status().message() << "\n";
    return 2;
  }
  auto info = (*client)->Info();
  if (!info.ok()) {
    std::cerr << "mesa-anyjev: " << config.client.address << ": "
              << info.status().message() << "\n";
    return 1;
  }
  if (output.json) {
    ui::PrintJson(ToJson(*info), std::cout);
  } else {
    PrintTable(config.client.address, *info);
  }
  return 0;
}

}  // namespace mesa_anyjev::client
