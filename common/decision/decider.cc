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
#include "common/decision/head_fit.h"
#include "common/decision/legacy_random_state.h"
#include "common/decision/py_format.h"
#include "common/status/status_macros.h"
#include "common/util/hash.h"

namespace mesa_anyjev::decision {

struct Decider::Effective {
  PriorMode prior;
  Combine combine;
  bool canonical_order;
  std::optional<int> max_permutations;
  bool adaptive_shifts;
  std::optional<double> adaptive_margin;
  bool return_prompts;
  bool return_details;
};

struct Decider::Observed {
  Question question;
  std::vector<std::string> states;
  std::vector<int> labels;
  int fits = 0;
  int next_fit = 30;
  bool fitting = false;
};

namespace {

using Json = nlohmann::ordered_json;

std::vector<int> Identity(int k) {
  std::vector<int> out(k);
  std::iota(out.begin(), out.end(), 0);
  return out;
}

std::string Describe(const Question& question) {
  return absl::StrCat("question '", question.id(), "' (key ", question.key(),
                      ")");
}

Matrix RowOf(const std::vector<double>& v) {
  Matrix m(1, static_cast<Eigen::Index>(v.size()));
  for (size_t j = 0; j < v.size(); ++j) m(0, j) = v[j];
  return m;
}

std::vector<double> ToVector(const Eigen::Ref<const Eigen::RowVectorXd>& row) {
  return std::vector<double>(row.data(), row.data() + row.size());
}

// Mean over prompts of the label mass sum_j exp(lp[j]).
double AnswerMass(const std::vector<std::vector<double>>& lps) {
  std::vector<double> masses;
  for (const auto& lp : lps) {
    std::vector<double> e;
    for (double x : lp) e.push_back(std::exp(x));
    masses.push_back(PairwiseSum(e));
  }
  return Mean(masses);
}

Matrix Stack(const std::vector<std::vector<double>>& rows) {
  Matrix m(static_cast<Eigen::Index>(rows.size()),
           static_cast<Eigen::Index>(rows.empty() ? 0 : rows[0].size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) m(i, j) = rows[i][j];
  }
  return m;
}

// Deduplicating prompt registry: the reference scores each distinct
// rendered prompt once per call.
class Registry {
 public:
  size_t Add(text::ChatParts parts, std::vector<text::TokenId> ids) {
    std::string whole = absl::StrCat(parts.prefix, parts.suffix);
    const auto [it, inserted] = index_.try_emplace(whole, parts_.size());
    if (inserted) {
      parts_.push_back(std::move(parts));
      ids_.push_back(std::move(ids));
      texts_.push_back(std::move(whole));
    }
    return it->second;
  }
  bool empty() const { return parts_.empty(); }
  const std::vector<text::ChatParts>& parts() const { return parts_; }
  const std::vector<std::vector<text::TokenId>>& ids() const { return ids_; }
  const std::string& text(size_t i) const { return texts_[i]; }

 private:
  absl::flat_hash_map<std::string, size_t> index_;
  std::vector<text::ChatParts> parts_;
  std::vector<std::vector<text::TokenId>> ids_;
  std::vector<std::string> texts_;
};

// The state text of an observation as stored in a file: strings as they
// are, anything else rendered as the reference's render_state would.
std::string StateText(const Json& state) {
  if (state.is_null()) return "";
  if (state.is_string()) return state.get<std::string>();
  if (state.is_array() && !state.empty()) {
    bool chat = true;
    for (const auto& m : state) {
      chat =
          chat && m.is_object() && m.contains("role") && m.contains("content");
    }
    if (chat) {
      std::vector<std::string> lines;
      for (const auto& m : state) {
        const auto field = [](const Json& v) {
          return v.is_string() ? v.get<std::string>() : PyJsonDumpsIndent2(v);
        };
        lines.push_back(
            absl::StrCat(field(m["role"]), ": ", field(m["content"])));
      }
      return absl::StrJoin(lines, "\n");
    }
  }
  return PyJsonDumpsIndent2(state);
}

}  // namespace

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
                                           Level requested) const {
  const Capabilities& caps = backend_->capabilities();
  switch (requested) {
    case Level::kRaw:
    case Level::kL0:
      return requested;
    case Level::kL1:
      if (Artifact(question.key()) == nullptr) {
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
      if (!heads_.Route(question).has_value()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "L2 needs a head for ", Describe(question),
            "; no head was fit on this key, a rewording of it or (random "
            "listing) its option set (fit one with Fit at level L2, or load "
            "a heads file)"));
      }
      return Level::kL2;
    case Level::kAuto: {
      if (caps.hidden_states) {
        const auto routed = heads_.Route(question);
        if (routed.has_value() &&
            (routed->exact || options_.auto_routes_reworded)) {
          return Level::kL2;
        }
      }
      return Artifact(question.key()) != nullptr ? Level::kL1 : Level::kL0;
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
  std::vector<Level> served;
  for (const Question& question : questions) {
    ASSIGN_OR_RETURN(const Level lv, ServedLevel(question, level));
    if (options.require.has_value() &&
        LevelRank(lv) < LevelRank(*options.require)) {
      const auto why = ServedLevel(question, *options.require);
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
  const Effective eff = Resolve(options);
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
                     RunLevel(states, group, lv, eff, &priors_, control));
    for (size_t s = 0; s < states.size(); ++s) {
      for (size_t j = 0; j < idx.size(); ++j) {
        out[s][idx[j]] = std::move(decisions[s][j]);
      }
    }
  }
  return out;
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

std::string Decider::CfCacheKey(
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
  const std::string cache_key = CfCacheKey(question, perms);
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
      cached = cf_cache_.contains(CfCacheKey(question, plan.perms));
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
      const std::string cache_key = CfCacheKey(question, plan.perms);
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
        level == Level::kL1 ? Artifact(question.key()) : nullptr;
    const bool frozen_ok = frozen != nullptr && frozen->prior.has_value() &&
                           frozen->prior->rows() == n_perms &&
                           frozen->prior->cols() == question.k();
    if (level != Level::kRaw) {
      // The batch joins the running accumulator first; its prior then
      // includes the batch itself (transductive), from min_prior_n states.
      Matrix batch_sum = Matrix::Zero(n_perms, question.k());
      for (const Matrix& p : p_pos_raw) batch_sum += p;
      b_prior = priors->AddAndPrior(question.key(), batch_sum,
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
          const std::shared_ptr<const TemperatureScaler> scaler =
              Artifact(question.key());
          if (scaler == nullptr) {
            return absl::FailedPreconditionError(
                absl::StrCat("no L1 artifact for ", Describe(question)));
          }
          decision.probs = scaler->Apply(decision.probs);
          decision.level = Level::kL1;
          diag.temperature = scaler->temperature;
          diag.n_calib = scaler->n_calib;
        }
      }
      DecorateDecision(question, states[s], plan.labels, eff, &decision);
      out[s][q] = std::move(decision);
    }
  }
  return out;
}

