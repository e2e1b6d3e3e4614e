// The Decider (see decider.h): its settings, what a question can be served
// at, and Decide, which runs each served level over its questions (L2 in
// decider_heads.cc, the label readouts in decider_readout.cc, the rotation
// budget in decider_adaptive.cc). The control flow follows anyjev 0.2.0's
// Decider._run, _run_adaptive_choice, _run_heads, calibrate, fit_head and
// observe step by step, so that the same calls give the same probabilities;
// comments name the reference step where the order matters.
#include "common/decision/decider.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/decision/decider_internal.h"
#include "common/status/status_macros.h"
#include "common/util/enum_names.h"

namespace mesa_anyjev::decision {

using decider_internal::Describe;

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

// Whether a question takes the rotation budget: an unordered choice with
// K >= 3 above raw, when the call asks for it.
bool Rotates(const Question& question, Level level, bool adaptive_shifts) {
  return adaptive_shifts && level != Level::kRaw &&
         question.kind() == QuestionKind::kChoice && !question.ordered() &&
         question.k() >= 3;
}

constexpr util::EnumName<PriorMode> kPriorModeNames[] = {
    {PriorMode::kBatch, "batch"},
    {PriorMode::kContentFree, "content_free"},
    {PriorMode::kNone, "none"}};
static_assert(util::NamesEvery(kPriorModeNames, PriorMode::kNone));

constexpr util::EnumName<Combine> kCombineNames[] = {
    {Combine::kLogMean, "logmean"}, {Combine::kMean, "mean"}};
static_assert(util::NamesEvery(kCombineNames, Combine::kMean));

}  // namespace

const char* PriorModeName(PriorMode mode) {
  return util::NameIn(kPriorModeNames, mode);
}

absl::StatusOr<PriorMode> ParsePriorMode(std::string_view name) {
  if (auto mode = util::ValueIn(kPriorModeNames, name)) return *mode;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown prior '", std::string(name), "' (expected ",
                   util::NamesIn(kPriorModeNames), ")"));
}

absl::StatusOr<Combine> ParseCombine(std::string_view name) {
  if (auto combine = util::ValueIn(kCombineNames, name)) return *combine;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown combine '", std::string(name), "' (expected ",
                   util::NamesIn(kCombineNames), ")"));
}

Decider::Decider(Backend* backend, DeciderOptions options)
    : backend_(backend),
      options_(std::move(options)),
      scorer_(backend, options_.max_prompts_per_call) {}

Decider::Effective Decider::Resolve(const DecideOptions& call) const {
  Effective eff;
  eff.prior = call.prior.value_or(options_.prior);
  eff.combine = call.combine.value_or(options_.combine);
  eff.canonical_order = call.canonical_order.value_or(options_.canonical_order);
  eff.max_permutations = call.max_permutations.has_value()
                             ? call.max_permutations
                             : options_.max_permutations;
  eff.adaptive_shifts = call.adaptive_shifts.value_or(options_.adaptive_shifts);
  eff.adaptive_margin = call.adaptive_margin.has_value()
                            ? call.adaptive_margin
                            : options_.adaptive_margin;
  eff.return_prompts = call.return_prompts;
  eff.return_details = call.return_details;
  return eff;
}

std::shared_ptr<const TemperatureScaler> Decider::Artifact(
    const std::string& key) const {
  absl::MutexLock lock(&mu_);
  const auto it = artifacts_.find(key);
  return it == artifacts_.end() ? nullptr : it->second;
}

bool Decider::HasArtifact(const std::string& key) const {
  return Artifact(key) != nullptr;
}

absl::StatusOr<Level> Decider::ServedLevel(const Question& question,
                                           Level requested,
                                           const DecideOptions& options) const {
  Effective eff = Resolve(options);
  Snapshot(question, options.exact_heads, &eff);
  return ServedLevelFor(eff, question, requested);
}

void Decider::Snapshot(const Question& question, bool exact_heads,
                       Effective* eff) const {
  eff->artifacts.emplace(question.key(), Artifact(question.key()));
  std::optional<RoutedHead> route = heads_.Route(question);
  if (exact_heads && route.has_value() && !route->exact) route.reset();
  eff->routes.emplace(question.key(), std::move(route));
}

std::shared_ptr<const TemperatureScaler> Decider::ArtifactFor(
    const Effective& eff, const std::string& key) const {
  const auto it = eff.artifacts.find(key);
  return it != eff.artifacts.end() ? it->second : Artifact(key);
}

std::optional<RoutedHead> Decider::RouteFor(const Effective& eff,
                                            const Question& question) const {
  const auto it = eff.routes.find(question.key());
  return it != eff.routes.end() ? it->second : heads_.Route(question);
}

