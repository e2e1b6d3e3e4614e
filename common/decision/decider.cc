// The Decider (see decider.h). The control flow follows anyjev 0.2.0's
// Decider._run, _run_adaptive_choice, _run_heads, calibrate, fit_head and
// observe step by step, so that the same calls give the same probabilities;
// comments name the reference step where the order matters.
#include "common/decision/decider.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decision/contextual.h"
#include "common/decision/decider_internal.h"
#include "common/decision/head_fit.h"
#include "common/decision/legacy_random_state.h"
#include "common/decision/py_format.h"
#include "common/status/status_macros.h"
#include "common/util/hash.h"

namespace mesa_anyjev::decision {

using decider_internal::AnswerMass;
using decider_internal::Describe;
using decider_internal::Identity;
using decider_internal::Registry;
using decider_internal::Stack;
using decider_internal::ToVector;

const char* PriorModeName(PriorMode mode) {
  switch (mode) {
    case PriorMode::kBatch:
      return "batch";
    case PriorMode::kContentFree:
      return "content_free";
    case PriorMode::kNone:
      return "none";
  }
  return "?";
}

absl::StatusOr<PriorMode> ParsePriorMode(std::string_view name) {
  for (PriorMode mode :
       {PriorMode::kBatch, PriorMode::kContentFree, PriorMode::kNone}) {
    if (name == PriorModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown prior '", std::string(name),
                   "' (expected batch, content_free or none)"));
}

absl::StatusOr<Combine> ParseCombine(std::string_view name) {
  if (name == "logmean") return Combine::kLogMean;
  if (name == "mean") return Combine::kMean;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown combine '", std::string(name), "' (expected logmean or mean)"));
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

double Decider::Strength(const Effective& eff) const {
  if (options_.prior_strength.has_value()) return *options_.prior_strength;
  switch (eff.prior) {
    case PriorMode::kBatch:
      return 0.75;
    case PriorMode::kContentFree:
      return 1.0;
    case PriorMode::kNone:
      return 0.0;
  }
  return 0.0;
}

absl::StatusOr<ResolvedLabels> Decider::LabelsFor(const Question& question) {
  // Resolved once per (kind, K) per tokenizer, as the reference caches them;
  // custom labels are part of the key.
  const std::string key =
      absl::StrCat(QuestionKindName(question.kind()), "/", question.k(), "/",
                   absl::StrJoin(question.custom_labels(), "\x1f"));
  {
    absl::MutexLock lock(&mu_);
    if (const auto it = labels_.find(key); it != labels_.end()) {
      return it->second;
    }
  }
  auto resolved = ResolveLabels(backend_->tokenizer(), question);
  if (!resolved.ok()) {
    return absl::Status(
        resolved.status().code(),
        absl::StrCat(Describe(question), ": ", resolved.status().message()));
  }
  absl::MutexLock lock(&mu_);
  labels_.emplace(key, *resolved);
  return *resolved;
}

std::vector<std::vector<int>> Decider::Perms(const Question& question,
                                             Level level,
                                             const Effective& eff) const {
  if (level == Level::kRaw || question.ordered()) {
    return {Identity(question.k())};
  }
  if (question.kind() == QuestionKind::kNoul) return {{0, 1}, {1, 0}};
  std::vector<std::vector<int>> shifts =
      CyclicShifts(question.k(), eff.max_permutations);
  if (!eff.canonical_order) return shifts;
  // Rotating a listing sorted by option text makes the prompts a function
  // of the option set: any listing of the same options reads the same.
  const std::vector<int> canon = CanonicalOrder(question.options());
  for (auto& perm : shifts) {
    for (int& i : perm) i = canon[i];
  }
  return shifts;
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
  if (options.require.has_value() && *options.require == Level::kAuto) {
    return absl::InvalidArgumentError(
        "require must be a level (raw, L0, L1, L2), not auto");
  }
  if (options.require.has_value() && level != Level::kAuto &&
      LevelRank(level) < LevelRank(*options.require)) {
    return absl::InvalidArgumentError(
        absl::StrCat("require=", LevelName(*options.require),
                     " is above the requested level ", LevelName(level)));
  }
  Effective eff = Resolve(options);
  for (const Question& question : questions) {
    Snapshot(question, options.exact_heads, &eff);
  }
  std::vector<Level> served;
  for (const Question& question : questions) {
    ASSIGN_OR_RETURN(const Level lv, ServedLevelFor(eff, question, level));
    if (options.require.has_value() &&
        LevelRank(lv) < LevelRank(*options.require)) {
      const auto why = ServedLevelFor(eff, question, *options.require);
      return absl::FailedPreconditionError(absl::StrCat(
          Describe(question), " would be served at ", LevelName(lv),
          ", below require=", LevelName(*options.require), why.ok() ? "" : ": ",
          why.ok() ? "" : why.status().message()));
    }
    RETURN_IF_ERROR(CheckQuestion(question, lv));
    RETURN_IF_ERROR(LabelsFor(question).status());
    served.push_back(lv);
  }
  std::vector<std::vector<Decision>> out(
      states.size(), std::vector<Decision>(questions.size()));
  if (states.empty() || questions.empty()) return out;
  // A call that fails part-way (deadline, cancel, a model error) leaves no
  // trace: its readouts go to staged copies of the running priors and its
  // features to a list, and both join the decider only once every question
  // is answered.
  RunningPriors staged;
  std::map<std::string, std::optional<PriorAccumulator>> before;
  for (size_t q = 0; q < questions.size(); ++q) {
    if (served[q] == Level::kRaw || served[q] == Level::kL2) continue;
    const std::string listing =
        ListingKey(questions[q], Perms(questions[q], served[q], eff));
    if (before.contains(listing)) continue;
    if (options.carried_priors != nullptr) {
      const auto it = options.carried_priors->find(listing);
      before[listing] = it == options.carried_priors->end()
                            ? std::nullopt
                            : std::optional<PriorAccumulator>(it->second);
    } else {
      before[listing] = priors_.Get(listing);
    }
    if (before[listing].has_value()) staged.Merge(listing, *before[listing]);
  }
  // auto: one run per served level, in the reference's order L2, L1, L0.
  for (Level lv : {Level::kL2, Level::kL1, Level::kL0, Level::kRaw}) {
    std::vector<size_t> idx;
    std::vector<Question> group;
    for (size_t q = 0; q < questions.size(); ++q) {
      if (served[q] == lv) {
        idx.push_back(q);
        group.push_back(questions[q]);
      }
    }
    if (group.empty()) continue;
    ASSIGN_OR_RETURN(auto decisions,
                     RunLevel(states, group, lv, eff, &staged, control));
    for (size_t s = 0; s < states.size(); ++s) {
      for (size_t j = 0; j < idx.size(); ++j) {
        out[s][idx[j]] = std::move(decisions[s][j]);
      }
    }
  }
  if (options.carried_priors != nullptr) {
    for (const auto& [listing, base] : before) {
      if (auto after = staged.Get(listing); after.has_value()) {
        (*options.carried_priors)[listing] = *std::move(after);
      }
    }
  } else {
    for (const auto& [listing, base] : before) {
      if (const auto after = staged.Get(listing); after.has_value()) {
        priors_.AddChange(listing, base, *after);
      }
    }
  }
  for (const auto& [key, features] : eff.features) {
    heads_.AddFeatures(key, features);
  }
  return out;
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
    const Question& question = questions[q];
    const bool is_adaptive = eff.adaptive_shifts && level != Level::kRaw &&
                             question.kind() == QuestionKind::kChoice &&
                             !question.ordered() && question.k() >= 3;
    (is_adaptive ? adaptive : rest).push_back(q);
  }
  std::vector<std::vector<Decision>> out(
      states.size(), std::vector<Decision>(questions.size()));
  // Adaptive questions first, each on its own sequential path.
  for (size_t q : adaptive) {
    ASSIGN_OR_RETURN(auto decisions,
                     RunAdaptiveChoice(states, questions[q], level, eff, priors,
                                       control, nullptr));
    for (size_t s = 0; s < states.size(); ++s) {
      out[s][q] = std::move(decisions[s]);
    }
  }
  if (!rest.empty()) {
    std::vector<Question> group;
    for (size_t q : rest) group.push_back(questions[q]);
    ASSIGN_OR_RETURN(auto decisions,
                     RunReadout(states, group, level, eff, priors, control));
    for (size_t s = 0; s < states.size(); ++s) {
      for (size_t j = 0; j < rest.size(); ++j) {
        out[s][rest[j]] = std::move(decisions[s][j]);
      }
    }
  }
  return out;
}

std::string Decider::ListingKey(
    const Question& question,
    const std::vector<std::vector<int>>& perms) const {
  // The reference caches per key only; with per-call shift options the
  // perms are part of what the cached prior means.
  std::vector<std::string> parts;
  for (const auto& perm : perms) parts.push_back(absl::StrJoin(perm, ","));
  return absl::StrCat(question.key(), "|", absl::StrJoin(parts, ";"));
}

absl::StatusOr<Matrix> Decider::ContentFreePriorFor(
    const Question& question, const std::vector<std::vector<int>>& perms,
    const ResolvedLabels& labels, const Effective& /*eff*/,
    const CallControl& control) {
  const std::string cache_key = ListingKey(question, perms);
  {
    absl::MutexLock lock(&mu_);
    if (const auto it = cf_cache_.find(cache_key); it != cf_cache_.end()) {
      return it->second;
    }
  }
  Registry registry;
  std::vector<std::vector<size_t>> rows;
  const text::ChatTemplate& tmpl = backend_->chat_template();
  for (const auto& perm : perms) {
    const auto ids = LabelIdsForPerm(question, labels.ids, perm);
    std::vector<size_t> row;
    for (const std::string& probe : options_.cf_probes) {
      row.push_back(registry.Add(
          RenderPromptParts(tmpl, BuildPrompt(probe, question, perm,
                                              options_.system, labels.labels)),
          ids));
    }
    rows.push_back(std::move(row));
  }
  // The probes go in a call of their own, never batched with real states.
  ASSIGN_OR_RETURN(const auto lps,
                   scorer_.Logprobs(registry.parts(), registry.ids(), control));
  Matrix prior(static_cast<Eigen::Index>(perms.size()), question.k());
  for (size_t p = 0; p < rows.size(); ++p) {
    std::vector<std::vector<double>> probe_probs;
    for (size_t r : rows[p]) probe_probs.push_back(Softmax(lps[r]));
    prior.row(p) = ContentFreePrior(Stack(probe_probs));
  }
  absl::MutexLock lock(&mu_);
  cf_cache_[cache_key] = prior;
  return prior;
}

absl::Status Decider::ApplyL1(const Question& question, const Effective& eff,
                              Decision* decision) const {
  const std::shared_ptr<const TemperatureScaler> scaler =
      ArtifactFor(eff, question.key());
  if (scaler == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("no L1 artifact for ", Describe(question)));
  }
  decision->probs = scaler->Apply(decision->probs);
  decision->level = Level::kL1;
  decision->diagnostics.temperature = scaler->temperature;
  decision->diagnostics.n_calib = scaler->n_calib;
  return absl::OkStatus();
}