std::pair<std::optional<double>, StopStat> Decider::StopRule(
    const Question& question, const Effective& eff) const {
  if (eff.adaptive_margin.has_value()) {
    return {eff.adaptive_margin, options_.adaptive_stat};
  }
  {
    absl::MutexLock lock(&mu_);
    if (const auto it = stop_.find(question.key());
        it != stop_.end() && it->second.threshold.has_value()) {
      return {it->second.threshold, StopStat::kLogit};
    }
  }
  if (options_.adaptive_stat == StopStat::kProb) {
    return {kDefaultProbMargin, StopStat::kProb};
  }
  return {kDefaultLogMargin, StopStat::kLogit};
}

absl::StatusOr<std::vector<Decision>> Decider::RunAdaptiveChoice(
    const std::vector<std::string>& states, const Question& question,
    Level level, const Effective& eff, RunningPriors* priors,
    const CallControl& control,
    std::vector<std::vector<std::pair<double, int>>>* record) {
  const text::ChatTemplate& tmpl = backend_->chat_template();
  ASSIGN_OR_RETURN(const ResolvedLabels labels, LabelsFor(question));
  const std::vector<std::vector<int>> perms = Perms(question, level, eff);
  const int n_perms = static_cast<int>(perms.size());
  const int k = question.k();
  const size_t n = states.size();
  const bool want_cf =
      level != Level::kRaw &&
      (eff.prior == PriorMode::kContentFree || options_.record_content_free);
  std::optional<Matrix> cf_prior;
  if (want_cf) {
    ASSIGN_OR_RETURN(
        cf_prior, ContentFreePriorFor(question, perms, labels, eff, control));
  }
  std::vector<std::vector<std::vector<double>>> lp_rows(n);
  std::vector<std::vector<std::vector<double>>> p_rows(n);
  std::vector<std::vector<int>> used(n);
  // The running accumulator as it stood when the call began.
  Matrix sums = Matrix::Zero(n_perms, k);
  int64_t counts = 0;
  if (const auto acc = priors->Get(question.key());
      acc.has_value() && acc->sum.rows() == n_perms && acc->sum.cols() == k) {
    sums = acc->sum;
    counts = acc->n;
  }
  Matrix shift_sum = Matrix::Zero(n_perms, k);
  std::vector<int64_t> shift_n(n_perms, 0);
  std::vector<size_t> active(n);
  std::iota(active.begin(), active.end(), 0);

  const std::shared_ptr<const TemperatureScaler> frozen =
      level == Level::kL1 ? Artifact(question.key()) : nullptr;
  const bool frozen_ok = frozen != nullptr && frozen->prior.has_value() &&
                         frozen->prior->rows() == n_perms &&
                         frozen->prior->cols() == k;
  const auto prior_for = [&](int sidx) -> std::optional<Eigen::RowVectorXd> {
    if (frozen_ok) return Eigen::RowVectorXd(frozen->prior->row(sidx));
    if (eff.prior == PriorMode::kContentFree) {
      return Eigen::RowVectorXd(cf_prior->row(sidx));
    }
    if (eff.prior != PriorMode::kBatch) return std::nullopt;
    const int64_t m = counts + shift_n[sidx];
    if (m >= options_.min_prior_n) {
      Matrix mean =
          (sums.row(sidx) + shift_sum.row(sidx)) / static_cast<double>(m);
      return Eigen::RowVectorXd(BatchPrior(mean).row(0));
    }
    // Later shifts see only the hard items: fall back to the pooled
    // position profile.
    const int64_t pooled_n =
        counts * n_perms +
        std::accumulate(shift_n.begin(), shift_n.end(), int64_t{0});
    if (pooled_n >= options_.min_prior_n) {
      Eigen::RowVectorXd total = Eigen::RowVectorXd::Zero(k);
      for (int r = 0; r < n_perms; ++r) total += sums.row(r);
      Eigen::RowVectorXd total_shift = Eigen::RowVectorXd::Zero(k);
      for (int r = 0; r < n_perms; ++r) total_shift += shift_sum.row(r);
      Matrix mean = (total + total_shift) / static_cast<double>(pooled_n);
      return Eigen::RowVectorXd(BatchPrior(mean).row(0));
    }
    return std::nullopt;
  };
  const double strength = frozen_ok ? frozen->prior_strength : Strength(eff);
  const auto corrected = [&](size_t si) {
    Matrix rows(static_cast<Eigen::Index>(used[si].size()), k);
    for (size_t j = 0; j < used[si].size(); ++j) {
      const auto prior = prior_for(used[si][j]);
      const Matrix p = RowOf(p_rows[si][j]);
      if (prior.has_value()) {
        rows.row(j) = ApplyContextual(p, PowPrior(*prior, strength)).row(0);
      } else {
        rows.row(j) = p.row(0);
      }
    }
    return rows;
  };
  const auto used_perms = [&](size_t si) {
    std::vector<std::vector<int>> out;
    for (int sidx : used[si]) out.push_back(perms[sidx]);
    return out;
  };

  std::vector<int> order(n_perms);
  if (options_.adaptive_spread_order) {
    order = SpreadOrder(n_perms);
  } else {
    std::iota(order.begin(), order.end(), 0);
  }
  auto [threshold, stat] = StopRule(question, eff);
  int wave = std::max(1, options_.adaptive_wave);
  std::vector<std::vector<std::pair<double, int>>> trace(n);
  if (record != nullptr) {
    // Calibration reads every shift one at a time and decides offline.
    threshold.reset();
    wave = 1;
  }
  const auto decided = [&](size_t si) {
    const Matrix pc = corrected(si);
    const std::vector<double> marg =
        Marginalize(pc, used_perms(si), eff.combine);
    if (record != nullptr) {
      trace[si].emplace_back(LogMargin(marg), ArgMax(marg));
      return false;
    }
    if (stat == StopStat::kLogit) return LogMargin(marg) >= *threshold;
    std::set<int> winners;
    for (size_t j = 0; j < used[si].size(); ++j) {
      winners.insert(perms[used[si][j]][ArgMax(&pc(j, 0), k)]);
    }
    std::vector<double> top = marg;
    std::sort(top.begin(), top.end(), std::greater<>());
    return winners.size() == 1 && top[0] - top[1] >= *threshold;
  };

  for (int start = 0; start < n_perms; start += wave) {
    const std::vector<int> batch(
        order.begin() + start, order.begin() + std::min(n_perms, start + wave));
    if (start > 0 &&
        (start >= options_.adaptive_min_shifts || record != nullptr)) {
      std::vector<size_t> still;
      for (size_t si : active) {
        if (!decided(si)) still.push_back(si);
      }
      active = std::move(still);
    }
    if (active.empty()) break;
    // One backend call per wave.
    Registry registry;
    std::vector<std::pair<size_t, int>> who;
    std::vector<size_t> rows;
    for (int r : batch) {
      const auto ids = LabelIdsForPerm(question, labels.ids, perms[r]);
      for (size_t si : active) {
        rows.push_back(
            registry.Add(RenderPromptParts(
                             tmpl, BuildPrompt(states[si], question, perms[r],
                                               options_.system, labels.labels)),
                         ids));
        who.emplace_back(si, r);
      }
    }
    ASSIGN_OR_RETURN(const auto lps, scorer_.Logprobs(registry.parts(),
                                                      registry.ids(), control));
    for (size_t i = 0; i < who.size(); ++i) {
      const auto [si, r] = who[i];
      const std::vector<double>& lp = lps[rows[i]];
      const std::vector<double> p = Softmax(lp);
      lp_rows[si].push_back(lp);
      p_rows[si].push_back(p);
      used[si].push_back(r);
      for (int j = 0; j < k; ++j) shift_sum(r, j) += p[j];
      ++shift_n[r];
    }
  }
  if (record != nullptr) {
    for (size_t si = 0; si < n; ++si) {
      decided(si);  // the margin after the final shift
      record->push_back(trace[si]);
    }
  }
  // Fold the call into the running accumulator: shift 0 (which every state
  // read) sets the count; the other shifts' partial sums are rescaled to it.
  Matrix delta = shift_sum;
  for (int r = 0; r < n_perms; ++r) {
    delta.row(r) *= static_cast<double>(shift_n[0]) /
                    static_cast<double>(std::max<int64_t>(shift_n[r], 1));
  }
  priors->Add(question.key(), delta, shift_n[0]);

  std::vector<Decision> out;
  for (size_t si = 0; si < n; ++si) {
    Decision decision;
    DecisionDiagnostics& diag = decision.diagnostics;
    const Matrix p_pos_raw = Stack(p_rows[si]);
    const auto perms_read = used_perms(si);
    const Matrix pc = corrected(si);
    decision.probs = Marginalize(pc, perms_read, eff.combine);
    decision.level = Level::kL0;
    diag.answer_mass = AnswerMass(lp_rows[si]);
    diag.raw_probs =
        Marginalize(p_pos_raw.topRows(1), {perms_read[0]}, Combine::kLogMean);
    diag.perms = perms_read;
    diag.prompts = static_cast<int>(perms_read.size());
    if (eff.return_details) diag.p_pos_raw = p_pos_raw;
    diag.adaptive = true;
    diag.stop_threshold = threshold;
    diag.stop_stat = stat == StopStat::kLogit ? "logit" : "prob";
    {
      absl::MutexLock lock(&mu_);
      diag.stop_calibrated = stop_.contains(question.key());
    }
    const auto first_prior = prior_for(used[si][0]);
    // The reference names the configured prior here, even when a frozen L1
    // prior is in use.
    diag.prior_method =
        first_prior.has_value() ? PriorModeName(eff.prior) : "none";
    diag.prior_strength = first_prior.has_value() ? strength : 0.0;
    if (first_prior.has_value()) {
      Matrix prior(static_cast<Eigen::Index>(used[si].size()), k);
      for (size_t j = 0; j < used[si].size(); ++j) {
        prior.row(j) = *prior_for(used[si][j]);
      }
      diag.prior = std::move(prior);
    }
    diag.order_flip_raw = FlipRateAcrossPerms(p_pos_raw, perms_read);
    diag.order_flip_l0 = FlipRateAcrossPerms(pc, perms_read);
    diag.l0_probs = decision.probs;
    if (eff.return_prompts) {
      for (int r : used[si]) {
        const text::ChatParts parts = RenderPromptParts(
            tmpl, BuildPrompt(states[si], question, perms[r], options_.system,
                              labels.labels));
        diag.prompt_texts.push_back(absl::StrCat(parts.prefix, parts.suffix));
      }
    }
    if (level == Level::kL1) {
      const std::shared_ptr<const TemperatureScaler> scaler =
          Artifact(question.key());
      if (scaler == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("no L1 artifact for ", Describe(question)));
      }
      decision.probs = scaler->Apply(decision.probs);
      decision.level = Level::kL1;
      diag.temperature = scaler->temperature;
      diag.n_calib = scaler->n_calib;
    }
    DecorateDecision(question, states[si], labels, eff, &decision);
    out.push_back(std::move(decision));
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

absl::StatusOr<std::vector<std::vector<Decision>>> Decider::RunHeads(
    const std::vector<std::string>& states,
    const std::vector<Question>& questions, const Effective& eff,
    const CallControl& control) {
  const Capabilities& caps = backend_->capabilities();
  const int n_blocks = caps.n_layers;
  std::vector<std::vector<Decision>> out(
      states.size(), std::vector<Decision>(questions.size()));
  for (size_t q = 0; q < questions.size(); ++q) {
    const Question& question = questions[q];
    const std::optional<RoutedHead> routed = heads_.Route(question);
    if (!routed.has_value()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no L2 head for ", Describe(question)));
    }
    const HeadEntry& entry = *routed->entry;
    const int layer = entry.layer_abs;
    ASSIGN_OR_RETURN(const std::vector<Matrix> features,
                     Features(question, states, {layer}, {}, control));
    const Matrix& feats = features[0];
    LinearHead adapted_head;
    const LinearHead* head = &entry.head;
    bool adapted = false;
    int64_t n_seen = 0;
    if (options_.adapt == AdaptMode::kAlways ||
        (options_.adapt == AdaptMode::kRouted && !routed->exact)) {
      // Label-free adaptation: the standardiser re-estimated from every
      // state this key was asked on, this batch included.
      const AdaptationStats stats = heads_.AddFeatures(question.key(), feats);
      n_seen = stats.n;
      if (n_seen >= options_.adapt_min_n &&
          static_cast<Eigen::Index>(stats.sum.size()) ==
              entry.head.mean.size()) {
        adapted_head = entry.head;
        const double nn = static_cast<double>(stats.n);
        for (Eigen::Index j = 0; j < adapted_head.mean.size(); ++j) {
          const double mean = stats.sum[j] / nn;
          adapted_head.mean(j) = mean;
          adapted_head.scale(j) =
              std::sqrt(std::max(stats.sumsq[j] / nn - mean * mean, 0.0)) +
              1e-6;
        }
        head = &adapted_head;
        adapted = true;
      }
    }
    Matrix probs = head->Probs(feats);
    if (!routed->index_map.empty()) {
      Matrix mapped(probs.rows(), question.k());
      for (int i = 0; i < question.k(); ++i) {
        mapped.col(i) = probs.col(routed->index_map[i]);
      }
      probs = std::move(mapped);
    }
    ASSIGN_OR_RETURN(const ResolvedLabels labels, LabelsFor(question));
    for (size_t s = 0; s < states.size(); ++s) {
      Decision decision;
      decision.level = Level::kL2;
      decision.probs = ToVector(probs.row(static_cast<Eigen::Index>(s)));
      DecisionDiagnostics& diag = decision.diagnostics;
      diag.readout = absl::StrCat("head:", head->kind);
      diag.exit_layer = layer;
      diag.blocks_executed = layer;
      diag.n_blocks = n_blocks;
      diag.early_stop = caps.early_stop;
      diag.temperature = head->temperature;
      diag.n_calib = head->n_calib;
      diag.listing = head->params.value("listing", std::string("canonical"));
      diag.routed_from = routed->exact ? "" : entry.question_id;
      diag.reordered = !routed->index_map.empty();
      diag.adapted = adapted;
      diag.adapt_n = static_cast<int>(n_seen);
      diag.head_version = entry.version;
      diag.perms = {Identity(question.k())};
      diag.prompts = 1;
      if (eff.return_prompts) {
        const text::ChatParts parts = RenderPromptParts(
            backend_->chat_template(),
            BuildPrompt(states[s], question, Identity(question.k()),
                        options_.system, labels.labels));
        diag.prompt_texts.push_back(absl::StrCat(parts.prefix, parts.suffix));
      }
      DecorateDecision(question, states[s], labels, eff, &decision);
      out[s][q] = std::move(decision);
    }
  }
  return out;
}

absl::StatusOr<nlohmann::ordered_json> Decider::Calibrate(
    const Question& question, const std::vector<std::string>& states,
    const std::vector<int>& labels, const CallControl& control) {
  if (states.empty()) {
    return absl::InvalidArgumentError("calibration needs labelled states");
  }
  if (labels.size() != states.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("one label per state: ", labels.size(), " labels for ",
                     states.size(), " states"));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= question.k()) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels[", i, "]: ", labels[i],
                       " is not an option index in [0, ", question.k(), ")"));
    }
  }
  RETURN_IF_ERROR(CheckQuestion(question, Level::kL0));
  RETURN_IF_ERROR(LabelsFor(question).status());
  // The prior comes from the calibration set alone, in an accumulator of
  // its own, so the artifact is a function of (model, question, set); the
  // calibration sums join the running prior afterwards.
  RunningPriors isolated;
  const Effective eff = Resolve({});
  ASSIGN_OR_RETURN(auto decisions, RunLevel(states, {question}, Level::kL0, eff,
                                            &isolated, control));
  if (const auto acc = isolated.Get(question.key()); acc.has_value()) {
    priors_.Merge(question.key(), *acc);
  }
  Matrix probs(static_cast<Eigen::Index>(states.size()), question.k());
  for (size_t s = 0; s < states.size(); ++s) {
    for (int j = 0; j < question.k(); ++j) {
      probs(static_cast<Eigen::Index>(s), j) = decisions[s][0].probs[j];
    }
  }
  auto scaler = std::make_shared<TemperatureScaler>(
      TemperatureScaler::Fit(probs, labels));
  const DecisionDiagnostics& first = decisions[0][0].diagnostics;
  scaler->prior = first.prior;
  scaler->prior_method =
      first.prior_method.empty() ? "none" : first.prior_method;
  scaler->prior_strength = first.prior_strength;
  scaler->n_calib = static_cast<int>(states.size());
  {
    absl::MutexLock lock(&mu_);
    if (!artifacts_.contains(question.key())) {
      artifact_order_.push_back(question.key());
    }
    artifacts_[question.key()] = scaler;
  }
  Json out;
  out["model"] = model_name();
  out["question"] = question.key();
  const Json body = scaler->ToJson();
  for (const auto& [key, value] : body.items()) out[key] = value;
  return out;
}

