#include "common/decision/decider_options.h"

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/config/config.h"
#include "common/config/config_loader.h"

namespace mesa_anyjev::decision {
namespace {

config::Config Load(
    const std::vector<std::pair<std::string, std::string>>& flags) {
  config::LoadOptions options;
  for (const auto& [key, value] : flags) {
    options.flags.push_back({key, value, "flag --" + key});
  }
  absl::StatusOr<config::Config> config = config::LoadConfig(options);
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  return *config;
}

// The daemon's decider (decisions.*) and the CLI's (decider.*).
DeciderOptions Daemon(const config::Config& config) {
  return DeciderOptionsFrom(config.decisions);
}
DeciderOptions Cli(const config::Config& config) {
  return DeciderOptionsFrom(config.decider);
}

TEST_CASE("decider options: the daemon's and the CLI's defaults are equal",
          "[decision]") {
  const config::Config config = Load({});
  CHECK(Daemon(config) == Cli(config));
  // And both are the decider's own defaults.
  CHECK(Daemon(config) == DeciderOptions{});
}

TEST_CASE("decider options: the same keys give the same decider",
          "[decision]") {
  const config::Config config = Load({{"decisions.prior", "content_free"},
                                      {"decider.prior", "content_free"},
                                      {"decisions.adaptive_shifts", "true"},
                                      {"decider.adaptive_shifts", "true"}});
  const DeciderOptions daemon = Daemon(config);
  CHECK(daemon == Cli(config));
  CHECK(daemon.prior == PriorMode::kContentFree);
  CHECK(daemon.adaptive_shifts);
  CHECK_FALSE(daemon == DeciderOptions{});
  // Fits read without the rotation budget, all else as served.
  DeciderOptions fits = ForFits(daemon);
  CHECK_FALSE(fits.adaptive_shifts);
  fits.adaptive_shifts = true;
  CHECK(fits == daemon);
}

TEST_CASE("decider options: a key one section has changes that side only",
          "[decision]") {
  const config::Config config =
      Load({{"decisions.canonical_order", "true"},
            {"decisions.auto_routes_reworded", "false"},
            {"decider.max_permutations", "3"},
            {"decider.prior", "none"}});
  const DeciderOptions daemon = Daemon(config);
  const DeciderOptions cli = Cli(config);
  CHECK(daemon.canonical_order);
  CHECK_FALSE(daemon.auto_routes_reworded);
  CHECK_FALSE(daemon.max_permutations.has_value());
  CHECK(daemon.prior == PriorMode::kBatch);
  CHECK_FALSE(cli.canonical_order);
  CHECK(cli.auto_routes_reworded);
  CHECK(cli.max_permutations == 3);
  CHECK(cli.prior == PriorMode::kNone);
}

}  // namespace
}  // namespace mesa_anyjev::decision