void Decider::DecorateDecision(const Question& question,
                               const std::string& state,
                               const ResolvedLabels& labels,
                               const Effective& /*eff*/,
                               Decision* decision) const {
  decision->question_id = question.id();
  decision->question_key = question.key();
  decision->kind = question.kind();
  decision->options = question.options();
  if (question.kind() == QuestionKind::kScore) {
    const std::vector<double> centers = question.BinCenters();
    double value = 0.0;
    for (size_t k = 0; k < centers.size(); ++k) {
      value += decision->probs[k] * centers[k];
    }
    decision->score_value = value;
  }
  const text::ChatParts parts =
      RenderPromptParts(backend_->chat_template(),
                        BuildPrompt(state, question, Identity(question.k()),
                                    options_.system, labels.labels));
  decision->diagnostics.prompt_sha256 =
      util::Sha256Hex(absl::StrCat(parts.prefix, parts.suffix));
}

absl::StatusOr<std::vector<std::vector<Decision>>> Decider::RunReadout(
    const std::vector<std::string>& states,
    const std::vector<Question>& questions, Level level, const Effective& eff,
    RunningPriors* priors, const CallControl& control) {
  const text::ChatTemplate& tmpl = backend_->chat_template();
  const bool want_cf =
      level != Level::kRaw &&
      (eff.prior == PriorMode::kContentFree || options_.record_content_free);
  // 1. Every prompt once; content-free probes in a registry (and a backend
  //    call) of their own, so real states' batches never depend on whether
  //    the probes were cached.
  Registry real;
  Registry probes;
  struct Plan {
    ResolvedLabels labels;
    std::vector<std::vector<int>> perms;
    std::vector<std::vector<size_t>> cf_rows;    // [P][C]
    std::vector<std::vector<size_t>> real_rows;  // [N][P]
  };
  std::vector<Plan> plans;
  for (const Question& question : questions) {
    Plan plan;
    ASSIGN_OR_RETURN(plan.labels, LabelsFor(question));
    plan.perms = Perms(question, level, eff);
    std::vector<std::vector<text::TokenId>> perm_ids;
    for (const auto& perm : plan.perms) {
      perm_ids.push_back(LabelIdsForPerm(question, plan.labels.ids, perm));
    }
    bool cached = false;
    if (want_cf) {
      absl::MutexLock lock(&mu_);
      cached = cf_cache_.contains(ListingKey(question, plan.perms));
    }
    if (want_cf && !cached) {
      for (size_t p = 0; p < plan.perms.size(); ++p) {
        std::vector<size_t> row;
        for (const std::string& probe : options_.cf_probes) {
          row.push_back(probes.Add(
              RenderPromptParts(
                  tmpl, BuildPrompt(probe, question, plan.perms[p],
                                    options_.system, plan.labels.labels)),
              perm_ids[p]));
        }
        plan.cf_rows.push_back(std::move(row));
      }
    }
    for (const std::string& state : states) {
      std::vector<size_t> row;
      for (size_t p = 0; p < plan.perms.size(); ++p) {
        row.push_back(real.Add(
            RenderPromptParts(tmpl,
                              BuildPrompt(state, question, plan.perms[p],
                                          options_.system, plan.labels.labels)),
            perm_ids[p]));
      }
      plan.real_rows.push_back(std::move(row));
    }
    plans.push_back(std::move(plan));
  }
  // 2. Score: real prompts in one pass, probes in another.
  ASSIGN_OR_RETURN(const auto logprobs,
                   scorer_.Logprobs(real.parts(), real.ids(), control));
  std::vector<std::vector<double>> cf_logprobs;
  if (!probes.empty()) {
    ASSIGN_OR_RETURN(cf_logprobs,
                     scorer_.Logprobs(probes.parts(), probes.ids(), control));
  }
  // 3. Per question: readouts by position, priors, decisions.
  std::vector<std::vector<Decision>> out(
      states.size(), std::vector<Decision>(questions.size()));
  for (size_t q = 0; q < questions.size(); ++q) {
    const Question& question = questions[q];
    const Plan& plan = plans[q];
    const Eigen::Index n_perms = static_cast<Eigen::Index>(plan.perms.size());
    std::vector<std::vector<std::vector<double>>> lp_real(states.size());
    std::vector<Matrix> p_pos_raw(states.size());
    for (size_t s = 0; s < states.size(); ++s) {
      std::vector<std::vector<double>> probs;
      for (size_t r : plan.real_rows[s]) {
        lp_real[s].push_back(logprobs[r]);
        probs.push_back(Softmax(logprobs[r]));
      }
      p_pos_raw[s] = Stack(probs);
    }
    std::optional<Matrix> cf_prior;
    if (want_cf) {
      const std::string cache_key = ListingKey(question, plan.perms);
      absl::MutexLock lock(&mu_);
      if (!plan.cf_rows.empty()) {
        Matrix prior(n_perms, question.k());
        for (size_t p = 0; p < plan.cf_rows.size(); ++p) {
          std::vector<std::vector<double>> probe_probs;
          for (size_t r : plan.cf_rows[p]) {
            probe_probs.push_back(Softmax(cf_logprobs[r]));
          }
          prior.row(p) = ContentFreePrior(Stack(probe_probs));
        }
        cf_cache_[cache_key] = std::move(prior);
      }
      cf_prior = cf_cache_.at(cache_key);
    }
    std::optional<Matrix> prior_used;
    std::optional<Matrix> b_prior;
    const std::shared_ptr<const TemperatureScaler> frozen =
        level == Level::kL1 ? ArtifactFor(eff, question.key()) : nullptr;
    const bool frozen_ok = frozen != nullptr && frozen->prior.has_value() &&
                           frozen->prior->rows() == n_perms &&
                           frozen->prior->cols() == question.k();
    if (level != Level::kRaw) {
      // The batch joins the running accumulator first; its prior then
      // includes the batch itself (transductive), from min_prior_n states.
      Matrix batch_sum = Matrix::Zero(n_perms, question.k());
      for (const Matrix& p : p_pos_raw) batch_sum += p;
      b_prior = priors->AddAndPrior(ListingKey(question, plan.perms), batch_sum,
                                    static_cast<int64_t>(states.size()),
                                    options_.min_prior_n);
      if (frozen_ok) {
        prior_used = frozen->prior;
      } else if (eff.prior == PriorMode::kBatch) {
        prior_used = b_prior;
      } else if (eff.prior == PriorMode::kContentFree) {
        prior_used = cf_prior;
      }
    }
    for (size_t s = 0; s < states.size(); ++s) {
      Decision decision;
      DecisionDiagnostics& diag = decision.diagnostics;
      diag.answer_mass = AnswerMass(lp_real[s]);
      diag.perms = plan.perms;
      diag.prompts = static_cast<int>(n_perms);
      diag.raw_probs = Marginalize(p_pos_raw[s].topRows(1), {plan.perms[0]},
                                   Combine::kLogMean);
      if (eff.return_details) diag.p_pos_raw = p_pos_raw[s];
      if (eff.return_prompts) {
        for (size_t r : plan.real_rows[s]) {
          diag.prompt_texts.push_back(real.text(r));
        }
      }
      if (level == Level::kRaw) {
        decision.probs = diag.raw_probs;
        decision.level = Level::kRaw;
      } else {
        const double strength =
            frozen_ok ? frozen->prior_strength : Strength(eff);
        const Matrix p_pos =
            prior_used.has_value()
                ? ApplyContextual(p_pos_raw[s], PowPrior(*prior_used, strength))
                : p_pos_raw[s];
        decision.probs = Marginalize(p_pos, plan.perms, eff.combine);
        decision.level = Level::kL0;
        diag.prior_method =
            frozen_ok
                ? absl::StrCat("frozen:", frozen->prior_method)
                : (prior_used.has_value() ? PriorModeName(eff.prior) : "none");
        diag.prior_strength = prior_used.has_value() ? strength : 0.0;
        diag.prior = prior_used;
        diag.order_flip_raw = FlipRateAcrossPerms(p_pos_raw[s], plan.perms);
        diag.order_flip_l0 = FlipRateAcrossPerms(p_pos, plan.perms);
        diag.l0_probs = decision.probs;
        if (level == Level::kL1) {
          RETURN_IF_ERROR(ApplyL1(question, eff, &decision));
        }
      }
      DecorateDecision(question, states[s], plan.labels, eff, &decision);
      out[s][q] = std::move(decision);
    }
  }
  return out;
}

absl::StatusOr<std::vector<Matrix>> Decider::Features(
    const Question& question, const std::vector<std::string>& states,
    const std::vector<int32_t>& layers,
    const std::vector<std::vector<int>>& perms, const CallControl& control) {
  ASSIGN_OR_RETURN(const ResolvedLabels labels, LabelsFor(question));
  std::vector<text::ChatParts> prompts;
  for (size_t i = 0; i < states.size(); ++i) {
    const std::vector<int> perm =
        perms.empty() ? Identity(question.k()) : perms[i];
    prompts.push_back(
        RenderPromptParts(backend_->chat_template(),
                          BuildPrompt(states[i], question, perm,
                                      options_.system, labels.labels)));
  }
  return scorer_.HiddenStates(prompts, layers, control);
}

}  // namespace mesa_anyjev::decision
