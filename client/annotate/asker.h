// One decide_batch of the annotate graph: states rendered as the reference
// renders dict states, the reference's capability rule, the batch's missing
// labels, and records built as the reference's AnyJev provider builds them
// (DecisionRecord::FromDecision).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "client/backends/provider.h"
#include "client/cards/states.h"
#include "client/policy/decision_record.h"
#include "common/decision/level.h"
#include "common/questions/question_set.h"

namespace mesa_anyjev::annotate {

struct Batch {
  std::vector<policy::DecisionRecord> records;  // one per state, in order
  int missing_labels = 0;  // the provider's missing-label events it caused
};

class Asker {
 public:
  using OnAsk =
      std::function<void(const std::string& question_id, size_t states)>;
  // `provider` must outlive the asker; `on_ask` (may be empty) hears of
  // each batch before it is asked.
  Asker(client::Provider* provider, decision::Level level, OnAsk on_ask = {});

  // decide_batch(states, question) at the run's level. An empty list asks
  // nothing. A choice with K over the provider's max_choice_k is never sent
  // below an explicit L2: OUT_OF_RANGE (the reference's CapabilityError),
  // so the caller asks the twin. `auto` counts as below L2 here: the
  // provider resolves auto per key behind its interface. Provider errors
  // keep their code and gain the question id.
  absl::StatusOr<Batch> Ask(const questions::QuestionEntry& entry,
                            const std::vector<cards::State>& states);

  int missing_labels() const { return missing_labels_; }
  const client::ProviderInfo& info() const { return provider_->info(); }

 private:
  client::Provider* provider_;
  decision::Level level_;
  OnAsk on_ask_;
  policy::RecordSource source_;
  int missing_labels_ = 0;  // the sum over batches
};

// The reference question `id`; the set is fixed, so a missing id is a
// programming error reported as INTERNAL.
absl::StatusOr<const questions::QuestionEntry*> Question(std::string_view id);

}  // namespace mesa_anyjev::annotate
