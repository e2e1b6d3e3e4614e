// `learn ingest --labels FILE`: label rows as JSON lines (docs/learning.md),
// every row validated against the question set before anything is stored.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "client/learn/label_store.h"
#include "common/questions/question_set.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::learn {

struct IngestProblem {
  int64_t line = 0;  // 1-based
  std::string reason;
};

struct ParsedLabels {
  std::vector<LabelRow> rows;           // valid rows, in file order
  std::vector<IngestProblem> problems;  // every bad row; any -> store nothing
};

// One object per non-blank line: {"question_id", "state", "label",
// "source", "weight"?, "card", "source_ref"?}. A reason names the field and
// the limit (unknown question, label outside [0, K), unknown source, weight
// outside (0, 1], missing card, bad JSON, unknown field, a duplicate of an
// earlier line on (question, state, source)). `ts` stamps every row.
ParsedLabels ParseLabelLines(std::string_view text,
                             const questions::QuestionSet& questions,
                             const std::string& ts);

// The reference's IngestReport.summary() for this input: inserted,
// skipped_existing (= rows - inserted) and per_question {qid: {source: n}}
// over the file's rows.
nlohmann::ordered_json IngestSummary(const std::vector<LabelRow>& rows,
                                     int inserted);

}  // namespace mesa_anyjev::learn
