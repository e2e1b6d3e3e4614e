// Each command's flags (see command_line.h). A command's options live in a
// shared_ptr that its flags fill while parsing and its run reads after.
#include "client/commands/command_line.h"

#include <memory>

#include "client/commands/commands.h"

namespace mesa_anyjev::client {
namespace {

const std::vector<std::string> kKinds = {"fake", "gateway", "hf", "composite"};
const std::vector<std::string> kLevels = {"raw", "L0", "L1", "L2", "auto"};

// bundles list | rollback and learn promote share the bundles options.
void AddBundleFlags(CommandLine* line, CLI::App* command,
                    BundlesCommandOptions* options) {
  line->AddBackendFlags(command, &options->backend);
  CommandLine::AddJson(command, &options->json);
}

void AddLearnPromote(CommandLine* line, CLI::App* learn) {
  auto options = std::make_shared<BundlesCommandOptions>();
  CLI::App* promote = line->Command(
      learn, "promote", "make --version the CURRENT one of --question",
      [options](const Invocation& in) {
        return RunLearnPromote(in.config, *options);
      });
  promote->add_option("--version", options->version)->required();
  promote->add_option("--question", options->question)->required();
  promote->add_flag("--force", options->force,
                    "skip the LOCO gate (not checksums or binding)");
  AddBundleFlags(line, promote, options.get());
}

// bench run's and bench compare's: which tasks, at which levels, where.
void AddTaskFlags(CLI::App* command, std::string* tasks, std::string* levels,
                  std::string* out, std::string* date, const char* choices) {
  command->add_option("--tasks", *tasks,
                      "task names a,b (default: every task with items)");
  command->add_option("--levels", *levels,
                      std::string(choices) + " subset (default raw,L0,L1)");
  command->add_option("--out", *out, "results root (default bench/results)");
  command->add_option("--date", *date,
                      "results directory name YYYY-MM-DD (default today, UTC)");
}

}  // namespace

std::vector<Connection::Given> Connection::Flags() const {
  std::vector<Given> all = {
      {"--address", "client.address", address},
      {"--token-file", "client.token_file", token_file},
      {"--tls-ca", "client.tls_ca", tls_ca},
      {"--gateway-url", "backend.gateway_base_url", gateway_url},
      {"--gateway-key-file", "backend.gateway_api_key_file", gateway_key_file},
      {"--gateway-ca", "backend.ca_file", gateway_ca}};
  std::vector<Given> given;
  for (const Given& g : all) {
    if (!g.value.empty()) given.push_back(g);
  }
  return given;
}

CLI::App* CommandLine::Command(CLI::App* parent, const char* name,
                               const char* help, Run run) {
  CLI::App* command =
      (parent != nullptr ? parent : app_)->add_subcommand(name, help);
  command->allow_extras();
  if (run) runs_.emplace_back(command, std::move(run));
  return command;
}

CLI::App* CommandLine::Group(const char* name, const char* help) {
  CLI::App* group = Command(nullptr, name, help);
  groups_.push_back(group);
  return group;
}

void CommandLine::AddDaemonFlags(CLI::App* command) {
  command->add_option("--address", connection_.address,
                      "mesa-anyjevd host:port (client.address)");
  command->add_option("--token-file", connection_.token_file,
                      "file (mode 0600) with the daemon's bearer token");
  command->add_option("--tls-ca", connection_.tls_ca,
                      "PEM CA of the daemon's certificate (turns TLS on)");
}

void CommandLine::AddGatewayFlags(CLI::App* command) {
  command->add_option("--gateway-url", connection_.gateway_url,
                      "gateway base URL, without /v1 "
                      "(backend.gateway_base_url)");
  command->add_option("--gateway-key-file", connection_.gateway_key_file,
                      "file (mode 0600) with the gateway's API key");
  command->add_option("--gateway-ca", connection_.gateway_ca,
                      "PEM CA bundle of a private gateway");
}

void CommandLine::AddBackendFlags(CLI::App* command, std::string* backend) {
  command->add_option("--backend", *backend, "fake | gateway | hf | composite")
      ->check(CLI::IsMember(kKinds));
  AddDaemonFlags(command);
  AddGatewayFlags(command);
}

void CommandLine::AddJson(CLI::App* command, bool* json) {
  command->add_flag("--json", *json, "print one JSON document for machines");
}

const CLI::App* CommandLine::GroupWithoutVerb() const {
  for (const CLI::App* group : groups_) {
    if (group->parsed() && group->get_subcommands().empty()) return group;
  }
  return nullptr;
}

const CommandLine::Run* CommandLine::Chosen() const {
  for (const auto& [command, run] : runs_) {
    if (command->parsed()) return &run;
  }
  return nullptr;
}

void AddHealthCommand(CommandLine* line) {
  auto wait_s = std::make_shared<double>(0);
  auto output = std::make_shared<OutputOptions>();
  CLI::App* health =
      line->Command(nullptr, "health", "is the daemon SERVING? exit 0 if so",
                    [wait_s, output](const Invocation& in) {
                      return RunHealth(in.config, *output, *wait_s);
                    });
  line->AddDaemonFlags(health);
  health
      ->add_option("--wait", *wait_s,
                   "seconds to wait for SERVING (a daemon just started)")
      ->check(CLI::Range(0.0, 3600.0));
  CommandLine::AddJson(health, &output->json);
}

void AddInfoCommand(CommandLine* line) {
  auto output = std::make_shared<OutputOptions>();
  CLI::App* info = line->Command(
      nullptr, "info", "what the daemon serves",
      [output](const Invocation& in) { return RunInfo(in.config, *output); });
  line->AddDaemonFlags(info);
  CommandLine::AddJson(info, &output->json);
}

void AddTokenizeCommand(CommandLine* line) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* tokenize = line->Command(
      nullptr, "tokenize",
      "JSON lines {\"text\": ...} on stdin -> {\"ids\": [...]} on stdout "
      "(offline, with a checkpoint's tokenizer.json)",
      [options](const Invocation&) { return RunTokenize(*options); });
  tokenize
      ->add_option("--tokenizer", options->tokenizer_dir,
                   "checkpoint directory holding tokenizer.json (or the file)")
      ->required();
  tokenize->add_flag("--decode", options->decode,
                     "read {\"ids\": [...]} lines, write {\"text\": ...}");
}