std::shared_ptr<const HeadEntry> Decider::Finish(const std::string& key,
                                                 HeadEntry entry) const {
  entry.version.clear();
  entry.version =
      util::Sha256Hex(HeadArtifact(key, entry).dump()).substr(0, 16);
  return std::make_shared<const HeadEntry>(std::move(entry));
}

nlohmann::ordered_json Decider::HeadArtifact(const std::string& key,
                                             const HeadEntry& entry) const {
  Json out;
  out["model"] = model_name();
  out["question"] = key;
  out["question_id"] = entry.question_id;
  out["kind"] = entry.kind.has_value() ? Json(QuestionKindName(*entry.kind))
                                       : Json(nullptr);
  out["text"] = entry.text.has_value() ? Json(*entry.text) : Json(nullptr);
  out["options"] =
      entry.options.has_value() ? Json(*entry.options) : Json(nullptr);
  out["layer_abs"] = entry.layer_abs;
  out["n_blocks"] = backend_->capabilities().n_layers;
  out["hidden_size"] = entry.head.w.rows();
  const Json body = entry.head.ToJson();
  for (const auto& [k, v] : body.items()) out[k] = v;
  return out;
}

absl::StatusOr<nlohmann::ordered_json> Decider::FitHead(
    const Question& question, const std::vector<std::string>& states,
    const std::vector<int>& labels, const FitHeadOptions& options,
    const CallControl& control) {
  const Capabilities& caps = backend_->capabilities();
  if (!caps.hidden_states) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", backend_->identity().name,
                     "' exposes no hidden states; L2 needs them"));
  }
  std::string listing = options.listing;
  if (listing != "auto" && listing != "random" && listing != "canonical") {
    return absl::InvalidArgumentError(absl::StrCat(
        "listing '", listing, "' (expected auto, random or canonical)"));
  }
  if (listing == "auto") {
    listing = question.k() <= 8 ? "random" : "canonical";
  }
  const int n_blocks = caps.n_layers;
  std::vector<int> candidates;
  if (options.layers.empty()) {
    candidates = DefaultCandidateBlocks(n_blocks);
  } else {
    std::set<int> resolved;
    for (size_t i = 0; i < options.layers.size(); ++i) {
      const int layer = options.layers[i];
      const int abs = layer < 0 ? n_blocks + 1 + layer : layer;
      if (abs < 0 || abs > n_blocks) {
        return absl::InvalidArgumentError(
            absl::StrCat("layers[", i, "]: ", layer, " is outside [",
                         -(n_blocks + 1), ", ", n_blocks, "]"));
      }
      resolved.insert(abs);
    }
    candidates.assign(resolved.begin(), resolved.end());
  }
  if (labels.size() != states.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("one label per state: ", labels.size(), " labels for ",
                     states.size(), " states"));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= question.k()) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels[", i, "]: ", labels[i],
                       " is not an option index in [0, ", question.k(), ")"));
    }
  }
  if (static_cast<int>(labels.size()) < std::max(8, 2 * question.k())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no head could be fit for ", Describe(question),
        ": need at least max(8, 2K) = ", std::max(8, 2 * question.k()),
        " labels, got ", labels.size()));
  }
  RETURN_IF_ERROR(LabelsFor(question).status());
  std::vector<std::vector<int>> perms;
  if (listing == "random" && !question.ordered() && question.k() > 1) {
    LegacyRandomState rng(options.seed);
    for (size_t i = 0; i < states.size(); ++i) {
      perms.push_back(rng.Permutation(question.k()));
    }
  }
  const std::vector<int32_t> layers(candidates.begin(), candidates.end());
  ASSIGN_OR_RETURN(const std::vector<Matrix> feats,
                   Features(question, states, layers, perms, control));
  std::optional<LinearHead> best;
  for (const std::string& kind : options.kinds) {
    auto head = decision::FitHead(feats, labels, question.k(), kind,
                                  options.n_folds, options.seed);
    if (!head.ok()) {
      if (absl::IsInvalidArgument(head.status()) ||
          absl::IsFailedPrecondition(head.status())) {
        continue;
      }
      return head.status();
    }
    if (!best.has_value() ||
        head->cv["oof_nll"].get<double>() < best->cv["oof_nll"].get<double>()) {
      best = *std::move(head);
    }
  }
  if (!best.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no head could be fit for ", Describe(question),
        ": need at least max(8, 2K) labels and a solvable system"));
  }
  best->params["listing"] = perms.empty() ? "canonical" : listing;
  HeadEntry entry;
  entry.layer_abs = candidates[best->layer];
  entry.head = *std::move(best);
  entry.question_id = question.id();
  entry.kind = question.kind();
  entry.text = question.text();
  entry.options = question.options();
  const std::shared_ptr<const HeadEntry> stored =
      Finish(question.key(), std::move(entry));
  heads_.Put(question.key(), stored);
  return HeadArtifact(question.key(), *stored);
}

