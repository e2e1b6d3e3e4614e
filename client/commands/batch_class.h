// The priority class of dataset work (docs/operations.md, "Tenants and
// roles"): decide --out, bench run and compare, and learn fit ask the daemon
// for batch, so a curator's single question goes first, unless
// client.priority names a class.
#pragma once

#include "common/config/config.h"

namespace mesa_anyjev::client {

inline config::Config AsBatchRun(config::Config config) {
  if (config.client.priority == "default") config.client.priority = "batch";
  return config;
}

}  // namespace mesa_anyjev::client
