// Loads Config with precedence flag > environment > YAML file > default.
//
// Every field is addressed as "section.field" (the struct member names in
// config.h). One schema table in config_loader.cc drives parsing, the
// environment mapping, KnownKeys() and ToYaml(), so adding a field is one
// line there. Loading is strict: unknown keys, malformed values and values
// out of range are errors. Every error is absl::InvalidArgumentError with a
// message starting "config: " (the daemon and the CLI exit 2 on it).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config/config.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::config {

// One value given on the command line.
struct Override {
  std::string key;     // "section.field", e.g. "server.listen"
  std::string value;   // raw text, parsed per the field's type
  std::string origin;  // shown in errors, e.g. "flag --listen"
};

struct LoadOptions {
  std::string config_path;                 // --config; "" = no file
  std::vector<Override> flags;             // applied last, in order
  std::map<std::string, std::string> env;  // environment snapshot
};

// A snapshot of the process environment (name -> value).
std::map<std::string, std::string> ProcessEnvironment();

// Builds the effective configuration:
//   1. built-in defaults (config.h);
//   2. the YAML file at options.config_path, if not empty ("~/" expands to
//      env["HOME"]); an empty file is {}, unknown sections or fields fail;
//   3. environment variables MESA_ANYJEV_<SECTION>__<FIELD> (parts are
//      case-insensitive); names without "__" are not configuration (test
//      gates, install settings such as MESA_ANYJEV_VENV) and are ignored;
//   4. options.flags, in order.
// Values are parsed by the field's declared type, never by YAML typing: a
// string field keeps "off" as "off". The merged result is then validated
// (ranges, host:port, the TLS pair, ...); all validation failures are
// reported together, joined with "; ", in schema order.
absl::StatusOr<Config> LoadConfig(const LoadOptions& options);

// `base` with `flags` applied in order, validated as LoadConfig validates:
// one command's second configuration (bench compare's --b-set on top of
// the configuration every command gets).
absl::StatusOr<Config> WithOverrides(const Config& base,
                                     const std::vector<Override>& flags);

// The validation step of LoadConfig alone, for a Config built in code.
absl::Status ValidateConfig(const Config& config);

// Every "section.field", sorted.
std::vector<std::string> KnownKeys();

// The configuration as YAML, every key, sections in struct order; strings
// double-quoted, doubles in shortest round-trip form, so that LoadConfig of
// the text yields an equal Config.
std::string ToYaml(const Config& config);

// The same values as one JSON object {section: {field: value}}, typed as
// declared (config show --json).
nlohmann::ordered_json ToJson(const Config& config);

}  // namespace mesa_anyjev::config