absl::StatusOr<std::optional<nlohmann::ordered_json>> Decider::Observe(
    const Question& question, const std::string& state, int label,
    const ObserveOptions& options, const CallControl& control) {
  if (label < 0 || label >= question.k()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label ", label, " is not an option index in [0, ", question.k(), ")"));
  }
  std::shared_ptr<Observed> record;
  std::vector<std::string> states;
  std::vector<int> labels;
  {
    absl::MutexLock lock(&mu_);
    auto& slot = observed_[question.key()];
    if (slot == nullptr) {
      slot = std::make_shared<Observed>(
          Observed{question,
                   {},
                   {},
                   0,
                   std::max({options.fit_at, 8, 2 * question.k()}),
                   false});
      observed_order_.push_back(question.key());
    }
    record = slot;
    record->states.push_back(state);
    record->labels.push_back(label);
    // One fit at a time per question; observations that arrive meanwhile
    // wait for the next threshold.
    if (static_cast<int>(record->labels.size()) < record->next_fit ||
        record->fitting) {
      return std::nullopt;
    }
    record->fitting = true;
    states = record->states;
    labels = record->labels;
  }
  auto artifact =
      FitHead(record->question, states, labels, options.fit, control);
  absl::MutexLock lock(&mu_);
  record->fitting = false;
  if (!artifact.ok()) return artifact.status();
  record->fits += 1;
  record->next_fit =
      std::max(record->next_fit + 1,
               static_cast<int>(PyRound(static_cast<double>(labels.size()) *
                                        options.refit_factor)));
  return std::optional<nlohmann::ordered_json>(*std::move(artifact));
}

