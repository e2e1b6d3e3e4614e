// What `mesa-anyjev decide` shares between its modes (one state, a stream
// of JSON lines, a pipeline run with --out): a state as read, a line of
// --states-file, and the checks that turn the provider's decisions into
// records or end the command with what to run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/backends/provider.h"
#include "client/commands/commands.h"
#include "client/commands/run_retries.h"
#include "client/policy/decision_record.h"
#include "common/decision/decision.h"
#include "common/decision/level.h"
#include "common/decision/question.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::client {

// A state as the prompt's text and as the JSON its record carries.
struct StateInput {
  std::string text;
  nlohmann::ordered_json json;
  nlohmann::ordered_json id;  // --states-file: echoed back (null if absent)
};

// One line of --states-file: a JSON string (the text), or an object with
// "text" (a string) or "json" (any JSON, rendered as a dict state) and an
// optional "id" echoed in the output. `where` names the line in errors.
absl::StatusOr<StateInput> StateFromLine(const std::string& line,
                                         const std::string& where);

// The questions over states through `provider`. A refusal, or an explicit
// level served lower, is printed with what to run and ends the command.
class DecideRun {
 public:
  DecideRun(const DecideCommandOptions& options, Provider& provider,
            const std::vector<decision::Question>& questions,
            decision::Level level)
      : options_(options),
        provider_(provider),
        questions_(questions),
        level_(level) {}

  // One batch of states, question by question through DecideBatch:
  // records[s][q] and the label logprobs missing per question. 0, or the
  // exit code after printing why.
  int Decide(const std::vector<StateInput>& states,
             std::vector<std::vector<policy::DecisionRecord>>* records,
             std::vector<int64_t>* missing);

  // The reference's CapabilityError, before any work: a wide choice below
  // L2 is refused (its noul twin is the question to ask). 0, or 1 printed.
  int CheckWidth(const decision::Question& question) const;
  int CheckWidths() const;

  // The record of `decision` for question `q` on `state`; an explicit level
  // served lower is printed with its remedy (nullopt: exit 1).
  std::optional<policy::DecisionRecord> Record(
      const decision::Decision& decision, size_t q,
      const nlohmann::ordered_json& state) const;

  // A failed call printed as "mesa-anyjev decide: <prefix>message", with
  // the remedy when a level cannot be served (for the question named in
  // the message, else `question_id`); returns 1.
  int Failed(const absl::Status& status, const std::string& prefix,
             const std::string& question_id) const;

  const std::vector<decision::Question>& questions() const {
    return questions_;
  }
  decision::Level level() const { return level_; }

 private:
  void Remedy(const std::string& question_id) const;

  const DecideCommandOptions& options_;
  Provider& provider_;
  const std::vector<decision::Question>& questions_;
  const decision::Level level_;
};

// --states-file with --out: the pipeline run (docs/cli.md "Pipelines"),
// its daemon calls sent again by `retries` (the rule `provider` was made
// with).
int RunDecidePipeline(const DecideCommandOptions& options, Provider& provider,
                      const DecideRun& run, RunRetries& retries);

}  // namespace mesa_anyjev::client
