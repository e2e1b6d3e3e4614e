// A Question into the Question message of decisions.proto, for both edges
// that send one (the CLI's daemon backend, the daemon's ListQuestions). A
// template over the message type, so common/ stays free of protobuf.
#pragma once

#include <string>

#include "common/decision/question.h"

namespace mesa_anyjev::decision {

// Fills `out` so that the receiver parses it back to the same key: a score
// of bins goes as bins and a scale, other options as options.
template <typename QuestionMessage>
void QuestionToMessage(const Question& question, QuestionMessage* out) {
  out->set_id(question.name());
  out->set_kind(QuestionKindName(question.kind()));
  out->set_text(question.text());
  if (question.IsScoreBins()) {
    out->set_bins(question.k());
    out->set_scale_lo(question.scale_lo());
    out->set_scale_hi(question.scale_hi());
  } else if (question.kind() != QuestionKind::kNoul) {
    for (const std::string& option : question.options()) {
      out->add_options(option);
    }
  }
  for (const std::string& label : question.custom_labels()) {
    out->add_labels(label);
  }
}

}  // namespace mesa_anyjev::decision
