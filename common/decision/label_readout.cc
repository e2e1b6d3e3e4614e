// raw, L0 and L1 decisions from label log-probs (see label_readout.h).
#include "common/decision/label_readout.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/decision/contextual.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {

namespace {

Matrix Stack(const std::vector<std::vector<double>>& rows) {
  Matrix m(static_cast<Eigen::Index>(rows.size()),
           static_cast<Eigen::Index>(rows.empty() ? 0 : rows[0].size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) m(i, j) = rows[i][j];
  }
  return m;
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

// `state` (index `s`) under each shift of `listing` into `prompts`, the
// shifts' label ids in `ids`: its rows, by shift.
std::vector<size_t> AddPrompts(
    const PromptReader& reader, const std::string& state, size_t s,
    const Listing& listing, const std::vector<std::vector<text::TokenId>>& ids,
    PromptRegistry* prompts) {
  std::vector<size_t> row;
  for (int p = 0; p < listing.n_perms(); ++p) {
    row.push_back(prompts->Add(reader.Render(state, listing.question,
                                             listing.perms[p], listing.labels),
                               ids[p], static_cast<int>(s)));
  }
  return row;
}

}  // namespace

void ShiftReadout::Add(const std::vector<int>& perm,
                       const std::vector<double>& lp) {
  perms.push_back(perm);
  logprobs.push_back(lp);
  probs.push_back(Softmax(lp));
}

Matrix ShiftReadout::p_pos_raw() const { return Stack(probs); }

absl::StatusOr<std::vector<std::vector<ShiftReadout>>> ReadShifts(
    const PromptReader& reader, const std::vector<std::string>& states,
    const std::vector<Listing>& listings, bool keep_prompts,
    const CallControl& control) {
  // rows[q][s][p] is the prompt of state s under shift p of listing q. They
  // go in state by state: a call cut at max_prompts_per_call then keeps a
  // state's questions together, so its prefix is computed once.
  std::vector<std::vector<std::vector<text::TokenId>>> ids;
  for (const Listing& listing : listings) {
    std::vector<std::vector<text::TokenId>> per_shift;
    for (const auto& perm : listing.perms) {
      per_shift.push_back(
          LabelIdsForPerm(listing.question, listing.labels.ids, perm));
    }
    ids.push_back(std::move(per_shift));
  }
  PromptRegistry prompts;
  std::vector<std::vector<std::vector<size_t>>> rows(
      listings.size(), std::vector<std::vector<size_t>>(states.size()));
  for (size_t s = 0; s < states.size(); ++s) {
    for (size_t q = 0; q < listings.size(); ++q) {
      rows[q][s] =
          AddPrompts(reader, states[s], s, listings[q], ids[q], &prompts);
    }
  }
  ASSIGN_OR_RETURN(const auto logprobs, reader.Logprobs(prompts, control));
  std::vector<std::vector<ShiftReadout>> out;
  for (size_t q = 0; q < listings.size(); ++q) {
    const Listing& listing = listings[q];
    std::vector<ShiftReadout> reads(states.size());
    for (size_t s = 0; s < states.size(); ++s) {
      for (int p = 0; p < listing.n_perms(); ++p) {
        const size_t row = rows[q][s][p];
        reads[s].Add(listing.perms[p], logprobs[row]);
        if (keep_prompts) reads[s].prompts.push_back(prompts.text(row));
      }
    }
    out.push_back(std::move(reads));
  }
  return out;
}

Matrix BatchSum(const Listing& listing,
                const std::vector<ShiftReadout>& reads) {
  Matrix sum = Matrix::Zero(listing.n_perms(), listing.question.k());
  for (const ShiftReadout& read : reads) sum += read.p_pos_raw();
  return sum;
}

std::optional<Matrix> PriorChoice::Pick(
    const std::optional<Matrix>& batch,
    const std::optional<Matrix>& content_free) const {
  if (frozen != nullptr) return frozen->prior;
  switch (mode) {
    case PriorMode::kBatch:
      return batch;
    case PriorMode::kContentFree:
      return content_free;
    case PriorMode::kNone:
      return std::nullopt;
  }
  return std::nullopt;
}

std::string PriorChoice::Name() const {
  return frozen != nullptr ? absl::StrCat("frozen:", frozen->prior_method)
                           : PriorModeName(mode);
}

PriorChoice ChoosePrior(const Listing& listing,
                        std::shared_ptr<const TemperatureScaler> l1,
                        PriorMode mode, const DeciderOptions& options) {
  if (l1 != nullptr && l1->prior.has_value() &&
      l1->prior->rows() == listing.n_perms() &&
      l1->prior->cols() == listing.question.k()) {
    const double strength = l1->prior_strength;
    return {mode, std::move(l1), strength};
  }
  // The exponent on the prior: the decider's, else 0.75 for batch and 1 for
  // content_free.
  double strength = 0.0;
  if (options.prior_strength.has_value()) {
    strength = *options.prior_strength;
  } else if (mode == PriorMode::kBatch) {
    strength = 0.75;
  } else if (mode == PriorMode::kContentFree) {
    strength = 1.0;
  }
  return {mode, nullptr, strength};
}

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

Decision WithTemperature(const TemperatureScaler& l1, Decision decision) {
  decision.probs = l1.Apply(decision.probs);
  decision.level = Level::kL1;
  decision.diagnostics.temperature = l1.temperature;
  decision.diagnostics.n_calib = l1.n_calib;
  return decision;
}

}  // namespace mesa_anyjev::decision
