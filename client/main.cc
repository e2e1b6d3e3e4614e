// mesa-anyjev: the thin CLI. The options every command shares, the list of
// commands, parsing and dispatch; each command's flags are wired in
// client/commands/command_line.cc and its work lives beside them. Exit codes:
// 0 ok, 1 a check failed, 2 usage or configuration error.
#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/commands/command_line.h"
#include "client/ui/terminal.h"
#include "common/config/config_loader.h"
#include "common/config/set_flag.h"
#include "common/status/status_macros.h"
#include "common/util/build_info.h"
#include "common/util/suggest.h"

namespace {

namespace cli = mesa_anyjev::client;

// The options every command takes: where the configuration comes from.
struct CommonFlags {
  std::string config_path;
  std::vector<std::string> sets;
  bool version = false;
};

// The innermost subcommand the arguments chose (the app itself if none).
const CLI::App* Leaf(const CLI::App& app) {
  const CLI::App* leaf = &app;
  for (bool deeper = true; deeper;) {
    deeper = false;
    for (const CLI::App* sub : leaf->get_subcommands()) {
      leaf = sub;
      deeper = true;
      break;
    }
  }
  return leaf;
}

// Arguments no command or flag took: usage error, with the closest command
// or flag when one is near.
int ReportUnexpected(const CLI::App& app) {
  const CLI::App* leaf = Leaf(app);
  std::vector<std::string> extras;
  for (const CLI::App* at = leaf; at != nullptr; at = at->get_parent()) {
    for (const std::string& arg : at->remaining()) extras.push_back(arg);
  }
  if (extras.empty()) return 0;
  const std::string& first = extras.front();
  std::vector<std::string> names;
  std::string what = "argument";
  if (first.rfind("-", 0) == 0) {
    what = "flag";
    for (const CLI::App* at = leaf; at != nullptr; at = at->get_parent()) {
      for (const CLI::Option* option : at->get_options()) {
        for (const std::string& name : option->get_lnames()) {
          names.push_back("--" + name);
        }
      }
    }
  } else {
    what = leaf == &app ? "command" : "argument";
    for (const CLI::App* sub :
         leaf->get_subcommands([](const CLI::App*) { return true; })) {
      names.push_back(sub->get_name());
    }
  }
  const std::string flag = first.substr(0, first.find('='));
  std::string path;
  for (const CLI::App* at = leaf; at != nullptr; at = at->get_parent()) {
    path = path.empty() ? at->get_name() : at->get_name() + " " + path;
  }
  std::cerr << "mesa-anyjev: unknown " << what << " '" << flag << "'"
            << mesa_anyjev::util::DidYouMean(flag, names) << "; see '" << path
            << " --help'\n";
  return 2;
}

// Parses; an exit code when the arguments end the run there (help, a usage
// error, --version, no command), else nullopt: a command was chosen.
std::optional<int> Parse(CLI::App* app, const cli::CommandLine& commands,
                         const CommonFlags& common, int argc, char** argv) {
  try {
    app->parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app->exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app->exit(e);
  } catch (const CLI::ParseError& e) {
    app->exit(e);
    return 2;
  }
  if (const int code = ReportUnexpected(*app); code != 0) return code;
  if (const CLI::App* group = commands.GroupWithoutVerb()) {
    std::cerr << group->help();
    return 2;
  }
  if (common.version) {
    std::cout << "mesa-anyjev " << mesa_anyjev::util::kVersion << " ("
              << mesa_anyjev::util::kCommit << ")\n";
    return 0;
  }
  if (app->get_subcommands().empty()) {
    std::cerr << app->help();
    return 2;
  }
  return std::nullopt;
}

// The configuration: defaults, --config, the environment, then --set and the
// connection flags as overrides.
absl::StatusOr<mesa_anyjev::config::Config> Load(
    const CommonFlags& common, const cli::Connection& connection) {
  mesa_anyjev::config::LoadOptions options;
  options.config_path = common.config_path;
  options.env = mesa_anyjev::config::ProcessEnvironment();
  for (const std::string& set : common.sets) {
    ASSIGN_OR_RETURN(mesa_anyjev::config::Override parsed,
                     mesa_anyjev::config::ParseSetFlag(set));
    options.flags.push_back(std::move(parsed));
  }
  for (const cli::Connection::Given& g : connection.Flags()) {
    options.flags.push_back(mesa_anyjev::config::Override{
        g.key, g.value, std::string("flag ") + g.flag});
  }
  return mesa_anyjev::config::LoadConfig(options);
}

// The flags that say where to decide and where bundles live, for the
// commands a command advises next (learn fit's promote, a level remedy).
std::string ReplayFlags(const CommonFlags& common,
                        const cli::Connection& connection,
                        const std::string& backend) {
  std::vector<std::string> words;
  if (!common.config_path.empty()) {
    words.insert(words.end(), {"--config", common.config_path});
  }
  for (const std::string& set : common.sets) {
    words.insert(words.end(), {"--set", set});
  }
  if (!backend.empty()) words.insert(words.end(), {"--backend", backend});
  for (const cli::Connection::Given& g : connection.Flags()) {
    words.insert(words.end(), {g.flag, g.value});
  }
  return cli::ui::ShellQuoted(words);
}

int Main(int argc, char** argv) {
  CLI::App app{"mesa-anyjev: typed decisions with probabilities from an LLM"};
  app.name("mesa-anyjev");
  app.require_subcommand(0, 1);
  app.fallthrough();  // --config and --set may follow the subcommand
  app.allow_extras();
  CommonFlags common;
  app.add_option("--config", common.config_path, "YAML configuration file");
  app.add_option("--set", common.sets,
                 "override any key: section.field=value (repeatable)");
  app.add_flag("--version", common.version, "print the version and exit");

  cli::CommandLine commands(&app);
  cli::AddHealthCommand(&commands);
  cli::AddInfoCommand(&commands);
  cli::AddTokenizeCommand(&commands);
  cli::AddQuestionsCommand(&commands);
  cli::AddDoctorCommand(&commands);
  cli::AddDecideCommand(&commands);
  cli::AddAnnotateCommand(&commands);
  cli::AddConfigCommand(&commands);
  cli::AddLearnCommand(&commands);
  cli::AddBenchCommand(&commands);
  cli::AddBundlesCommand(&commands);
  cli::AddTokensCommand(&commands);

  if (const std::optional<int> code =
          Parse(&app, commands, common, argc, argv)) {
    return *code;
  }
  const absl::StatusOr<mesa_anyjev::config::Config> config =
      Load(common, commands.connection());
  if (!config.ok()) {
    std::cerr << "mesa-anyjev: " << config.status().message() << "\n";
    return 2;
  }
  const cli::CommandLine::Run* run = commands.Chosen();
  if (run == nullptr) return 2;
  return (*run)(cli::Invocation{*config, [&](const std::string& backend) {
                                  return ReplayFlags(
                                      common, commands.connection(), backend);
                                }});
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
