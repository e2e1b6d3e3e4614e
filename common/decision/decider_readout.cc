// The Decider's label readouts (decision-method.md 4-6; anyjev 0.2.0's
// Decider._run): raw, L0 and L1 for every question of a call at once. Each
// distinct prompt is scored once, in one backend call; the content-free
// probes go in a call of their own; then, per question, the batch joins the
// running prior, the prior is chosen, and each state's readout becomes a
// decision. The rotation budget (decider_adaptive.cc) reads shifts in waves
// and builds its decisions from the same pieces.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decision/contextual.h"
#include "common/decision/decider.h"
#include "common/decision/decider_internal.h"
#include "common/status/status_macros.h"
#include "common/util/hash.h"

namespace mesa_anyjev::decision {

using decider_internal::AppliedPrior;
using decider_internal::Describe;
using decider_internal::Identity;
using decider_internal::L0Decision;
using decider_internal::RawDecision;
using decider_internal::Registry;
using decider_internal::ShiftReadout;
using decider_internal::Stack;

absl::StatusOr<std::vector<std::vector<Decision>>> Decider::RunReadout(
    const std::vector<std::string>& states,
    const std::vector<Question>& questions, Level level, const Effective& eff,
    RunningPriors* priors, const CallControl& control) {
  // 1. Every question under each of its shifts over every state, each
  //    distinct prompt once, in one call: rows[q][s][p] is the prompt of
  //    state s under shift p.
  std::vector<Listing> listings;
  Registry prompts;
  std::vector<std::vector<std::vector<size_t>>> rows;
  for (const Question& question : questions) {
    ASSIGN_OR_RETURN(Listing listing, ListingFor(question, level, eff));
    rows.push_back(AddPrompts(states, listing, &prompts));
    listings.push_back(std::move(listing));
  }
  ASSIGN_OR_RETURN(const auto logprobs, Score(prompts, control));
  // 2. The content-free priors the call wants; their probes are scored in a
  //    call of their own, so the states' batches never depend on whether
  //    the probes were cached.
  ASSIGN_OR_RETURN(const auto content_free,
                   ContentFreePriors(listings, level, eff, control));
  // 3. Per question: each state's readout, then its decisions.
  std::vector<std::vector<Decision>> out(
      states.size(), std::vector<Decision>(questions.size()));
  for (size_t q = 0; q < listings.size(); ++q) {
    const Listing& listing = listings[q];
    std::vector<ShiftReadout> reads(states.size());
    for (size_t s = 0; s < states.size(); ++s) {
      for (int p = 0; p < listing.n_perms(); ++p) {
        const size_t row = rows[q][s][p];
        reads[s].Add(listing.perms[p], logprobs[row]);
        if (eff.return_prompts) reads[s].prompts.push_back(prompts.text(row));
      }
    }
    ASSIGN_OR_RETURN(
        std::vector<Decision> decisions,
        ReadoutDecisions(listing, reads, level, eff, content_free[q], priors));
    for (size_t s = 0; s < states.size(); ++s) {
      out[s][q] = Decorate(std::move(decisions[s]), listing.question, states[s],
                           listing.labels);
    }
  }
  return out;
}

absl::StatusOr<std::vector<Decision>> Decider::ReadoutDecisions(
    const Listing& listing, const std::vector<ShiftReadout>& reads, Level level,
    const Effective& eff, const std::optional<Matrix>& content_free,
    RunningPriors* priors) const {
  std::vector<Decision> out;
  if (level == Level::kRaw) {
    for (const ShiftReadout& read : reads) {
      out.push_back(RawDecision(read, eff.return_details));
    }
    return out;
  }
  // The batch joins the running accumulator first; its prior then includes
  // the batch itself (transductive), from min_prior_n states.
  Matrix batch_sum = Matrix::Zero(listing.n_perms(), listing.question.k());
  for (const ShiftReadout& read : reads) batch_sum += read.p_pos_raw();
  const std::optional<Matrix> batch = priors->AddAndPrior(
      listing.key, batch_sum, static_cast<int64_t>(reads.size()),
      options_.min_prior_n);
  const PriorChoice choice = ChoosePrior(listing, level, eff);
  const AppliedPrior prior{choice.Pick(batch, content_free), choice.strength,
                           choice.Name()};
  for (const ShiftReadout& read : reads) {
    Decision decision =
        L0Decision(read, prior, eff.combine, eff.return_details);
    if (level == Level::kL1) {
      ASSIGN_OR_RETURN(decision,
                       ApplyL1(listing.question, eff, std::move(decision)));
    }
    out.push_back(std::move(decision));
  }
  return out;
}

absl::StatusOr<Decider::Listing> Decider::ListingFor(const Question& question,
                                                     Level level,
                                                     const Effective& eff) {
  Listing listing{question, {}, Perms(question, level, eff), ""};
  ASSIGN_OR_RETURN(listing.labels, LabelsFor(question));
  listing.key = ListingKey(question, listing.perms);
  return listing;
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

std::string Decider::ListingKey(
    const Question& question,
    const std::vector<std::vector<int>>& perms) const {
  // The reference caches per key only; with per-call shift options the
  // perms are part of what the cached prior means.
  std::vector<std::string> parts;
  for (const auto& perm : perms) parts.push_back(absl::StrJoin(perm, ","));
  return absl::StrCat(question.key(), "|", absl::StrJoin(parts, ";"));
}

std::vector<std::vector<size_t>> Decider::AddPrompts(
    const std::vector<std::string>& states, const Listing& listing,
    Registry* prompts) const {
  std::vector<std::vector<text::TokenId>> ids;
  for (const auto& perm : listing.perms) {
    ids.push_back(LabelIdsForPerm(listing.question, listing.labels.ids, perm));
  }
  std::vector<std::vector<size_t>> rows;
  for (size_t s = 0; s < states.size(); ++s) {
    std::vector<size_t> row;
    for (int p = 0; p < listing.n_perms(); ++p) {
      row.push_back(prompts->Add(
          Render(states[s], listing.question, listing.perms[p], listing.labels),
          ids[p], static_cast<int>(s)));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

text::ChatParts Decider::Render(const std::string& state,
                                const Question& question,
                                const std::vector<int>& perm,
                                const ResolvedLabels& labels) const {
  return RenderPromptParts(
      backend_->chat_template(),
      BuildPrompt(state, question, perm, options_.system, labels.labels));
}

absl::StatusOr<std::vector<std::vector<double>>> Decider::Score(
    const Registry& prompts, const CallControl& control) const {
  return scorer_.Logprobs(prompts.parts(), prompts.ids(), control,
                          prompts.owners());
}

bool Decider::WantsContentFree(Level level, const Effective& eff) const {
  return level != Level::kRaw &&
         (eff.prior == PriorMode::kContentFree || options_.record_content_free);
}

absl::StatusOr<std::vector<std::optional<Matrix>>> Decider::ContentFreePriors(
    const std::vector<Listing>& listings, Level level, const Effective& eff,
    const CallControl& control) {
  std::vector<std::optional<Matrix>> out(listings.size());
  if (!WantsContentFree(level, eff)) return out;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < listings.size(); ++i) {
      const auto it = cf_cache_.find(listings[i].key);
      if (it != cf_cache_.end()) out[i] = it->second;
    }
  }
  // Every probe of every listing not cached, in one call: rows[i][p][c] is
  // probe c under shift p of listing i.
  Registry probes;
  std::vector<std::vector<std::vector<size_t>>> rows(listings.size());
  for (size_t i = 0; i < listings.size(); ++i) {
    if (!out[i].has_value()) rows[i] = AddProbes(listings[i], &probes);
  }
  if (probes.empty()) return out;
  ASSIGN_OR_RETURN(const auto logprobs, Score(probes, control));
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < listings.size(); ++i) {
    if (out[i].has_value()) continue;
    Matrix prior(listings[i].n_perms(), listings[i].question.k());
    for (int p = 0; p < listings[i].n_perms(); ++p) {
      std::vector<std::vector<double>> probe_probs;
      for (size_t row : rows[i][p])
        probe_probs.push_back(Softmax(logprobs[row]));
      prior.row(p) = ContentFreePrior(Stack(probe_probs));
    }
    cf_cache_[listings[i].key] = prior;
    out[i] = std::move(prior);
  }
  return out;
}

std::vector<std::vector<size_t>> Decider::AddProbes(const Listing& listing,
                                                    Registry* probes) const {
  std::vector<std::vector<size_t>> rows;
  for (const auto& perm : listing.perms) {
    const auto ids =
        LabelIdsForPerm(listing.question, listing.labels.ids, perm);
    std::vector<size_t> row;
    for (const std::string& probe : options_.cf_probes) {
      row.push_back(probes->Add(
          Render(probe, listing.question, perm, listing.labels), ids));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Decider::PriorChoice Decider::ChoosePrior(const Listing& listing, Level level,
                                          const Effective& eff) const {
  const std::shared_ptr<const TemperatureScaler> frozen =
      level == Level::kL1 ? ArtifactFor(eff, listing.question.key()) : nullptr;
  if (frozen != nullptr && frozen->prior.has_value() &&
      frozen->prior->rows() == listing.n_perms() &&
      frozen->prior->cols() == listing.question.k()) {
    return {eff.prior, frozen, frozen->prior_strength};
  }
  return {eff.prior, nullptr, Strength(eff)};
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

absl::StatusOr<Decision> Decider::ApplyL1(const Question& question,
                                          const Effective& eff,
                                          Decision decision) const {
  const std::shared_ptr<const TemperatureScaler> scaler =
      ArtifactFor(eff, question.key());
  if (scaler == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("no L1 artifact for ", Describe(question)));
  }
  decision.probs = scaler->Apply(decision.probs);
  decision.level = Level::kL1;
  decision.diagnostics.temperature = scaler->temperature;
  decision.diagnostics.n_calib = scaler->n_calib;
  return decision;
}

Decision Decider::Decorate(Decision decision, const Question& question,
                           const std::string& state,
                           const ResolvedLabels& labels) const {
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
  const text::ChatParts parts =
      Render(state, question, Identity(question.k()), labels);
  decision.diagnostics.prompt_sha256 =
      util::Sha256Hex(absl::StrCat(parts.prefix, parts.suffix));
  return decision;
}

namespace decider_internal {

Matrix Corrected(const Matrix& p_pos_raw, const std::optional<Matrix>& prior,
                 double strength) {
  if (!prior.has_value()) return p_pos_raw;
  return ApplyContextual(p_pos_raw, PowPrior(*prior, strength));
}

Matrix RowsOf(const Matrix& m, const std::vector<int>& index) {
  Matrix out(static_cast<Eigen::Index>(index.size()), m.cols());
  for (size_t j = 0; j < index.size(); ++j) out.row(j) = m.row(index[j]);
  return out;
}

Decision RawDecision(const ShiftReadout& read, bool details) {
  Decision decision;
  DecisionDiagnostics& diag = decision.diagnostics;
  const Matrix p_pos_raw = read.p_pos_raw();
  diag.answer_mass = AnswerMass(read.logprobs);
  diag.perms = read.perms;
  diag.prompts = static_cast<int>(read.perms.size());
  diag.raw_probs =
      Marginalize(p_pos_raw.topRows(1), {read.perms[0]}, Combine::kLogMean);
  if (details) diag.p_pos_raw = p_pos_raw;
  diag.prompt_texts = read.prompts;
  decision.probs = diag.raw_probs;
  decision.level = Level::kRaw;
  return decision;
}

Decision L0Decision(const ShiftReadout& read, const AppliedPrior& prior,
                    Combine combine, bool details) {
  Decision decision = RawDecision(read, details);
  DecisionDiagnostics& diag = decision.diagnostics;
  const Matrix p_pos_raw = read.p_pos_raw();
  const Matrix p_pos = Corrected(p_pos_raw, prior.rows, prior.strength);
  decision.probs = Marginalize(p_pos, read.perms, combine);
  decision.level = Level::kL0;
  diag.prior_method = prior.rows.has_value() ? prior.method : "none";
  diag.prior_strength = prior.rows.has_value() ? prior.strength : 0.0;
  diag.prior = prior.rows;
  diag.order_flip_raw = FlipRateAcrossPerms(p_pos_raw, read.perms);
  diag.order_flip_l0 = FlipRateAcrossPerms(p_pos, read.perms);
  diag.l0_probs = decision.probs;
  return decision;
}

}  // namespace decider_internal
}  // namespace mesa_anyjev::decision
