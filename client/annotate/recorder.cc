#include "client/annotate/recorder.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "common/text/json_null.h"

namespace mesa_anyjev::annotate {
namespace {

using text::OrNull;

// The sidecar's option rows: a choice with probs gets one row per option
// (rank in descending-prob order, first among equals first); a candidate
// noul gets the candidate with prob = p_true.
nlohmann::ordered_json OptionRows(const RecordedDecision& d) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  const policy::DecisionRecord& r = d.record;
  if (d.place.candidate.has_value()) {
    const cards::Candidate& c = *d.place.candidate;
    rows.push_back({{"position", 0},
                    {"label", c.label},
                    {"curie", c.curie},
                    {"iri", c.iri},
                    {"ontology_id", c.ontology_id},
                    {"prob", OrNull(r.p_true)}});
    return rows;
  }
  if (r.kind != decision::QuestionKind::kChoice || !r.probs.has_value()) {
    return rows;
  }
  const std::vector<double>& probs = *r.probs;
  std::vector<size_t> order(probs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return probs[a] > probs[b]; });
  std::vector<int> rank(probs.size());
  for (size_t i = 0; i < order.size(); ++i)
    rank[order[i]] = static_cast<int>(i);
  for (size_t i = 0; i < probs.size(); ++i) {
    rows.push_back({{"position", i},
                    {"text", r.options[i]},
                    {"prob", probs[i]},
                    {"rank", rank[i]}});
  }
  return rows;
}

}  // namespace

nlohmann::ordered_json RecordedDecision::ToJson() const {
  nlohmann::ordered_json j = record.ToJson();
  j["seq"] = seq;
  j["group_id"] = OrNull(place.group_id);
  j["parent_decision_id"] = OrNull(place.parent_decision_id);
  j["k"] = record.options.size();
  j["scope"] = place.scope;
  j["column_name"] = OrNull(place.column_name);
  j["site_code"] = OrNull(place.site_code);
  j["option_rows"] = OptionRows(*this);
  j["threshold_auto"] = OrNull(threshold_auto);
  j["threshold_propose"] = OrNull(threshold_propose);
  j["missing_labels"] = missing_labels;
  j["outcome"] = policy::OutcomeName(outcome);
  return j;
}

nlohmann::ordered_json Group::ToJson() const {
  return {{"group_id", group_id},
          {"question_id", question_id},
          {"scope", scope},
          {"column_name", OrNull(column_name)},
          {"site_code", OrNull(site_code)},
          {"aspect", aspect},
          {"ontology_id", ontology_id},
          {"search_json", search_json},
          {"n_candidates", n_candidates},
          {"winner_decision_id", OrNull(winner_decision_id)},
          {"top_p", OrNull(top_p)},
          {"group_margin", OrNull(group_margin)},
          {"level", OrNull(level)},
          {"outcome", policy::OutcomeName(outcome)},
          {"missing_labels", missing_labels},
          {"escalated_from", OrNull(escalated_from)}};
}

const RecordedDecision& Recorder::Record(
    policy::DecisionRecord record, DecisionPlace place, int missing_labels,
    std::optional<policy::Outcome> override_outcome) {
  RecordedDecision d;
  d.seq = n_decisions() + 1;
  d.place = std::move(place);
  d.missing_labels = missing_labels;
  const auto thresholds = policy_->thresholds(record.question_id);
  if (thresholds.ok()) {
    d.threshold_auto = thresholds->auto_threshold;
    d.threshold_propose = thresholds->propose;
  }
  if (override_outcome.has_value()) {
    d.outcome = *override_outcome;
  } else if (thresholds.ok()) {
    d.outcome =
        policy::DecideOutcome(record, *thresholds, profile_, missing_labels);
  } else {
    d.outcome = policy::Outcome::kRule;
  }
  d.record = std::move(record);
  decisions_.push_back(std::move(d));
  return decisions_.back();
}

Group& Recorder::OpenGroup(Group group) {
  group.group_id = static_cast<int>(groups_.size()) + 1;
  groups_.push_back(std::move(group));
  return groups_.back();
}

std::map<std::string, int> Recorder::OutcomeCounts() const {
  std::map<std::string, int> counts;
  for (const RecordedDecision& d : decisions_) {
    ++counts[policy::OutcomeName(d.outcome)];
  }
  return counts;
}

}  // namespace mesa_anyjev::annotate
