// The run's bookkeeping (docs/annotate.md, What a run records): every
// decision gets the next seq, its place in the run (scope, column or site,
// group, parent) and an outcome; candidate rankings are groups. This is what
// the reference writes to its provenance sidecar; here it stays in memory
// and goes out with the run record (--json, --out).
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "client/cards/candidates.h"
#include "client/policy/decision_record.h"
#include "client/policy/policy.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::annotate {

// Where a decision sits in the run.
struct DecisionPlace {
  std::string scope;  // dataset | column | site | avu
  std::optional<std::string> column_name;
  std::optional<std::string> site_code;
  std::optional<int> group_id;
  std::optional<int> parent_decision_id;
  // term.fits: the candidate asked about (its one option row).
  std::optional<cards::Candidate> candidate;
};

struct RecordedDecision {
  int seq = 0;  // also the decision id
  policy::DecisionRecord record;
  DecisionPlace place;
  std::optional<double> threshold_auto;
  std::optional<double> threshold_propose;
  policy::Outcome outcome = policy::Outcome::kAbstain;
  int missing_labels = 0;  // of the batch the decision came from

  // DecisionRecord::ToJson() plus seq, group_id, parent_decision_id, k,
  // scope, column_name, site_code, option_rows, threshold_auto,
  // threshold_propose, missing_labels and outcome.
  nlohmann::ordered_json ToJson() const;
};

// A candidate ranking (_rank_group) or a specificity step.
struct Group {
  int group_id = 0;
  std::string question_id = "term.fits";
  std::string scope;
  std::optional<std::string> column_name;
  std::optional<std::string> site_code;
  std::string aspect;
  std::string ontology_id;
  nlohmann::ordered_json search_json = nlohmann::ordered_json::object();
  int n_candidates = 0;
  std::optional<int> winner_decision_id;
  std::optional<double> top_p;
  std::optional<double> group_margin;
  std::optional<std::string> level;
  policy::Outcome outcome = policy::Outcome::kAbstain;
  int missing_labels = 0;
  std::optional<int> escalated_from;

  nlohmann::ordered_json ToJson() const;
};

class Recorder {
 public:
  // `policy` must outlive the recorder.
  Recorder(const policy::Policy* policy, policy::Profile profile)
      : policy_(policy), profile_(std::move(profile)) {}

  // seq += 1. The outcome is `override` when given; else the policy's
  // outcome for the question (with the batch's missing labels); else
  // "rule". Returns the recorded decision (stable: held in a deque).
  const RecordedDecision& Record(
      policy::DecisionRecord record, DecisionPlace place, int missing_labels,
      std::optional<policy::Outcome> override_outcome = std::nullopt);

  // A new group with the next id (outcome abstain until updated).
  Group& OpenGroup(Group group);
  Group& group(int group_id) { return groups_.at(group_id - 1); }

  int n_decisions() const { return static_cast<int>(decisions_.size()); }
  const std::deque<RecordedDecision>& decisions() const { return decisions_; }
  const std::deque<Group>& groups() const { return groups_; }
  const policy::Profile& profile() const { return profile_; }
  // Each outcome name and its count over all recorded decisions, sorted by
  // name.
  std::map<std::string, int> OutcomeCounts() const;

 private:
  const policy::Policy* policy_;
  policy::Profile profile_;
  std::deque<RecordedDecision> decisions_;
  std::deque<Group> groups_;
};

}  // namespace mesa_anyjev::annotate