absl::StatusOr<StopCertificate> Decider::CalibrateAdaptive(
    const Question& question, const std::vector<std::string>& states,
    std::optional<double> target, double delta, Level level,
    const CallControl& control) {
  if (question.kind() != QuestionKind::kChoice || question.ordered() ||
      question.k() < 3) {
    return absl::InvalidArgumentError(
        "adaptive shifts only apply to unordered choice questions with K >= 3");
  }
  if (states.empty()) {
    return absl::InvalidArgumentError("calibrate_adaptive needs states");
  }
  if (level != Level::kL0 && level != Level::kL1 && level != Level::kRaw) {
    return absl::InvalidArgumentError("calibrate_adaptive reads raw, L0 or L1");
  }
  RETURN_IF_ERROR(ServedLevel(question, level).status());
  const Effective eff = Resolve({});
  std::vector<std::vector<std::pair<double, int>>> record;
  RETURN_IF_ERROR(RunAdaptiveChoice(states, question, level, eff, &priors_,
                                    control, &record)
                      .status());
  std::vector<std::vector<double>> margins;
  std::vector<std::vector<int>> winners;
  for (const auto& trace : record) {
    std::vector<double> m;
    std::vector<int> w;
    for (const auto& [margin, winner] : trace) {
      m.push_back(margin);
      w.push_back(winner);
    }
    margins.push_back(std::move(m));
    winners.push_back(std::move(w));
  }
  const StopCertificate cert = ChooseThreshold(
      margins, winners, target.value_or(options_.adaptive_target),
      options_.adaptive_min_shifts, delta);
  absl::MutexLock lock(&mu_);
  stop_[question.key()] = cert;
  return cert;
}

