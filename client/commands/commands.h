// The mesa-anyjev subcommands. Each returns the process exit code: 0 ok,
// 1 a check failed or the daemon answered an error, 2 usage or config error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/config/config.h"

namespace mesa_anyjev::client {

struct OutputOptions {
  bool json = false;  // one JSON document on stdout instead of text
};

// Exit 0 when SERVING; `wait_s` > 0 polls until then, for at most that long.
int RunHealth(const config::Config& config, const OutputOptions& output,
              double wait_s = 0);
int RunInfo(const config::Config& config, const OutputOptions& output);

struct TokenizeOptions {
  std::string tokenizer_dir;  // holds tokenizer.json (or names the file)
  bool decode = false;        // ids -> text instead of text -> ids
};

// Offline: JSON lines on stdin, JSON lines on stdout; no daemon involved.
int RunTokenize(const TokenizeOptions& options);

struct QuestionsOptions {
  std::string lock_path;     // "" = DefaultLockPath()
  bool check = false;        // compare with the lock: exit 0 in sync, 1 drift
  bool update_lock = false;  // rewrite the lock from the code (atomically)
  bool json = false;         // listing or check result as one JSON document
  std::string show_id;       // `questions show ID`: one question in full
};

// Offline: the fixed-key questions and questions.lock.json (docs/cli.md).
int RunQuestions(const QuestionsOptions& options);

// The lock file the checks read: ./questions.lock.json when present, else
// the one of the source tree this binary was built from.
std::string DefaultLockPath();

// The reference's checks for `backend` ("" = backend.kind): one line each,
// exit 0 when all pass, else 1.
int RunDoctor(const config::Config& config, const std::string& backend,
              const OutputOptions& output);

struct DecideCommandOptions {
  std::string backend;  // "" = backend.kind
  std::string level;    // "" = decider.level
  std::string state;    // the state text; else state_file; else stdin
  std::string state_file;
  bool state_json = false;  // the state is JSON (rendered as a dict state)
  // JSON lines of states ("-" = stdin): decided together, one JSON line out
  // per state.
  std::string states_file;
  // A pipeline run (docs/cli.md "Pipelines"): the lines go to `out`,
  // flushed span by span; `resume` keeps the complete lines there. 0 for
  // span, concurrency and deadline_s means not given (64, 4, none).
  std::string out;
  bool resume = false;
  int64_t span = 0;
  int32_t concurrency = 0;
  double deadline_s = 0;
  std::vector<std::string> question_ids;  // from the question set
  std::string questions_file;             // JSON list of questions
  bool json = false;
  bool strict = false;  // a missing label logprob exits 1
  // The backend, config and connection flags as given, shell-quoted: the
  // commands a refusal advises carry them.
  std::string replay_flags;
};

// Decisions for one state; exit 0 decided, 1 refused or failed, 2 bad input.
int RunDecide(const config::Config& config,
              const DecideCommandOptions& options);

struct AnnotateCommandOptions {
  // Dataset cards (required): files, or directories of *.md cards.
  std::vector<std::string> cards;
  std::string backend;       // "" = backend.kind
  std::string level;         // "" = decider.level
  std::string candidates;    // recorded searches; "" skips term search
  std::string out;           // the evaluation result (JSON), if given
  bool json = false;         // the whole run record on stdout
  bool strict = false;       // a missing label logprob exits 1
  std::string replay_flags;  // as DecideCommandOptions'
};

// The annotate graph per card; exit 0 decided, 1 the backend failed or the
// level cannot be served, 2 a bad card or candidates file.
int RunAnnotate(const config::Config& config,
                const AnnotateCommandOptions& options);

// bundles list / bundles rollback / learn promote (docs/bundles.md): the
// local store under artifacts.dir for fake and gateway, the daemon's
// Bundles service for hf and composite.
struct BundlesCommandOptions {
  std::string backend;   // "" = backend.kind
  std::string question;  // list: whose CURRENT is marked ("" = any)
  int version = 0;       // promote; adopt: the other model's (0 = CURRENT)
  bool force = false;    // promote, adopt: skip the LOCO gate
  bool json = false;     // list
  // adopt: the other model's backend kind and its own --set values.
  std::string from_kind;
  std::vector<std::string> from_sets;
};

// The reference's three lines per version (docs/bundles.md); exit 0.
int RunBundlesList(const config::Config& config,
                   const BundlesCommandOptions& options);
// Prints "CURRENT -> v<N>", "no version v<N>" or the refusal (the gate's
// "v<N> regresses against v<C>: ..."); exit 0 iff promoted.
int RunLearnPromote(const config::Config& config,
                    const BundlesCommandOptions& options);
// The question's CURRENT back to the one before; exit 0 iff moved.
int RunBundlesRollback(const config::Config& config,
                       const BundlesCommandOptions& options);
// A version of another model for one question, put and promoted here once
// a current agreement record says the two agree on it (docs/bundles.md,
// Agreement); exit 0 iff adopted and promoted, 1 refused, 2 usage.
int RunBundlesAdopt(const config::Config& config,
                    const BundlesCommandOptions& options);

// The effective configuration as YAML (secrets reported as set/unset only).
int RunConfigShow(const config::Config& config, const OutputOptions& output);

struct LearnOptions {
  std::string backend;      // "" = backend.kind
  std::string labels_file;  // ingest: JSON lines (docs/learning.md)
  std::string question_id = "term.fits";
  std::string level = "L1";  // fit: L1 | L2
  bool no_loco = false;      // fit: skip leave-one-card-out (exploratory)
  std::string out;           // fit: where the fit's files are written
  bool json = false;         // the summary or report as JSON
  std::string replay_flags;  // as DecideCommandOptions': the promote advised
};

// learn ingest: validates every row, stores nothing from a file with a bad
// row (exit 1, each named on stderr), else inserts and prints the summary.
int RunLearnIngest(const config::Config& config, const LearnOptions& options);
// learn fit: prints the fit report; exit 0 iff fitted.
int RunLearnFit(const config::Config& config, const LearnOptions& options);

struct BenchOptions {
  std::string backend;  // "" = backend.kind
  std::string tasks;    // "a,b"; "" = every task with items
  std::string levels = "raw,L0,L1";
  bool no_loco = false;
  bool no_flip = false;
  std::string out = "bench/results";
  std::string date;     // "" = today (UTC)
  std::string results;  // table: the results JSON
  bool strict = false;  // run: a missing label logprob exits 1
  bool json = false;    // run: the results; table: the rows
};

// bench run: tasks from the label store at each level; writes
// <out>/<date>/<slug>.<backend>.{json,md} and SVG plots beside them.
int RunBenchRun(const config::Config& config, const BenchOptions& options);
// bench table: the Markdown table of a results file.
int RunBenchTable(const BenchOptions& options);

struct BenchCompareOptions {
  std::string a_kind;  // fake | gateway | hf | composite
  std::string b_kind;
  std::vector<std::string> a_sets;  // section.field=value for model a only
  std::vector<std::string> b_sets;
  std::string tasks;  // "a,b"; "" = every task with items
  std::string levels = "raw,L0,L1";
  std::string out = "bench/results";
  std::string date;        // "" = today (UTC)
  bool no_record = false;  // write no agreement record
  bool json = false;
};

// bench compare: the label store's tasks through two backends, per question
// and level; writes the results and keeps the agreement record beside both
// models' bundles. Exit 0 when every question agrees, 1 otherwise, 2 usage.
int RunBenchCompare(const config::Config& config,
                    const BenchCompareOptions& options);

// tokens add (docs/operations.md, "Tenants and roles"): a new token for a
// tenant, printed once; its digest appended to the daemon's tokens file.
// Flags not given keep the tenant's existing entry's values (a rotation).
struct TokensAddOptions {
  std::string tenant;
  std::string file;
  std::optional<std::string> role;  // required for a new tenant
  std::optional<double> weight;
  std::optional<int64_t> max_queued_calls;
  std::optional<int64_t> max_queued_tokens;
  std::optional<std::string> priority;
  std::optional<std::string> max_priority;
  bool json = false;  // {"tenant", "role", "token", "file"} on stdout
};

// Exit 0 written, 1 the file cannot be read or written, 2 a bad flag or an
// entry the daemon would refuse (nothing written either way).
int RunTokensAdd(const TokensAddOptions& options);

}  // namespace mesa_anyjev::client
