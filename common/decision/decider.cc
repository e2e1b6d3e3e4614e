// The Decider (see decider.h): what a question can be served at, and Decide
// as its steps: the call's settings and what it serves from, the level of
// each question, the running priors staged, each level's readout (L2, L1,
// L0, raw, in the package's order), and what the call keeps once it has
// succeeded. The readouts follow anyjev 0.2.0's Decider._run,
// _run_adaptive_choice and _run_heads step by step, so that the same calls
// give the same probabilities; comments say where the order matters.
#include "common/decision/decider.h"

#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/decision/call_settings.h"
#include "common/decision/head_readout.h"
#include "common/decision/label_readout.h"
#include "common/decision/listing.h"
#include "common/decision/permute.h"
#include "common/decision/rotation.h"
#include "common/status/status_macros.h"
#include "common/util/hash.h"

namespace mesa_anyjev::decision {

namespace {

using Grid = std::vector<std::vector<Decision>>;  // [state][question]

absl::Status CheckRequire(Level level, const std::optional<Level>& require) {
  if (require.has_value() && *require == Level::kAuto) {
    return absl::InvalidArgumentError(
        "require must be a level (raw, L0, L1, L2), not auto");
  }
  if (require.has_value() && level != Level::kAuto &&
      LevelRank(level) < LevelRank(*require)) {
    return absl::InvalidArgumentError(
        absl::StrCat("require=", LevelName(*require),
                     " is above the requested level ", LevelName(level)));
  }
  return absl::OkStatus();
}

// The questions served at `level`, by index.
std::vector<size_t> ServedAt(const std::vector<Level>& served, Level level) {
  std::vector<size_t> index;
  for (size_t q = 0; q < served.size(); ++q) {
    if (served[q] == level) index.push_back(q);
  }
  return index;
}

std::vector<Question> Select(const std::vector<Question>& questions,
                             const std::vector<size_t>& index) {
  std::vector<Question> out;
  for (size_t q : index) out.push_back(questions[q]);
  return out;
}

// Moves `group` [state][j] into columns index[j] of `out`.
void PutColumns(Grid group, const std::vector<size_t>& index, Grid* out) {
  for (size_t s = 0; s < group.size(); ++s) {
    for (size_t j = 0; j < index.size(); ++j) {
      (*out)[s][index[j]] = std::move(group[s][j]);
    }
  }
}

// Moves `column` [state] into column q of `out`.
void PutColumn(std::vector<Decision> column, size_t q, Grid* out) {
  for (size_t s = 0; s < column.size(); ++s)
    (*out)[s][q] = std::move(column[s]);
}

// Whether a question takes the rotation budget: an unordered choice with
// K >= 3 above raw, when the call asks for it.
bool Rotates(const Question& question, Level level, bool adaptive_shifts) {
  return adaptive_shifts && level != Level::kRaw &&
         question.kind() == QuestionKind::kChoice && !question.ordered() &&
         question.k() >= 3;
}

// The running accumulator of each listing a call reads, as the call found
// it (none yet: nullopt): from the caller's table when the call carries
// one, else the decider's.
using PriorsSeen = std::map<std::string, std::optional<PriorAccumulator>>;

PriorsSeen PriorsBefore(const std::vector<Question>& questions,
                        const std::vector<Level>& served,
                        const CallSettings& call, const RunningPriors& running,
                        const PriorTable* carried) {
  PriorsSeen before;
  for (size_t q = 0; q < questions.size(); ++q) {
    if (served[q] == Level::kRaw || served[q] == Level::kL2) continue;
    const std::string listing =
        ListingKey(questions[q], Shifts(questions[q], served[q], call));
    if (before.contains(listing)) continue;
    if (carried == nullptr) {
      before[listing] = running.Get(listing);
    } else if (const auto it = carried->find(listing); it != carried->end()) {
      before[listing] = it->second;
    } else {
      before[listing] = std::nullopt;
    }
  }
  return before;
}

// What a call added to its staged priors, written back where they came
// from: the caller's table, or the decider's as a change (calls that ran
// side by side on copies all count).
void KeepPriors(const PriorsSeen& before, const RunningPriors& staged,
                PriorTable* carried, RunningPriors* running) {
  for (const auto& [listing, base] : before) {
    std::optional<PriorAccumulator> after = staged.Get(listing);
    if (!after.has_value()) continue;
    if (carried != nullptr) {
      (*carried)[listing] = *std::move(after);
    } else {
      running->AddChange(listing, base, *after);
    }
  }
}

// Stamps the question, a score's value and the prompt's hash.
Decision Decorate(const PromptReader& reader, Decision decision,
                  const Question& question, const std::string& state,
                  const ResolvedLabels& labels) {
  decision.question_id = question.id();
  decision.question_key = question.key();
  decision.kind = question.kind();
  decision.options = question.options();
  if (question.kind() == QuestionKind::kScore) {
    const std::vector<double> centers = question.BinCenters();
    double value = 0.0;
    for (size_t k = 0; k < centers.size(); ++k) {
      value += decision.probs[k] * centers[k];
    }
    decision.score_value = value;
  }
  decision.diagnostics.prompt_sha256 = util::Sha256Hex(
      reader.Text(state, question, Identity(question.k()), labels));
  return decision;
}

// The last step of every level: L1's temperature (at L1), then each
// state's decision stamped.
absl::StatusOr<std::vector<Decision>> Finish(
    const PromptReader& reader, std::vector<Decision> decisions,
    const Question& question, const ResolvedLabels& labels, Level level,
    const ArtifactSnapshot& snapshot, const std::vector<std::string>& states) {
  if (level == Level::kL1) {
    const std::shared_ptr<const TemperatureScaler> l1 =
        snapshot.L1(question.key());
    if (l1 == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("no L1 artifact for ", Describe(question)));
    }
    for (Decision& decision : decisions) {
      decision = WithTemperature(*l1, std::move(decision));
    }
  }
  for (size_t s = 0; s < states.size(); ++s) {
    decisions[s] =
        Decorate(reader, std::move(decisions[s]), question, states[s], labels);
  }
  return decisions;
}

}  // namespace