absl::Status Decider::LoadArtifact(const Question& question,
                                   const nlohmann::ordered_json& artifact) {
  if (!artifact.is_object()) {
    return absl::InvalidArgumentError("an artifact must be a JSON object");
  }
  if (artifact.contains("model") && !artifact["model"].is_null() &&
      artifact["model"] != model_name()) {
    return absl::FailedPreconditionError(
        absl::StrCat("artifact was fit on ", artifact["model"].dump(),
                     ", the model is '", model_name(), "'"));
  }
  const bool other_layout = artifact.contains("question") &&
                            !artifact["question"].is_null() &&
                            artifact["question"] != question.key();
  const std::string method = artifact.value("method", std::string());
  if (method.rfind("head:", 0) == 0) {
    if (other_layout) {
      return absl::FailedPreconditionError(
          absl::StrCat("head artifact was fit on a different question layout (",
                       artifact["question"].dump(), " != ", question.key(),
                       "); fit a head for this one"));
    }
    ASSIGN_OR_RETURN(LinearHead head, LinearHead::FromJson(artifact));
    if (!artifact.contains("layer_abs") || !artifact["layer_abs"].is_number()) {
      return absl::InvalidArgumentError("head artifact: no \"layer_abs\"");
    }
    HeadEntry entry;
    entry.layer_abs = artifact["layer_abs"].get<int>();
    entry.head = std::move(head);
    entry.question_id =
        artifact.contains("question_id") && artifact["question_id"].is_string()
            ? artifact["question_id"].get<std::string>()
            : question.id();
    entry.kind = question.kind();
    entry.text = question.text();
    entry.options = question.options();
    heads_.Put(question.key(), Finish(question.key(), std::move(entry)));
    return absl::OkStatus();
  }
  if (artifact.contains("prior") && !artifact["prior"].is_null() &&
      other_layout) {
    // The frozen prior is indexed by (shift, position) of the layout it was
    // fit on; temperature-only artifacts load anywhere.
    return absl::FailedPreconditionError(absl::StrCat(
        "artifact carries a prior fit on a different question layout (",
        artifact["question"].dump(), " != ", question.key(),
        "); calibrate this layout"));
  }
  const std::string family =
      method.empty() ? "temperature" : method.substr(0, method.find(':'));
  if (family != "temperature") {
    return absl::InvalidArgumentError(absl::StrCat(
        "artifact method '", method, "' has no loader (known: temperature)"));
  }
  ASSIGN_OR_RETURN(TemperatureScaler scaler,
                   TemperatureScaler::FromJson(artifact));
  absl::MutexLock lock(&mu_);
  if (!artifacts_.contains(question.key())) {
    artifact_order_.push_back(question.key());
  }
  artifacts_[question.key()] =
      std::make_shared<const TemperatureScaler>(std::move(scaler));
  return absl::OkStatus();
}

