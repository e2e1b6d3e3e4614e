// Content-free priors, read once per listing (see content_free_priors.h).
#include "common/decision/content_free_priors.h"

#include <utility>

#include "common/decision/contextual.h"
#include "common/decision/prompt_registry.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::decision {

namespace {

// Every probe under each shift of `listing` into `prompts`: [shift][probe]
// rows.
std::vector<std::vector<size_t>> AddProbes(
    const PromptReader& reader, const std::vector<std::string>& probes,
    const Listing& listing, PromptRegistry* prompts) {
  std::vector<std::vector<size_t>> rows;
  for (const auto& perm : listing.perms) {
    const auto ids =
        LabelIdsForPerm(listing.question, listing.labels.ids, perm);
    std::vector<size_t> row;
    for (const std::string& probe : probes) {
      row.push_back(prompts->Add(
          reader.Render(probe, listing.question, perm, listing.labels), ids));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

absl::StatusOr<std::vector<std::optional<Matrix>>> ContentFreePriors::For(
    const PromptReader& reader, const std::vector<Listing>& listings,
    const CallControl& control) {
  std::vector<std::optional<Matrix>> out(listings.size());
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < listings.size(); ++i) {
      const auto it = cache_.find(listings[i].key);
      if (it != cache_.end()) out[i] = it->second;
    }
  }
  // rows[i][p][c] is probe c under shift p of listing i.
  PromptRegistry probes;
  std::vector<std::vector<std::vector<size_t>>> rows(listings.size());
  for (size_t i = 0; i < listings.size(); ++i) {
    if (!out[i].has_value()) {
      rows[i] = AddProbes(reader, probes_, listings[i], &probes);
    }
  }
  if (probes.empty()) return out;
  ASSIGN_OR_RETURN(const auto logprobs, reader.Logprobs(probes, control));
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < listings.size(); ++i) {
    if (out[i].has_value()) continue;
    Matrix prior(listings[i].n_perms(), listings[i].question.k());
    for (int p = 0; p < listings[i].n_perms(); ++p) {
      Matrix probe_probs(static_cast<Eigen::Index>(rows[i][p].size()),
                         listings[i].question.k());
      for (size_t c = 0; c < rows[i][p].size(); ++c) {
        const std::vector<double> probs = Softmax(logprobs[rows[i][p][c]]);
        for (size_t j = 0; j < probs.size(); ++j) probe_probs(c, j) = probs[j];
      }
      prior.row(p) = ContentFreePrior(probe_probs);
    }
    cache_[listings[i].key] = prior;
    out[i] = std::move(prior);
  }
  return out;
}

}  // namespace mesa_anyjev::decision