Decider::Decider(Backend* backend, DeciderOptions options)
    : backend_(backend),
      options_(std::move(options)),
      reader_(backend, options_.system, options_.max_prompts_per_call),
      content_free_(options_.cf_probes),
      artifacts_(backend) {}

absl::StatusOr<std::vector<std::vector<Decision>>> Decider::Decide(
    const std::vector<std::string>& states,
    const std::vector<Question>& questions, Level level,
    const DecideOptions& options, const CallControl& control) {
  RETURN_IF_ERROR(CheckRequire(level, options.require));
  // 1. The call's settings, and the L1 artifacts and heads it serves from,
  //    read once.
  const CallSettings call = CallSettings::Of(options_, options);
  const ArtifactSnapshot snapshot =
      artifacts_.Snapshot(questions, options.exact_heads);
  // 2. Each question's level, checked before any model call.
  ASSIGN_OR_RETURN(const std::vector<Level> served,
                   ServeLevels(questions, level, options.require, snapshot));
  Grid out(states.size(), std::vector<Decision>(questions.size()));
  if (states.empty() || questions.empty()) return out;
  // 3. A call that fails part-way (deadline, cancel, a model error) leaves
  //    no trace: its readouts go to staged copies of the running priors and
  //    its L2 features to a list, both kept only once every question is
  //    answered.
  RunningPriors& running = priors_.Of(control.tenant);
  const PriorsSeen before =
      PriorsBefore(questions, served, call, running, options.carried_priors);
  RunningPriors staged;
  for (const auto& [listing, accumulator] : before) {
    if (accumulator.has_value()) staged.Merge(listing, *accumulator);
  }
  Seen seen;
  // 4. One readout per served level, in the package's order L2, L1, L0.
  for (Level lv : {Level::kL2, Level::kL1, Level::kL0, Level::kRaw}) {
    const std::vector<size_t> index = ServedAt(served, lv);
    if (index.empty()) continue;
    const std::vector<Question> asked = Select(questions, index);
    ASSIGN_OR_RETURN(
        Grid decisions,
        lv == Level::kL2
            ? ReadHeads(states, asked, call, snapshot, &seen, control)
            : ReadLabels(states, asked, lv, call, snapshot, &staged, control));
    PutColumns(std::move(decisions), index, &out);
  }
  // 5. What the call keeps.
  KeepPriors(before, staged, options.carried_priors, &running);
  for (const auto& [key, features] : seen) {
    artifacts_.adaptation().Add(control.tenant, key, features);
  }
  return out;
}

