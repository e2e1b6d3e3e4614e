// Bench tasks built from the label store (the reference's
// tasks_from_store): one task per question of the set that has labelled
// states at its policy min_weight, named labels_<question id with '.'
// replaced by '_'> (labels_term_fits, labels_column_aspect, ...). Empty tasks
// are dropped.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "client/learn/label_store.h"
#include "client/policy/policy.h"
#include "common/decision/level.h"
#include "common/questions/question_set.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::bench {

struct Task {
  std::string name;
  std::string question_id;
  decision::Question question = decision::Question::Noul("");
  learn::LabelledSet items;  // states, labels, weights, cards (one per item)
  std::string license;
  std::string source;
  std::string notes;
  std::vector<decision::Level> levels_supported = {
      decision::Level::kRaw, decision::Level::kL0, decision::Level::kL1,
      decision::Level::kL2};
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();

  bool noul() const { return question.kind() == decision::QuestionKind::kNoul; }
};

// "labels_" + the id with '.' -> '_'.
std::string TaskName(const std::string& question_id);

// In question-set order; a question without labels gives no task.
std::vector<Task> TasksFromStore(const learn::LabelStore& store,
                                 const questions::QuestionSet& questions,
                                 const policy::Policy& policy);

}  // namespace mesa_anyjev::bench