absl::StatusOr<int> Decider::LoadArtifacts(const nlohmann::ordered_json& file) {
  if (!file.is_object()) {
    return absl::InvalidArgumentError("an artifacts file is a JSON object");
  }
  if (file.contains("model") && !file["model"].is_null() &&
      file["model"] != model_name()) {
    return absl::FailedPreconditionError(
        absl::StrCat("artifacts were fit on ", file["model"].dump(),
                     ", the model is '", model_name(), "'"));
  }
  // Parse everything first: a file is loaded whole or not at all.
  std::vector<std::pair<std::string, std::shared_ptr<const TemperatureScaler>>>
      artifacts;
  std::vector<std::pair<std::string, std::shared_ptr<const HeadEntry>>> heads;
  std::vector<std::pair<std::string, AdaptationStats>> adaptation;
  struct LoadedObservations {
    std::string key;
    std::optional<Question> question;
    std::vector<std::string> states;
    std::vector<int> labels;
    std::optional<int> fits;
    std::optional<int> next_fit;
  };
  std::vector<LoadedObservations> observations;
  try {
    if (file.contains("artifacts") && file["artifacts"].is_object()) {
      for (const auto& [key, art] : file["artifacts"].items()) {
        const std::string method =
            art.is_object() ? art.value("method", std::string("temperature"))
                            : std::string();
        const std::string family = method.substr(0, method.find(':'));
        if (family != "temperature" && !method.empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("artifacts.", key, ": method '", method,
                           "' has no loader (known: temperature)"));
        }
        auto scaler = TemperatureScaler::FromJson(art);
        if (!scaler.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("artifacts.", key, ": ", scaler.status().message()));
        }
        artifacts.emplace_back(
            key, std::make_shared<const TemperatureScaler>(*std::move(scaler)));
      }
    }
    if (file.contains("heads") && file["heads"].is_object()) {
      for (const auto& [key, art] : file["heads"].items()) {
        auto head = LinearHead::FromJson(art);
        if (!head.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("heads.", key, ": ", head.status().message()));
        }
        if (!art.contains("layer_abs") || !art["layer_abs"].is_number()) {
          return absl::InvalidArgumentError(
              absl::StrCat("heads.", key, ": no \"layer_abs\""));
        }
        HeadEntry entry;
        entry.head = *std::move(head);
        entry.layer_abs = art["layer_abs"].get<int>();
        entry.question_id =
            art.contains("question_id") && art["question_id"].is_string()
                ? art["question_id"].get<std::string>()
                : key;
        if (art.contains("kind") && art["kind"].is_string()) {
          auto kind = ParseQuestionKind(art["kind"].get<std::string>());
          if (kind.ok()) entry.kind = *kind;
        }
        if (art.contains("text") && art["text"].is_string()) {
          entry.text = art["text"].get<std::string>();
        }
        if (art.contains("options") && art["options"].is_array()) {
          entry.options = art["options"].get<std::vector<std::string>>();
        }
        heads.emplace_back(key, Finish(key, std::move(entry)));
      }
    }
    if (file.contains("adaptation") && file["adaptation"].is_object()) {
      for (const auto& [key, st] : file["adaptation"].items()) {
        auto sum = DecodeArray(st["sum"]);
        auto sumsq = DecodeArray(st["sumsq"]);
        if (!sum.ok() || !sumsq.ok() ||
            sum->values.size() != sumsq->values.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("adaptation.", key, ": malformed sum or sumsq"));
        }
        adaptation.emplace_back(key, AdaptationStats{sum->values, sumsq->values,
                                                     st["n"].get<int64_t>()});
      }
    }
    if (file.contains("observations") && file["observations"].is_object()) {
      for (const auto& [key, r] : file["observations"].items()) {
        LoadedObservations loaded;
        loaded.key = key;
        const std::string kind_name =
            r.contains("kind") && r["kind"].is_string()
                ? r["kind"].get<std::string>()
                : "";
        const auto kind = ParseQuestionKind(kind_name);
        if (kind.ok() && r.contains("options") && r["options"].is_array() &&
            !r["options"].empty()) {
          loaded.question = Question::FromStored(
              *kind, r.value("text", std::string()),
              r["options"].get<std::vector<std::string>>(),
              r.contains("question_id") && r["question_id"].is_string()
                  ? r["question_id"].get<std::string>()
                  : "");
        }
        if (r.contains("states")) {
          for (const auto& s : r["states"])
            loaded.states.push_back(StateText(s));
        }
        if (r.contains("labels")) {
          for (const auto& l : r["labels"])
            loaded.labels.push_back(l.get<int>());
        }
        if (r.contains("fits")) loaded.fits = r["fits"].get<int>();
        if (r.contains("next_fit")) loaded.next_fit = r["next_fit"].get<int>();
        observations.push_back(std::move(loaded));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifacts file: malformed: ", e.what()));
  }
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, scaler] : artifacts) {
      if (!artifacts_.contains(key)) artifact_order_.push_back(key);
      artifacts_[key] = std::move(scaler);
    }
    for (LoadedObservations& loaded : observations) {
      auto it = observed_.find(loaded.key);
      if (it == observed_.end()) {
        if (!loaded.question.has_value()) continue;
        it = observed_
                 .emplace(loaded.key,
                          std::make_shared<Observed>(
                              Observed{*loaded.question, {}, {}, 0, 30, false}))
                 .first;
        observed_order_.push_back(loaded.key);
      }
      Observed& rec = *it->second;
      rec.states.insert(rec.states.end(), loaded.states.begin(),
                        loaded.states.end());
      rec.labels.insert(rec.labels.end(), loaded.labels.begin(),
                        loaded.labels.end());
      if (loaded.fits.has_value()) rec.fits = *loaded.fits;
      if (loaded.next_fit.has_value()) rec.next_fit = *loaded.next_fit;
    }
  }
  for (auto& [key, entry] : heads) heads_.Put(key, std::move(entry));
  for (auto& [key, stats] : adaptation) {
    heads_.SetAdaptation(key, std::move(stats));
  }
  return static_cast<int>(artifacts.size() + heads.size());
}

