// Bench tasks from the label store (see task.h).
#include "client/bench/task.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/learn/cell.h"

namespace mesa_anyjev::bench {

std::string TaskName(const std::string& question_id) {
  std::string name = "labels_" + question_id;
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

std::vector<Task> TasksFromStore(const learn::LabelStore& store,
                                 const questions::QuestionSet& questions,
                                 const policy::Policy& policy) {
  std::vector<Task> tasks;
  for (const questions::QuestionEntry& entry : questions.entries()) {
    // A question without thresholds fits at every weight.
    const double min_weight = policy.thresholds(entry.id()).ok()
                                  ? policy.thresholds(entry.id())->min_weight
                                  : 0.0;
    learn::LabelledSet set =
        learn::LabelledStates(store, entry.question, min_weight);
    if (set.size() == 0) continue;
    Task task;
    task.name = TaskName(entry.id());
    task.question_id = entry.id();
    task.question = entry.question;
    const std::map<int, int> counts = learn::ClassCounts(set.labels);
    task.items = std::move(set);
    task.license =
        "not recorded by the label store; see each row's source and "
        "source_ref";
    task.source = store.path();
    task.notes = absl::StrCat(task.items.size(),
                              " labelled states from the label store; class "
                              "counts ",
                              learn::PyCounts(counts));
    task.meta["question_id"] = entry.id();
    task.meta["min_weight"] = min_weight;
    task.meta["class_counts"] = learn::CountsJson(counts);
    tasks.push_back(std::move(task));
  }
  return tasks;
}

}  // namespace mesa_anyjev::bench