void AddQuestionsCommand(CommandLine* line) {
  auto options = std::make_shared<QuestionsOptions>();
  CLI::App* questions = line->Command(
      nullptr, "questions",
      "the served questions (a table with text and options); --check the "
      "lock",
      [options](const Invocation&) { return RunQuestions(*options); });
  questions->add_flag("--check", options->check,
                      "exit 0 if the lock matches the code, else 1 with "
                      "DRIFT lines on stderr");
  questions->add_flag("--update-lock", options->update_lock,
                      "rewrite the lock from the code");
  questions->add_option("--lock", options->lock_path,
                        "lock file (default: ./questions.lock.json)");
  CommandLine::AddJson(questions, &options->json);
  CLI::App* show = line->Command(questions, "show",
                                 "one question: its text, options and key");
  show->add_option("id", options->show_id, "question id")->required();
  CommandLine::AddJson(show, &options->json);
}

void AddDoctorCommand(CommandLine* line) {
  auto backend = std::make_shared<std::string>();
  auto output = std::make_shared<OutputOptions>();
  CLI::App* doctor = line->Command(
      nullptr, "doctor", "check the backend end to end; exit 0 when all pass",
      [backend, output](const Invocation& in) {
        return RunDoctor(in.config, *backend, *output);
      });
  line->AddBackendFlags(doctor, backend.get());
  CommandLine::AddJson(doctor, &output->json);
}