nlohmann::ordered_json Decider::ExportArtifacts(
    bool include_observations) const {
  Json out;
  out["model"] = model_name();
  Json artifacts = Json::object();
  Json observations = Json::object();
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& key : artifact_order_) {
      Json art;
      art["model"] = model_name();
      art["question"] = key;
      const Json body = artifacts_.at(key)->ToJson();
      for (const auto& [k, v] : body.items()) art[k] = v;
      artifacts[key] = std::move(art);
    }
    if (include_observations) {
      for (const std::string& key : observed_order_) {
        const Observed& rec = *observed_.at(key);
        Json r;
        r["question_id"] = rec.question.id();
        r["kind"] = QuestionKindName(rec.question.kind());
        r["text"] = rec.question.text();
        r["options"] = rec.question.options();
        r["states"] = rec.states;
        r["labels"] = rec.labels;
        r["fits"] = rec.fits;
        r["next_fit"] = rec.next_fit;
        observations[key] = std::move(r);
      }
    }
  }
  out["artifacts"] = std::move(artifacts);
  Json heads = Json::object();
  for (const auto& [key, entry] : heads_.All()) {
    heads[key] = HeadArtifact(key, *entry);
  }
  out["heads"] = std::move(heads);
  Json adaptation = Json::object();
  for (const auto& [key, stats] : heads_.Adaptations()) {
    if (stats.n <= 0) continue;
    const std::vector<int64_t> shape = {static_cast<int64_t>(stats.sum.size())};
    Json st;
    st["sum"] = EncodeArray(stats.sum, shape);
    st["sumsq"] = EncodeArray(stats.sumsq, shape);
    st["n"] = stats.n;
    adaptation[key] = std::move(st);
  }
  if (!adaptation.empty()) out["adaptation"] = std::move(adaptation);
  if (!observations.empty()) out["observations"] = std::move(observations);
  return out;
}

}  // namespace mesa_anyjev::decision
