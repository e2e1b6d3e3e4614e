// mesa-anyjev: the thin CLI. Global flags and subcommand dispatch; each
// command lives in client/commands/. Exit codes: 0 ok, 1 a check failed,
// 2 usage or configuration error.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "client/commands/commands.h"
#include "common/config/config_loader.h"
#include "common/config/set_flag.h"
#include "common/util/build_info.h"

namespace {

using mesa_anyjev::config::Override;

int Main(int argc, char** argv) {
  CLI::App app{"mesa-anyjev: typed decisions with probabilities from an LLM"};
  app.require_subcommand(0, 1);
  app.fallthrough();  // global flags may follow the subcommand
  std::string config_path;
  std::vector<std::string> sets;
  bool version = false, json = false;
  app.add_option("--config", config_path, "YAML configuration file");
  app.add_option("--set", sets,
                 "override any key: section.field=value (repeatable)");
  app.add_flag("--version", version, "print the version and exit");

  std::string address;
  auto add_address = [&](CLI::App* command) {
    command->add_option("--address", address,
                        "daemon host:port (default: client.address)");
    command->add_flag("--json", json, "print JSON for machines");
  };
  CLI::App* health =
      app.add_subcommand("health", "is the daemon SERVING? exit 0 if so");
  add_address(health);
  CLI::App* info = app.add_subcommand("info", "what the daemon serves");
  add_address(info);
  mesa_anyjev::client::TokenizeOptions tokenize_options;
  CLI::App* tokenize = app.add_subcommand(
      "tokenize",
      "JSON lines {\"text\": ...} on stdin -> {\"ids\": [...]} on stdout "
      "(offline, with a checkpoint's tokenizer.json)");
  tokenize
      ->add_option("--tokenizer", tokenize_options.tokenizer_dir,
                   "checkpoint directory holding tokenizer.json (or the file)")
      ->required();
  tokenize->add_flag("--decode", tokenize_options.decode,
                     "read {\"ids\": [...]} lines, write {\"text\": ...}");
  mesa_anyjev::client::QuestionsOptions questions_options;
  CLI::App* questions = app.add_subcommand(
      "questions", "the fixed-key questions and questions.lock.json");
  questions->add_flag("--check", questions_options.check,
                      "exit 0 if the lock matches the code, else 1 with "
                      "DRIFT lines on stderr");
  questions->add_flag("--update-lock", questions_options.update_lock,
                      "rewrite the lock from the code");
  questions->add_option("--lock", questions_options.lock_path,
                        "lock file (default: ./questions.lock.json)");
  questions->add_flag("--json", questions_options.json,
                      "print JSON for machines");

  std::string doctor_backend;
  CLI::App* doctor = app.add_subcommand(
      "doctor", "check the backend end to end; exit 0 when every check passes");
  const std::vector<std::string> kinds = {"fake", "gateway", "hf", "composite"};
  doctor
      ->add_option("--backend", doctor_backend,
                   "backend kind for the checks (default: backend.kind)")
      ->check(CLI::IsMember(kinds));
  doctor->add_flag("--json", json, "print JSON for machines");

  mesa_anyjev::client::DecideCommandOptions decide_options;
  CLI::App* decide = app.add_subcommand(
      "decide", "decisions for one state: --question ID ... at --level");
  decide->add_option("--backend", decide_options.backend, "backend kind")
      ->check(CLI::IsMember(kinds));
  decide
      ->add_option("--level", decide_options.level,
                   "raw | L0 | L1 | L2 | auto (default: decider.level)")
      ->check(CLI::IsMember({"raw", "L0", "L1", "L2", "auto"}));
  decide->add_option("--state", decide_options.state, "the state text");
  decide->add_option("--state-file", decide_options.state_file,
                     "read the state from a file (- = stdin; default stdin)");
  decide->add_flag("--state-json", decide_options.state_json,
                   "the state is JSON, rendered as the reference renders "
                   "dict states");
  decide->add_option("--question", decide_options.question_ids,
                     "a question id of the question set (repeatable)");
  decide->add_option("--questions-file", decide_options.questions_file,
                     "a JSON list of {id, kind, text, options}");
  decide->add_flag("--json", decide_options.json, "print JSON for machines");
  decide->add_flag("--strict", decide_options.strict,
                   "exit 1 when a label logprob was missing");

  mesa_anyjev::client::AnnotateCommandOptions annotate_options;
  CLI::App* annotate = app.add_subcommand(
      "annotate", "decide and propose AVUs for one dataset card");
  annotate->add_option("--card", annotate_options.card, "dataset card")
      ->required();
  annotate->add_option("--backend", annotate_options.backend, "backend kind")
      ->check(CLI::IsMember(kinds));
  annotate
      ->add_option("--level", annotate_options.level,
                   "raw | L0 | L1 | L2 | auto (default: decider.level)")
      ->check(CLI::IsMember({"raw", "L0", "L1", "L2", "auto"}));
  annotate->add_option("--candidates", annotate_options.candidates,
                       "recorded term searches (docs/annotate.md)");
  annotate->add_option("--out", annotate_options.out,
                       "write the evaluation result (JSON) here");
  annotate->add_flag("--json", annotate_options.json,
                     "print the whole run record as JSON");
  annotate->add_flag("--strict", annotate_options.strict,
                     "exit 1 when a label logprob was missing");

  CLI::App* config_command =
      app.add_subcommand("config", "the effective configuration");
  config_command->require_subcommand(1);
  CLI::App* config_show = config_command->add_subcommand(
      "show", "print the merged configuration as YAML (secrets masked)");

  // learn {ingest|fit} and bench {run|table} (docs/learning.md, docs/cli.md).
  mesa_anyjev::client::LearnOptions learn_options;
  CLI::App* learn = app.add_subcommand(
      "learn", "labels and fitting: ingest a labels file, fit L1 or L2");
  learn->require_subcommand(1);
  CLI::App* learn_ingest = learn->add_subcommand(
      "ingest", "validate a JSON-lines labels file and add it to the store");
  learn_ingest->add_option("--labels", learn_options.labels_file,
                           "the labels file (JSON lines; docs/learning.md)");
  CLI::App* learn_fit = learn->add_subcommand(
      "fit", "fit one question with leave-one-card-out; exit 0 iff fitted");
  learn_fit->add_option("--backend", learn_options.backend, "backend kind")
      ->check(CLI::IsMember(kinds));
  learn_fit->add_option("--question", learn_options.question_id,
                        "question id (default term.fits)");
  learn_fit->add_option("--level", learn_options.level, "L1 | L2 (default L1)")
      ->check(CLI::IsMember({"L1", "L2"}));
  learn_fit->add_flag("--no-loco", learn_options.no_loco,
                      "skip leave-one-card-out (exploratory only)");
  learn_fit->add_option("--out", learn_options.out,
                        "write artifacts.json, manifest.json and report.json "
                        "here");
  mesa_anyjev::client::BenchOptions bench_options;
  CLI::App* bench = app.add_subcommand(
      "bench", "bench tasks from the label store, and their table");
  bench->require_subcommand(1);
  CLI::App* bench_run = bench->add_subcommand(
      "run",
      "every task at each level; writes <out>/<date>/<slug>.<backend>.*");
  bench_run->add_option("--backend", bench_options.backend, "backend kind")
      ->check(CLI::IsMember(kinds));
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
  CLI::App* bench_table = bench->add_subcommand(
      "table", "print the Markdown table of a results file");
  bench_table->add_option("--results", bench_options.results,
                          "a bench run's JSON file");

  // Bundles (docs/bundles.md): bundles list|rollback, learn promote.
  mesa_anyjev::client::BundlesCommandOptions bundle_options;
  CLI::App* bundles_command =
      app.add_subcommand("bundles", "versioned L1/L2 bundles");
  bundles_command->require_subcommand(1);
  CLI::App* bundles_list = bundles_command->add_subcommand(
      "list", "every version; * marks the current one of --question");
  CLI::App* bundles_rollback = bundles_command->add_subcommand(
      "rollback", "move --question's CURRENT back to the one before");
  CLI::App* learn_command = nullptr;
  try {  // `learn` may already carry other verbs
    learn_command = app.get_subcommand("learn");
  } catch (const CLI::OptionNotFound&) {
    learn_command = app.add_subcommand("learn", "fit and promote bundles");
    learn_command->require_subcommand(1);
  }
  CLI::App* learn_promote = learn_command->add_subcommand(
      "promote", "make --version the CURRENT one of --question (LOCO gate)");
  for (CLI::App* command : {bundles_list, bundles_rollback, learn_promote}) {
    command->add_option("--backend", bundle_options.backend, "backend kind")
        ->check(CLI::IsMember(kinds));
  }
  bundles_list->add_option("--question", bundle_options.question,
                           "question id whose CURRENT version is marked");
  bundles_list->add_flag("--json", bundle_options.json,
                         "print JSON for machines");
  bundles_rollback->add_option("--question", bundle_options.question)
      ->required();
  learn_promote->add_option("--version", bundle_options.version)->required();
  learn_promote->add_option("--question", bundle_options.question)->required();
  learn_promote->add_flag("--force", bundle_options.force,
                          "skip the LOCO gate (not checksums or binding)");

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
  if (!address.empty()) {
    options.flags.push_back(
        Override{"client.address", address, "flag --address"});
  }
  auto config = mesa_anyjev::config::LoadConfig(options);
  if (!config.ok()) {
    std::cerr << "mesa-anyjev: " << config.status().message() << "\n";
    return 2;
  }
  const mesa_anyjev::client::OutputOptions output{json};
  if (health->parsed()) return mesa_anyjev::client::RunHealth(*config, output);
  if (info->parsed()) return mesa_anyjev::client::RunInfo(*config, output);
  if (tokenize->parsed()) {
    return mesa_anyjev::client::RunTokenize(tokenize_options);
  }
  if (doctor->parsed()) {
    return mesa_anyjev::client::RunDoctor(*config, doctor_backend, output);
  }
  if (decide->parsed()) {
    return mesa_anyjev::client::RunDecide(*config, decide_options);
  }
  if (annotate->parsed()) {
    return mesa_anyjev::client::RunAnnotate(*config, annotate_options);
  }
  if (config_show->parsed()) return mesa_anyjev::client::RunConfigShow(*config);
  if (bundles_list->parsed()) {
    return mesa_anyjev::client::RunBundlesList(*config, bundle_options);
  }
  if (bundles_rollback->parsed()) {
    return mesa_anyjev::client::RunBundlesRollback(*config, bundle_options);
  }
  if (learn_promote->parsed()) {
    return mesa_anyjev::client::RunLearnPromote(*config, bundle_options);
  }
  if (questions->parsed()) {
    return mesa_anyjev::client::RunQuestions(questions_options);
  }
  if (learn_ingest->parsed()) {
    return mesa_anyjev::client::RunLearnIngest(*config, learn_options);
  }
  if (learn_fit->parsed()) {
    return mesa_anyjev::client::RunLearnFit(*config, learn_options);
  }
  if (bench_run->parsed()) {
    return mesa_anyjev::client::RunBenchRun(*config, bench_options);
  }
  if (bench_table->parsed()) {
    return mesa_anyjev::client::RunBenchTable(bench_options);
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
