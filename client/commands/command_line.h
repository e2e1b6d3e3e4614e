// The CLI's commands as CLI11 subcommands. Each command's subcommand, flags,
// defaults and help are wired in one function of its own (command_line.cc)
// onto a CommandLine; main.cc adds the options every command shares, parses
// and runs the command chosen. Flags land in the command's options struct
// (commands.h); the command runs once the configuration is loaded.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/config/config.h"

namespace mesa_anyjev::client {

// The connection flags: the same on every command that talks to a daemon
// or a gateway, each an override of one configuration key.
struct Connection {
  std::string address, token_file, tls_ca;
  std::string gateway_url, gateway_key_file, gateway_ca;

  struct Given {
    const char* flag;
    const char* key;
    const std::string& value;
  };
  // The flags given (non-empty), in the order --help lists them.
  std::vector<Given> Flags() const;
};

// What a chosen command runs with.
struct Invocation {
  const config::Config& config;
  // The config and connection flags as given, with --backend `backend`,
  // shell-quoted: the commands a command advises next (learn fit's promote,
  // a level remedy) carry them.
  std::function<std::string(const std::string& backend)> replay_flags;
};

// The subcommands of one CLI::App, the connection flags they share, and
// what runs each.
class CommandLine {
 public:
  using Run = std::function<int(const Invocation&)>;

  explicit CommandLine(CLI::App* app) : app_(app) {}

  // A subcommand of `parent` (null: of the app) that runs `run` when the
  // arguments choose it. Without `run` it is part of its parent's command
  // (questions show). Unknown arguments are reported after parsing.
  CLI::App* Command(CLI::App* parent, const char* name, const char* help,
                    Run run = nullptr);
  // A subcommand that only groups verbs: chosen without one, a usage error.
  CLI::App* Group(const char* name, const char* help);

  // --address, --token-file, --tls-ca.
  void AddDaemonFlags(CLI::App* command);
  // --gateway-url, --gateway-key-file, --gateway-ca.
  void AddGatewayFlags(CLI::App* command);
  // --backend, and the connection flags of every kind it can name.
  void AddBackendFlags(CLI::App* command, std::string* backend);
  static void AddJson(CLI::App* command, bool* json);

  const Connection& connection() const { return connection_; }
  // After parsing: the group chosen without a verb, else null.
  const CLI::App* GroupWithoutVerb() const;
  // After parsing: the chosen command's run, else null.
  const Run* Chosen() const;

 private:
  CLI::App* const app_;
  Connection connection_;
  std::vector<const CLI::App*> groups_;
  std::vector<std::pair<const CLI::App*, Run>> runs_;
};

// One function per command, in the order `mesa-anyjev --help` lists them.
void AddHealthCommand(CommandLine* line);
void AddInfoCommand(CommandLine* line);
void AddTokenizeCommand(CommandLine* line);
void AddQuestionsCommand(CommandLine* line);
void AddDoctorCommand(CommandLine* line);
void AddDecideCommand(CommandLine* line);
void AddAnnotateCommand(CommandLine* line);
void AddConfigCommand(CommandLine* line);
// learn ingest | fit | promote (promote: a bundles verb, docs/bundles.md).
void AddLearnCommand(CommandLine* line);
void AddBenchCommand(CommandLine* line);
void AddBundlesCommand(CommandLine* line);
void AddTokensCommand(CommandLine* line);

}  // namespace mesa_anyjev::client