absl::StatusOr<Level> Decider::ServedLevelFor(const Effective& eff,
                                              const Question& question,
                                              Level requested) const {
  const Capabilities& caps = backend_->capabilities();
  switch (requested) {
    case Level::kRaw:
    case Level::kL0:
      return requested;
    case Level::kL1:
      if (ArtifactFor(eff, question.key()) == nullptr) {
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
      if (!RouteFor(eff, question).has_value()) {
        if (heads_.Route(question).has_value()) {
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
        const auto routed = RouteFor(eff, question);
        if (routed.has_value() &&
            (routed->exact || options_.auto_routes_reworded)) {
          return Level::kL2;
        }
      }
      return ArtifactFor(eff, question.key()) != nullptr ? Level::kL1
                                                         : Level::kL0;
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

absl::StatusOr<std::vector<std::vector<Decision>>> Decider::Decide(
    const std::vector<std::string>& states,
    const std::vector<Question>& questions, Level level,
    const DecideOptions& options, const CallControl& control) {
  RETURN_IF_ERROR(CheckRequire(level, options.require));
  Effective eff = Resolve(options);
  for (const Question& question : questions) {
    Snapshot(question, options.exact_heads, &eff);
  }
  ASSIGN_OR_RETURN(const std::vector<Level> served,
                   ServeLevels(questions, level, options.require, eff));
  Grid out(states.size(), std::vector<Decision>(questions.size()));
  if (states.empty() || questions.empty()) return out;
  // A call that fails part-way (deadline, cancel, a model error) leaves no
  // trace: its readouts go to staged copies of the running priors and its
  // features to a list, and both join the decider only once every question
  // is answered.
  const PriorsSeen before =
      PriorsBefore(questions, served, eff, options.carried_priors);
  RunningPriors staged;
  for (const auto& [listing, accumulator] : before) {
    if (accumulator.has_value()) staged.Merge(listing, *accumulator);
  }
  // auto: one run per served level, in the reference's order L2, L1, L0.
  for (Level lv : {Level::kL2, Level::kL1, Level::kL0, Level::kRaw}) {
    const std::vector<size_t> index = ServedAt(served, lv);
    if (index.empty()) continue;
    ASSIGN_OR_RETURN(Grid decisions, RunLevel(states, Select(questions, index),
                                              lv, eff, &staged, control));
    PutColumns(std::move(decisions), index, &out);
  }
  KeepPriors(before, staged, options.carried_priors);
  for (const auto& [key, features] : eff.features) {
    heads_.AddFeatures(key, features);
  }
  return out;
}

absl::StatusOr<std::vector<Level>> Decider::ServeLevels(
    const std::vector<Question>& questions, Level level,
    const std::optional<Level>& require, const Effective& eff) {
  std::vector<Level> served;
  for (const Question& question : questions) {
    ASSIGN_OR_RETURN(const Level lv, ServedLevelFor(eff, question, level));
    if (require.has_value() && LevelRank(lv) < LevelRank(*require)) {
      const auto why = ServedLevelFor(eff, question, *require);
      return absl::FailedPreconditionError(absl::StrCat(
          Describe(question), " would be served at ", LevelName(lv),
          ", below require=", LevelName(*require), why.ok() ? "" : ": ",
          why.ok() ? "" : why.status().message()));
    }
    RETURN_IF_ERROR(CheckQuestion(question, lv));
    RETURN_IF_ERROR(LabelsFor(question).status());
    served.push_back(lv);
  }
  return served;
}

Decider::PriorsSeen Decider::PriorsBefore(
    const std::vector<Question>& questions, const std::vector<Level>& served,
    const Effective& eff, const PriorTable* carried) const {
  PriorsSeen before;
  for (size_t q = 0; q < questions.size(); ++q) {
    if (served[q] == Level::kRaw || served[q] == Level::kL2) continue;
    const std::string listing =
        ListingKey(questions[q], Perms(questions[q], served[q], eff));
    if (before.contains(listing)) continue;
    if (carried == nullptr) {
      before[listing] = priors_.Get(listing);
    } else if (const auto it = carried->find(listing); it != carried->end()) {
      before[listing] = it->second;
    } else {
      before[listing] = std::nullopt;
    }
  }
  return before;
}

void Decider::KeepPriors(const PriorsSeen& before, const RunningPriors& staged,
                         PriorTable* carried) {
  for (const auto& [listing, base] : before) {
    std::optional<PriorAccumulator> after = staged.Get(listing);
    if (!after.has_value()) continue;
    if (carried != nullptr) {
      (*carried)[listing] = *std::move(after);
    } else {
      priors_.AddChange(listing, base, *after);
    }
  }
}

std::optional<Matrix> Decider::RunningPrior(const Question& question) const {
  const Effective eff = Resolve({});
  return priors_.Prior(ListingKey(question, Perms(question, Level::kL0, eff)),
                       options_.min_prior_n);
}

absl::StatusOr<std::vector<std::vector<Decision>>> Decider::RunLevel(
    const std::vector<std::string>& states,
    const std::vector<Question>& questions, Level level, const Effective& eff,
    RunningPriors* priors, const CallControl& control) {
  if (level == Level::kL2) return RunHeads(states, questions, eff, control);
  std::vector<size_t> adaptive;
  std::vector<size_t> rest;
  for (size_t q = 0; q < questions.size(); ++q) {
    (Rotates(questions[q], level, eff.adaptive_shifts) ? adaptive : rest)
        .push_back(q);
  }
  Grid out(states.size(), std::vector<Decision>(questions.size()));
  // Adaptive questions first, each on its own sequential path.
  for (size_t q : adaptive) {
    ASSIGN_OR_RETURN(
        std::vector<Decision> column,
        RunAdaptiveChoice(states, questions[q], level, eff, priors, control));
    for (size_t s = 0; s < states.size(); ++s) {
      out[s][q] = std::move(column[s]);
    }
  }
  if (!rest.empty()) {
    ASSIGN_OR_RETURN(Grid decisions, RunReadout(states, Select(questions, rest),
                                                level, eff, priors, control));
    PutColumns(std::move(decisions), rest, &out);
  }
  return out;
}

}  // namespace mesa_anyjev::decision