absl::StatusOr<Level> Decider::ServedLevel(const Question& question,
                                           Level requested,
                                           const DecideOptions& options) const {
  return ServedLevelFor(question, requested,
                        artifacts_.Snapshot({question}, options.exact_heads));
}

absl::StatusOr<Level> Decider::ServedLevelFor(
    const Question& question, Level requested,
    const ArtifactSnapshot& snapshot) const {
  const Capabilities& caps = backend_->capabilities();
  switch (requested) {
    case Level::kRaw:
    case Level::kL0:
      return requested;
    case Level::kL1:
      if (snapshot.L1(question.key()) == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("L1 needs an L1 artifact for ", Describe(question),
                         "; none is loaded (calibrate one with Fit at level "
                         "L1, or load an artifacts file)"));
      }
      return Level::kL1;
    case Level::kL2:
      if (!caps.hidden_states) {
        return absl::FailedPreconditionError(
            absl::StrCat("L2 needs hidden states; model '",
                         backend_->identity().name, "' serves none"));
      }
      if (!snapshot.Route(question).has_value()) {
        if (artifacts_.Route(question).has_value()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "L2 needs a head for ", Describe(question),
              " fit on this exact key (exact_heads); the only head is "
              "routed from a rewording or its option set (fit one on this "
              "key with Fit at level L2)"));
        }
        return absl::FailedPreconditionError(absl::StrCat(
            "L2 needs a head for ", Describe(question),
            "; no head was fit on this key, a rewording of it or (random "
            "listing) its option set (fit one with Fit at level L2, or load "
            "a heads file)"));
      }
      return Level::kL2;
    case Level::kAuto: {
      if (caps.hidden_states) {
        const auto routed = snapshot.Route(question);
        if (routed.has_value() &&
            (routed->exact || options_.auto_routes_reworded)) {
          return Level::kL2;
        }
      }
      return snapshot.L1(question.key()) != nullptr ? Level::kL1 : Level::kL0;
    }
  }
  return absl::InvalidArgumentError("unknown level");
}

absl::Status Decider::CheckQuestion(const Question& question,
                                    Level served) const {
  const int32_t cap = backend_->capabilities().max_choice_k;
  if (question.kind() == QuestionKind::kChoice && served != Level::kL2 &&
      cap > 0 && question.k() > cap) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(question), " has K=", question.k(),
                     " options, over the model's max_choice_k=", cap,
                     " (ask a yes/no question per option instead)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Level>> Decider::ServeLevels(
    const std::vector<Question>& questions, Level level,
    const std::optional<Level>& require, const ArtifactSnapshot& snapshot) {
  std::vector<Level> served;
  for (const Question& question : questions) {
    ASSIGN_OR_RETURN(const Level lv, ServedLevelFor(question, level, snapshot));
    if (require.has_value() && LevelRank(lv) < LevelRank(*require)) {
      const auto why = ServedLevelFor(question, *require, snapshot);
      return absl::FailedPreconditionError(absl::StrCat(
          Describe(question), " would be served at ", LevelName(lv),
          ", below require=", LevelName(*require), why.ok() ? "" : ": ",
          why.ok() ? "" : why.status().message()));
    }
    RETURN_IF_ERROR(CheckQuestion(question, lv));
    RETURN_IF_ERROR(reader_.Labels(question).status());
    served.push_back(lv);
  }
  return served;
}