void AddDecideCommand(CommandLine* line) {
  auto options = std::make_shared<DecideCommandOptions>();
  CLI::App* decide = line->Command(
      nullptr, "decide",
      "decisions for a state (or, with --states-file, JSON lines of states)",
      [options](const Invocation& in) {
        options->replay_flags = in.replay_flags(options->backend);
        return RunDecide(in.config, *options);
      });
  line->AddBackendFlags(decide, &options->backend);
  decide
      ->add_option("--level", options->level,
                   "raw | L0 | L1 | L2 | auto (default: decider.level)")
      ->check(CLI::IsMember(kLevels));
  decide->add_option("--question", options->question_ids,
                     "a question id (repeatable; see `mesa-anyjev questions`)");
  decide->add_option("--questions-file", options->questions_file,
                     "a JSON list of {id, kind, text, options}");
  decide->add_option("--state", options->state, "the state text");
  decide->add_option("--state-file", options->state_file,
                     "read one state from a file (- or none: stdin); its "
                     "final line ending is dropped");
  decide->add_flag("--state-json", options->state_json,
                   "the state is JSON, rendered as the reference renders "
                   "dict states");
  decide->add_option(
      "--states-file", options->states_file,
      "JSON lines of states (- = stdin): a string, or {\"text\"|\"json\", "
      "\"id\"}; writes one JSON line per state");
  decide->add_option("--out", options->out,
                     "a pipeline run: the --states-file lines go to OUT, in "
                     "input order, flushed span by span; calls are retried "
                     "(docs/cli.md)");
  decide->add_flag("--resume", options->resume,
                   "keep the complete lines already in --out and decide only "
                   "the states after them");
  decide
      ->add_option("--span", options->span,
                   "states per call (default 64; at most the daemon's "
                   "limits.max_decide_states); keep it for --resume")
      ->check(CLI::PositiveNumber);
  decide
      ->add_option("--concurrency", options->concurrency,
                   "calls in flight (default 4; the daemon only)")
      ->check(CLI::Range(1, 1024));
  decide
      ->add_option("--deadline", options->deadline_s,
                   "seconds the whole run may take, retries included "
                   "(default: none)")
      ->check(CLI::PositiveNumber);
  CommandLine::AddJson(decide, &options->json);
  decide->add_flag("--strict", options->strict,
                   "exit 1 when a label logprob was missing");
}

void AddAnnotateCommand(CommandLine* line) {
  auto options = std::make_shared<AnnotateCommandOptions>();
  CLI::App* annotate = line->Command(
      nullptr, "annotate", "decide and propose AVUs for dataset cards",
      [options](const Invocation& in) {
        options->replay_flags = in.replay_flags(options->backend);
        return RunAnnotate(in.config, *options);
      });
  annotate
      ->add_option("--card", options->cards,
                   "dataset card, or a directory of *.md cards (repeatable)")
      ->required();
  line->AddBackendFlags(annotate, &options->backend);
  annotate
      ->add_option("--level", options->level,
                   "raw | L0 | L1 | L2 | auto (default: decider.level)")
      ->check(CLI::IsMember(kLevels));
  annotate->add_option("--candidates", options->candidates,
                       "recorded term searches (docs/annotate.md)");
  annotate->add_option("--out", options->out,
                       "write the evaluation result (JSON) here");
  CommandLine::AddJson(annotate, &options->json);
  annotate->add_flag("--strict", options->strict,
                     "exit 1 when a label logprob was missing");
}

void AddConfigCommand(CommandLine* line) {
  CLI::App* config = line->Group("config", "the effective configuration");
  auto output = std::make_shared<OutputOptions>();
  CLI::App* show = line->Command(
      config, "show", "print the merged configuration as YAML (secrets masked)",
      [output](const Invocation& in) {
        return RunConfigShow(in.config, *output);
      });
  line->AddDaemonFlags(show);
  line->AddGatewayFlags(show);
  CommandLine::AddJson(show, &output->json);
}

