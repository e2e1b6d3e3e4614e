// `mesa-anyjev doctor`: the reference's checks for one backend kind, one
// line each ("[ok] name: detail" / "[FAIL] name: detail"); exit 0 when all
// pass, else 1.
#include <iostream>

#include "client/commands/commands.h"
#include "client/commands/doctor_checks.h"
#include "client/ui/terminal.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::client {

int RunDoctor(const config::Config& config, const std::string& backend,
              const OutputOptions& output) {
  const std::string kind = backend.empty() ? config.backend.kind : backend;
  const std::vector<DoctorCheck> checks = RunDoctorChecks(config, kind);
  bool ok = true;
  for (const DoctorCheck& check : checks) ok = ok && check.ok;
  if (output.json) {
    nlohmann::ordered_json doc = {{"ok", ok},
                                  {"backend", kind},
                                  {"checks", nlohmann::ordered_json::array()}};
    for (const DoctorCheck& check : checks) {
      doc["checks"].push_back(
          {{"name", check.name}, {"ok", check.ok}, {"detail", check.detail}});
    }
    ui::PrintJson(doc, std::cout);
  } else {
    for (const DoctorCheck& check : checks) {
      std::cout << (check.ok ? "[ok] " : "[FAIL] ") << check.name
                << (check.detail.empty() ? "" : ": ") << check.detail << "\n";
    }
  }
  return ok ? 0 : 1;
}

}  // namespace mesa_anyjev::client