absl::StatusOr<Grid> Decider::ReadLabels(const std::vector<std::string>& states,
                                         const std::vector<Question>& questions,
                                         Level level, const CallSettings& call,
                                         const ArtifactSnapshot& snapshot,
                                         RunningPriors* priors,
                                         const CallControl& control) {
  std::vector<size_t> rotating;
  std::vector<size_t> rest;
  for (size_t q = 0; q < questions.size(); ++q) {
    (Rotates(questions[q], level, call.adaptive_shifts) ? rotating : rest)
        .push_back(q);
  }
  Grid out(states.size(), std::vector<Decision>(questions.size()));
  // Rotating questions first, each on its own sequential path.
  for (size_t q : rotating) {
    ASSIGN_OR_RETURN(std::vector<Decision> column,
                     ReadRotating(states, questions[q], level, call, snapshot,
                                  priors, control));
    PutColumn(std::move(column), q, &out);
  }
  if (!rest.empty()) {
    ASSIGN_OR_RETURN(Grid decisions,
                     ReadTogether(states, Select(questions, rest), level, call,
                                  snapshot, priors, control));
    PutColumns(std::move(decisions), rest, &out);
  }
  return out;
}

absl::StatusOr<Grid> Decider::ReadTogether(
    const std::vector<std::string>& states,
    const std::vector<Question>& questions, Level level,
    const CallSettings& call, const ArtifactSnapshot& snapshot,
    RunningPriors* priors, const CallControl& control) {
  // 1. Each question as the call lists it: its labels and its shifts.
  std::vector<Listing> listings;
  for (const Question& question : questions) {
    ASSIGN_OR_RETURN(Listing listing,
                     ListingOf(reader_, question, level, call));
    listings.push_back(std::move(listing));
  }
  // 2. Every state under every shift, each distinct prompt once, in one
  //    backend call.
  ASSIGN_OR_RETURN(const auto reads, ReadShifts(reader_, states, listings,
                                                call.return_prompts, control));
  // 3. The content-free priors the call wants; their probes go in a call of
  //    their own, so the states' batches never depend on whether the probes
  //    were cached.
  ASSIGN_OR_RETURN(const auto content_free,
                   ContentFree(listings, level, call, control));
  // 4. Per question: raw; or the batch joined to the running prior first
  //    (so the prior includes the batch itself, from min_prior_n states),
  //    the prior chosen and divided out (L0); then L1's temperature.
  Grid out(states.size(), std::vector<Decision>(questions.size()));
  for (size_t q = 0; q < listings.size(); ++q) {
    const Listing& listing = listings[q];
    std::vector<Decision> decisions;
    if (level == Level::kRaw) {
      for (const ShiftReadout& read : reads[q]) {
        decisions.push_back(RawDecision(read, call.return_details));
      }
    } else {
      const std::optional<Matrix> batch = priors->AddAndPrior(
          listing.key, BatchSum(listing, reads[q]),
          static_cast<int64_t>(reads[q].size()), options_.min_prior_n);
      const PriorChoice choice = ChoosePrior(
          listing,
          level == Level::kL1 ? snapshot.L1(listing.question.key()) : nullptr,
          call.prior, options_);
      const AppliedPrior prior{choice.Pick(batch, content_free[q]),
                               choice.strength, choice.Name()};
      for (const ShiftReadout& read : reads[q]) {
        decisions.push_back(
            L0Decision(read, prior, call.combine, call.return_details));
      }
    }
    ASSIGN_OR_RETURN(decisions,
                     Finish(reader_, std::move(decisions), listing.question,
                            listing.labels, level, snapshot, states));
    PutColumn(std::move(decisions), q, &out);
  }
  return out;
}

