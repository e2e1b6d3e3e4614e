// mesa-anyjev: the thin CLI. Flags and subcommand dispatch; each command
// lives in client/commands/. Exit codes: 0 ok, 1 a check failed, 2 usage or
// configuration error.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "client/commands/commands.h"
#include "client/ui/terminal.h"
#include "common/config/config_loader.h"
#include "common/config/set_flag.h"
#include "common/util/build_info.h"
#include "common/util/suggest.h"

namespace {

using mesa_anyjev::config::Override;
namespace cli = mesa_anyjev::client;

const std::vector<std::string> kKinds = {"fake", "gateway", "hf", "composite"};
const std::vector<std::string> kLevels = {"raw", "L0", "L1", "L2", "auto"};

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
  std::vector<Given> Flags() const {
    std::vector<Given> all = {
        {"--address", "client.address", address},
        {"--token-file", "client.token_file", token_file},
        {"--tls-ca", "client.tls_ca", tls_ca},
        {"--gateway-url", "backend.gateway_base_url", gateway_url},
        {"--gateway-key-file", "backend.gateway_api_key_file",
         gateway_key_file},
        {"--gateway-ca", "backend.ca_file", gateway_ca}};
    std::vector<Given> given;
    for (const Given& g : all) {
      if (!g.value.empty()) given.push_back(g);
    }
    return given;
  }
};

void AddDaemonFlags(CLI::App* command, Connection* c) {
  command->add_option("--address", c->address,
                      "mesa-anyjevd host:port (client.address)");
  command->add_option("--token-file", c->token_file,
                      "file (mode 0600) with the daemon's bearer token");
  command->add_option("--tls-ca", c->tls_ca,
                      "PEM CA of the daemon's certificate (turns TLS on)");
}

void AddGatewayFlags(CLI::App* command, Connection* c) {
  command->add_option("--gateway-url", c->gateway_url,
                      "gateway base URL, without /v1 "
                      "(backend.gateway_base_url)");
  command->add_option("--gateway-key-file", c->gateway_key_file,
                      "file (mode 0600) with the gateway's API key");
  command->add_option("--gateway-ca", c->gateway_ca,
                      "PEM CA bundle of a private gateway");
}

// --backend, and the connection flags of every kind it can name.
void AddBackendFlags(CLI::App* command, std::string* backend, Connection* c) {
  command->add_option("--backend", *backend, "fake | gateway | hf | composite")
      ->check(CLI::IsMember(kKinds));
  AddDaemonFlags(command, c);
  AddGatewayFlags(command, c);
}

void AddJson(CLI::App* command, bool* json) {
  command->add_flag("--json", *json, "print one JSON document for machines");
}

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