// docs/learning.md.
void AddLearnCommand(CommandLine* line) {
  auto options = std::make_shared<LearnOptions>();
  CLI::App* learn =
      line->Group("learn", "labels and fitting: ingest, fit L1 or L2, promote");
  CLI::App* ingest = line->Command(
      learn, "ingest", "validate a JSON-lines labels file and store it",
      [options](const Invocation& in) {
        options->replay_flags = in.replay_flags(options->backend);
        return RunLearnIngest(in.config, *options);
      });
  ingest->add_option("--labels", options->labels_file,
                     "the labels file (JSON lines; docs/learning.md)");
  CommandLine::AddJson(ingest, &options->json);

  CLI::App* fit = line->Command(
      learn, "fit",
      "fit one question with leave-one-card-out; exit 0 iff fitted",
      [options](const Invocation& in) {
        options->replay_flags = in.replay_flags(options->backend);
        return RunLearnFit(in.config, *options);
      });
  line->AddBackendFlags(fit, &options->backend);
  fit->add_option("--question", options->question_id,
                  "question id (default term.fits)");
  fit->add_option("--level", options->level, "L1 | L2 (default L1)")
      ->check(CLI::IsMember({"L1", "L2"}));
  fit->add_flag("--no-loco", options->no_loco,
                "skip leave-one-card-out (exploratory only)");
  fit->add_option("--out", options->out,
                  "also write artifacts.json, manifest.json and "
                  "report.json here");
  CommandLine::AddJson(fit, &options->json);

  AddLearnPromote(line, learn);
}

// docs/learning.md.
void AddBenchCommand(CommandLine* line) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* bench =
      line->Group("bench", "bench tasks from the label store, and tables");
  CLI::App* run = line->Command(
      bench, "run",
      "every task at each level; writes <out>/<date>/<slug>.<backend>.*",
      [options](const Invocation& in) {
        return RunBenchRun(in.config, *options);
      });
  line->AddBackendFlags(run, &options->backend);
  AddTaskFlags(run, &options->tasks, &options->levels, &options->out,
               &options->date, "raw,L0,L1,L2");
  run->add_flag("--no-loco", options->no_loco, "L1/L2 cells become n/a");
  run->add_flag("--no-flip", options->no_flip,
                "skip the option-reversal probe");
  run->add_flag("--strict", options->strict,
                "exit 1 when a label logprob was missing");
  CommandLine::AddJson(run, &options->json);

  auto compare = std::make_shared<BenchCompareOptions>();
  CLI::App* versus = line->Command(
      bench, "compare",
      "decide the labelled states through two backends and say per question "
      "whether they agree; keeps the agreement record",
      [compare](const Invocation& in) {
        return RunBenchCompare(in.config, *compare);
      });
  versus->add_option("--a", compare->a_kind, "model a's backend kind")
      ->required()
      ->check(CLI::IsMember(kKinds));
  versus->add_option("--b", compare->b_kind, "model b's backend kind")
      ->required()
      ->check(CLI::IsMember(kKinds));
  versus->add_option("--a-set", compare->a_sets,
                     "section.field=value for model a only (repeatable)");
  versus->add_option("--b-set", compare->b_sets,
                     "section.field=value for model b only (repeatable)");
  line->AddDaemonFlags(versus);
  line->AddGatewayFlags(versus);
  AddTaskFlags(versus, &compare->tasks, &compare->levels, &compare->out,
               &compare->date, "raw,L0,L1");
  versus->add_flag("--no-record", compare->no_record,
                   "keep no agreement record");
  CommandLine::AddJson(versus, &compare->json);

  CLI::App* table = line->Command(
      bench, "table", "print the table of a results file",
      [options](const Invocation&) { return RunBenchTable(*options); });
  table->add_option("--results", options->results, "a bench run's JSON file");
  CommandLine::AddJson(table, &options->json);
}