absl::StatusOr<std::vector<Decision>> Decider::ReadRotating(
    const std::vector<std::string>& states, const Question& question,
    Level level, const CallSettings& call, const ArtifactSnapshot& snapshot,
    RunningPriors* priors, const CallControl& control) {
  ASSIGN_OR_RETURN(Rotation rotation,
                   StartRotation(states.size(), question, level, call, snapshot,
                                 *priors, control));
  const std::optional<StopCertificate> certified = stops_.Get(question.key());
  const StopRule rule =
      StopRuleFor(call.adaptive_margin, options_.adaptive_stat, certified);
  RETURN_IF_ERROR(rotation.ReadInWaves(reader_, states, rule, call.combine,
                                       options_.adaptive_wave,
                                       options_.adaptive_min_shifts, control));
  rotation.FoldInto(priors);
  return Finish(reader_,
                rotation.Decisions(reader_, states, call.prior, rule,
                                   certified.has_value(), call.combine,
                                   call.return_prompts, call.return_details),
                question, rotation.listing().labels, level, snapshot, states);
}

absl::StatusOr<Rotation> Decider::StartRotation(
    size_t n_states, const Question& question, Level level,
    const CallSettings& call, const ArtifactSnapshot& snapshot,
    const RunningPriors& priors, const CallControl& control) {
  ASSIGN_OR_RETURN(Listing listing, ListingOf(reader_, question, level, call));
  ASSIGN_OR_RETURN(auto content_free,
                   ContentFree({listing}, level, call, control));
  PriorChoice choice = ChoosePrior(
      listing, level == Level::kL1 ? snapshot.L1(question.key()) : nullptr,
      call.prior, options_);
  std::vector<int> order(listing.n_perms());
  if (options_.adaptive_spread_order) {
    order = SpreadOrder(listing.n_perms());
  } else {
    std::iota(order.begin(), order.end(), 0);
  }
  const std::optional<PriorAccumulator> before = priors.Get(listing.key);
  return Rotation(std::move(listing), std::move(order), n_states,
                  std::move(choice), std::move(content_free[0]), before,
                  options_.min_prior_n);
}

absl::StatusOr<Grid> Decider::ReadHeads(const std::vector<std::string>& states,
                                        const std::vector<Question>& questions,
                                        const CallSettings& call,
                                        const ArtifactSnapshot& snapshot,
                                        Seen* seen,
                                        const CallControl& control) {
  Grid out(states.size(), std::vector<Decision>(questions.size()));
  for (size_t q = 0; q < questions.size(); ++q) {
    const Question& question = questions[q];
    const std::optional<RoutedHead> routed = snapshot.Route(question);
    if (!routed.has_value()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no L2 head for ", Describe(question)));
    }
    ASSIGN_OR_RETURN(
        HeadReadout read,
        ReadHead(reader_, artifacts_.adaptation(), options_, question, *routed,
                 states, call.return_prompts, control));
    if (read.seen.has_value()) {
      seen->emplace_back(question.key(), *std::move(read.seen));
    }
    ASSIGN_OR_RETURN(const ResolvedLabels labels, reader_.Labels(question));
    ASSIGN_OR_RETURN(std::vector<Decision> decisions,
                     Finish(reader_, std::move(read.decisions), question,
                            labels, Level::kL2, snapshot, states));
    PutColumn(std::move(decisions), q, &out);
  }
  return out;
}

absl::StatusOr<std::vector<std::optional<Matrix>>> Decider::ContentFree(
    const std::vector<Listing>& listings, Level level, const CallSettings& call,
    const CallControl& control) {
  if (level == Level::kRaw || (call.prior != PriorMode::kContentFree &&
                               !options_.record_content_free)) {
    return std::vector<std::optional<Matrix>>(listings.size());
  }
  return content_free_.For(reader_, listings, control);
}

std::optional<Matrix> Decider::RunningPrior(const Question& question,
                                            const std::string& tenant) const {
  const RunningPriors* running = priors_.Find(tenant);
  if (running == nullptr) return std::nullopt;
  const CallSettings call = CallSettings::Of(options_);
  return running->Prior(
      ListingKey(question, Shifts(question, Level::kL0, call)),
      options_.min_prior_n);
}

}  // namespace mesa_anyjev::decision