int Main(int argc, char** argv) {
  CLI::App app{"mesa-anyjev: typed decisions with probabilities from an LLM"};
  app.name("mesa-anyjev");
  app.require_subcommand(0, 1);
  app.fallthrough();  // --config and --set may follow the subcommand
  app.allow_extras();
  std::string config_path;
  std::vector<std::string> sets;
  bool version = false;
  app.add_option("--config", config_path, "YAML configuration file");
  app.add_option("--set", sets,
                 "override any key: section.field=value (repeatable)");
  app.add_flag("--version", version, "print the version and exit");

  Connection connection;
  bool json = false;
  auto command = [&](CLI::App* parent, const char* name, const char* help) {
    CLI::App* sub = parent->add_subcommand(name, help);
    sub->allow_extras();
    return sub;
  };

  CLI::App* health =
      command(&app, "health", "is the daemon SERVING? exit 0 if so");
  AddDaemonFlags(health, &connection);
  double health_wait = 0;
  health
      ->add_option("--wait", health_wait,
                   "seconds to wait for SERVING (a daemon just started)")
      ->check(CLI::Range(0.0, 3600.0));
  AddJson(health, &json);
  CLI::App* info = command(&app, "info", "what the daemon serves");
  AddDaemonFlags(info, &connection);
  AddJson(info, &json);

  cli::TokenizeOptions tokenize_options;
  CLI::App* tokenize = command(
      &app, "tokenize",
      "JSON lines {\"text\": ...} on stdin -> {\"ids\": [...]} on stdout "
      "(offline, with a checkpoint's tokenizer.json)");
  tokenize
      ->add_option("--tokenizer", tokenize_options.tokenizer_dir,
                   "checkpoint directory holding tokenizer.json (or the file)")
      ->required();
  tokenize->add_flag("--decode", tokenize_options.decode,
                     "read {\"ids\": [...]} lines, write {\"text\": ...}");

  cli::QuestionsOptions questions_options;
  CLI::App* questions = command(
      &app, "questions",
      "the served questions (a table with text and options); --check the "
      "lock");
  questions->add_flag("--check", questions_options.check,
                      "exit 0 if the lock matches the code, else 1 with "
                      "DRIFT lines on stderr");
  questions->add_flag("--update-lock", questions_options.update_lock,
                      "rewrite the lock from the code");
  questions->add_option("--lock", questions_options.lock_path,
                        "lock file (default: ./questions.lock.json)");
  AddJson(questions, &questions_options.json);
  CLI::App* questions_show =
      command(questions, "show", "one question: its text, options and key");
  questions_show->add_option("id", questions_options.show_id, "question id")
      ->required();
  AddJson(questions_show, &questions_options.json);

  std::string doctor_backend;
  CLI::App* doctor = command(
      &app, "doctor", "check the backend end to end; exit 0 when all pass");
  AddBackendFlags(doctor, &doctor_backend, &connection);
  AddJson(doctor, &json);

  cli::DecideCommandOptions decide_options;
  CLI::App* decide = command(
      &app, "decide",
      "decisions for a state (or, with --states-file, JSON lines of states)");
  AddBackendFlags(decide, &decide_options.backend, &connection);
  decide
      ->add_option("--level", decide_options.level,
                   "raw | L0 | L1 | L2 | auto (default: decider.level)")
      ->check(CLI::IsMember(kLevels));
  decide->add_option("--question", decide_options.question_ids,
                     "a question id (repeatable; see `mesa-anyjev questions`)");
  decide->add_option("--questions-file", decide_options.questions_file,
                     "a JSON list of {id, kind, text, options}");
  decide->add_option("--state", decide_options.state, "the state text");
  decide->add_option("--state-file", decide_options.state_file,
                     "read one state from a file (- or none: stdin); its "
                     "final line ending is dropped");
  decide->add_flag("--state-json", decide_options.state_json,
                   "the state is JSON, rendered as the reference renders "
                   "dict states");
  decide->add_option(
      "--states-file", decide_options.states_file,
      "JSON lines of states (- = stdin): a string, or {\"text\"|\"json\", "
      "\"id\"}; writes one JSON line per state");
  AddJson(decide, &decide_options.json);
  decide->add_flag("--strict", decide_options.strict,
                   "exit 1 when a label logprob was missing");

  cli::AnnotateCommandOptions annotate_options;
  CLI::App* annotate =
      command(&app, "annotate", "decide and propose AVUs for dataset cards");
  annotate
      ->add_option("--card", annotate_options.cards,
                   "dataset card, or a directory of *.md cards (repeatable)")
      ->required();
  AddBackendFlags(annotate, &annotate_options.backend, &connection);
  annotate
      ->add_option("--level", annotate_options.level,
                   "raw | L0 | L1 | L2 | auto (default: decider.level)")
      ->check(CLI::IsMember(kLevels));
  annotate->add_option("--candidates", annotate_options.candidates,
                       "recorded term searches (docs/annotate.md)");
  annotate->add_option("--out", annotate_options.out,
                       "write the evaluation result (JSON) here");
  AddJson(annotate, &annotate_options.json);
  annotate->add_flag("--strict", annotate_options.strict,
                     "exit 1 when a label logprob was missing");

  CLI::App* config_command =
      command(&app, "config", "the effective configuration");
  CLI::App* config_show =
      command(config_command, "show",
              "print the merged configuration as YAML (secrets masked)");
  AddDaemonFlags(config_show, &connection);
  AddGatewayFlags(config_show, &connection);
  AddJson(config_show, &json);

  // learn {ingest|fit|promote} and bench {run|table} (docs/learning.md).
  cli::LearnOptions learn_options;
  CLI::App* learn = command(
      &app, "learn", "labels and fitting: ingest, fit L1 or L2, promote");
  CLI::App* learn_ingest = command(
      learn, "ingest", "validate a JSON-lines labels file and store it");
  learn_ingest->add_option("--labels", learn_options.labels_file,
                           "the labels file (JSON lines; docs/learning.md)");
  AddJson(learn_ingest, &learn_options.json);
  CLI::App* learn_fit =
      command(learn, "fit",
              "fit one question with leave-one-card-out; exit 0 iff "
              "fitted");
  AddBackendFlags(learn_fit, &learn_options.backend, &connection);
  learn_fit->add_option("--question", learn_options.question_id,
                        "question id (default term.fits)");
  learn_fit->add_option("--level", learn_options.level, "L1 | L2 (default L1)")
      ->check(CLI::IsMember({"L1", "L2"}));
  learn_fit->add_flag("--no-loco", learn_options.no_loco,
                      "skip leave-one-card-out (exploratory only)");
  learn_fit->add_option("--out", learn_options.out,
                        "also write artifacts.json, manifest.json and "
                        "report.json here");
  AddJson(learn_fit, &learn_options.json);

  cli::BundlesCommandOptions bundle_options;
  CLI::App* learn_promote =
      command(learn, "promote", "make --version the CURRENT one of --question");
  learn_promote->add_option("--version", bundle_options.version)->required();
  learn_promote->add_option("--question", bundle_options.question)->required();
  learn_promote->add_flag("--force", bundle_options.force,
                          "skip the LOCO gate (not checksums or binding)");

  cli::BenchOptions bench_options;
  CLI::App* bench =
      command(&app, "bench", "bench tasks from the label store, and tables");
  CLI::App* bench_run = command(
      bench, "run",
      "every task at each level; writes <out>/<date>/<slug>.<backend>.*");
  AddBackendFlags(bench_run, &bench_options.backend, &connection);
  bench_run->add_option("--tasks", bench_options.tasks,
                        "task names a,b (default: every task with items)");
  bench_run->add_option("--levels", bench_options.levels,
                        "raw,L0,L1,L2 subset (default raw,L0,L1)");
  bench_run->add_flag("--no-loco", bench_options.no_loco,
                      "L1/L2 cells become n/a");
  bench_run->add_flag("--no-flip", bench_options.no_flip,
                      "skip the option-reversal probe");
  bench_run->add_flag("--strict", bench_options.strict,
                      "exit 1 when a label logprob was missing");
  bench_run->add_option("--out", bench_options.out,
                        "results root (default bench/results)");
  bench_run->add_option("--date", bench_options.date,
                        "results directory name YYYY-MM-DD (default today, "
                        "UTC)");
  AddJson(bench_run, &bench_options.json);
  CLI::App* bench_table =
      command(bench, "table", "print the table of a results file");
  bench_table->add_option("--results", bench_options.results,
                          "a bench run's JSON file");
  AddJson(bench_table, &bench_options.json);

  // Bundles (docs/bundles.md): bundles list|rollback, learn promote.
  CLI::App* bundles_command =
      command(&app, "bundles", "versioned L1/L2 bundles");
  CLI::App* bundles_list = command(
      bundles_command, "list", "every version and which question serves it");
  CLI::App* bundles_rollback =
      command(bundles_command, "rollback",
              "move --question's CURRENT back to the one before");
  for (CLI::App* sub : {bundles_list, bundles_rollback, learn_promote}) {
    AddBackendFlags(sub, &bundle_options.backend, &connection);
    AddJson(sub, &bundle_options.json);
  }
  bundles_list->add_option("--question", bundle_options.question,
                           "only this question's versions");
  bundles_rollback->add_option("--question", bundle_options.question)
      ->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (const int code = ReportUnexpected(app); code != 0) return code;
  // A group needs one of its verbs.
  for (const CLI::App* group :
       {config_command, learn, bench, bundles_command}) {
    if (group->parsed() && group->get_subcommands().empty()) {
      std::cerr << group->help();
      return 2;
    }
  }
  if (version) {
    std::cout << "mesa-anyjev " << mesa_anyjev::util::kVersion << " ("
              << mesa_anyjev::util::kCommit << ")\n";
    return 0;
  }
  if (app.get_subcommands().empty()) {
    std::cerr << app.help();
    return 2;
  }

  mesa_anyjev::config::LoadOptions options;
  options.config_path = config_path;
  options.env = mesa_anyjev::config::ProcessEnvironment();
  for (const std::string& set : sets) {
    auto parsed = mesa_anyjev::config::ParseSetFlag(set);
    if (!parsed.ok()) {
      std::cerr << "mesa-anyjev: " << parsed.status().message() << "\n";
      return 2;
    }
    options.flags.push_back(*std::move(parsed));
  }
  for (const Connection::Given& g : connection.Flags()) {
    options.flags.push_back(
        Override{g.key, g.value, std::string("flag ") + g.flag});
  }
  auto config = mesa_anyjev::config::LoadConfig(options);
  if (!config.ok()) {
    std::cerr << "mesa-anyjev: " << config.status().message() << "\n";
    return 2;
  }
  // The flags that say where to decide and where bundles live, for the
  // commands a command advises next (learn fit's promote, a level remedy).
  auto replay = [&](const std::string& backend) {
    std::vector<std::string> words;
    if (!config_path.empty())
      words.insert(words.end(), {"--config", config_path});
    for (const std::string& set : sets)
      words.insert(words.end(), {"--set", set});
    if (!backend.empty()) words.insert(words.end(), {"--backend", backend});
    for (const Connection::Given& g : connection.Flags()) {
      words.insert(words.end(), {g.flag, g.value});
    }
    return mesa_anyjev::client::ui::ShellQuoted(words);
  };
  decide_options.replay_flags = replay(decide_options.backend);
  annotate_options.replay_flags = replay(annotate_options.backend);
  learn_options.replay_flags = replay(learn_options.backend);
  const cli::OutputOptions output{json};
  if (health->parsed()) return cli::RunHealth(*config, output, health_wait);
  if (info->parsed()) return cli::RunInfo(*config, output);
  if (tokenize->parsed()) return cli::RunTokenize(tokenize_options);
  if (doctor->parsed()) return cli::RunDoctor(*config, doctor_backend, output);
  if (decide->parsed()) return cli::RunDecide(*config, decide_options);
  if (annotate->parsed()) return cli::RunAnnotate(*config, annotate_options);
  if (config_show->parsed()) return cli::RunConfigShow(*config, output);
  if (bundles_list->parsed()) {
    return cli::RunBundlesList(*config, bundle_options);
  }
  if (bundles_rollback->parsed()) {
    return cli::RunBundlesRollback(*config, bundle_options);
  }
  if (learn_promote->parsed()) {
    return cli::RunLearnPromote(*config, bundle_options);
  }
  if (questions->parsed()) return cli::RunQuestions(questions_options);
  if (learn_ingest->parsed()) {
    return cli::RunLearnIngest(*config, learn_options);
  }
  if (learn_fit->parsed()) return cli::RunLearnFit(*config, learn_options);
  if (bench_run->parsed()) return cli::RunBenchRun(*config, bench_options);
  if (bench_table->parsed()) return cli::RunBenchTable(bench_options);
  return 2;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