// docs/bundles.md; learn promote is AddLearnPromote.
void AddBundlesCommand(CommandLine* line) {
  auto options = std::make_shared<BundlesCommandOptions>();
  CLI::App* bundles = line->Group("bundles", "versioned L1/L2 bundles");
  CLI::App* list = line->Command(bundles, "list",
                                 "every version and which question serves it",
                                 [options](const Invocation& in) {
                                   return RunBundlesList(in.config, *options);
                                 });
  AddBundleFlags(line, list, options.get());
  list->add_option("--question", options->question,
                   "only this question's versions");

  CLI::App* rollback = line->Command(
      bundles, "rollback", "move --question's CURRENT back to the one before",
      [options](const Invocation& in) {
        return RunBundlesRollback(in.config, *options);
      });
  AddBundleFlags(line, rollback, options.get());
  rollback->add_option("--question", options->question)->required();

  auto adopt_options = std::make_shared<BundlesCommandOptions>();
  CLI::App* adopt = line->Command(
      bundles, "adopt",
      "take another model's version of --question, where an agreement "
      "record says the two agree on it",
      [adopt_options](const Invocation& in) {
        return RunBundlesAdopt(in.config, *adopt_options);
      });
  AddBundleFlags(line, adopt, adopt_options.get());
  adopt->add_option("--question", adopt_options->question)->required();
  adopt
      ->add_option("--from", adopt_options->from_kind,
                   "the other model's backend kind")
      ->required()
      ->check(CLI::IsMember(kKinds));
  adopt->add_option("--from-set", adopt_options->from_sets,
                    "section.field=value for the other model only "
                    "(repeatable)");
  adopt->add_option("--version", adopt_options->version,
                    "the other model's version (default: its CURRENT)");
  adopt->add_flag("--force", adopt_options->force, "skip the LOCO gate");
}

void AddTokensCommand(CommandLine* line) {
  // Plain values for CLI11 2.1 (no std::optional); a flag's count says
  // whether it was given.
  struct Given {
    TokensAddOptions options;
    std::string role, priority, max_priority;
    double weight = 1;
    int64_t max_queued_calls = 0, max_queued_tokens = 0;
    const CLI::App* add = nullptr;  // whose counts say what was given
  };
  auto given = std::make_shared<Given>();
  CLI::App* tokens = line->Group("tokens", "the daemon's tenants and tokens");
  CLI::App* add = line->Command(
      tokens, "add",
      "make a token for --tenant, print it once, append its digest to --file",
      [given](const Invocation&) {
        TokensAddOptions options = given->options;
        auto set = [&](const char* flag, auto& field, const auto& value) {
          if (given->add->count(flag) > 0) field = value;
        };
        set("--role", options.role, given->role);
        set("--weight", options.weight, given->weight);
        set("--max-queued-calls", options.max_queued_calls,
            given->max_queued_calls);
        set("--max-queued-tokens", options.max_queued_tokens,
            given->max_queued_tokens);
        set("--priority", options.priority, given->priority);
        set("--max-priority", options.max_priority, given->max_priority);
        return RunTokensAdd(options);
      });
  add->add_option("--tenant", given->options.tenant,
                  "the tenant's name: 1..64 of [A-Za-z0-9._-]")
      ->required();
  add->add_option("--file", given->options.file,
                  "the tokens file (auth.tokens_file); made if missing")
      ->required();
  add->add_option("--role", given->role,
                  "decide | learn | admin (required for a new tenant)");
  add->add_option("--weight", given->weight,
                  "the tenant's share against others with work queued (1)");
  add->add_option("--max-queued-calls", given->max_queued_calls,
                  "calls it may keep queued (0: the daemon's default)");
  add->add_option("--max-queued-tokens", given->max_queued_tokens,
                  "prompt tokens it may keep queued (0: the default)");
  add->add_option("--priority", given->priority,
                  "its class when a call asks none: interactive | batch");
  add->add_option("--max-priority", given->max_priority,
                  "batch: every call of the tenant runs as batch");
  CommandLine::AddJson(add, &given->options.json);
  given->add = add;
}

}  // namespace mesa_anyjev::client
