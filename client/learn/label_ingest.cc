// Label rows from JSON lines (see label_ingest.h).
#include "client/learn/label_ingest.h"

#include <cmath>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/policy/decision_record.h"
#include "common/text/strict_json.h"

namespace mesa_anyjev::learn {
namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string>& KnownFields() {
  static const auto* const kFields =
      new std::set<std::string>{"question_id", "state", "label",     "source",
                                "weight",      "card",  "source_ref"};
  return *kFields;
}

// The row of one parsed line, or the first reason it is refused.
absl::StatusOr<LabelRow> RowOf(const Json& j,
                               const questions::QuestionSet& questions) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError("a JSON object is required");
  }
  for (const auto& [key, value] : j.items()) {
    if (!KnownFields().contains(key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown field '", key,
          "' (question_id, state, label, source, weight, card, source_ref)"));
    }
  }
  LabelRow row;
  if (!j.contains("question_id") || !j["question_id"].is_string()) {
    return absl::InvalidArgumentError("question_id: a string is required");
  }
  row.question_id = j["question_id"].get<std::string>();
  auto entry = questions.Find(row.question_id);
  if (!entry.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("question_id: unknown question '", row.question_id,
                     "' (see `mesa-anyjev questions`)"));
  }
  const decision::Question& question = (*entry)->question;
  row.question_key = question.key();

  if (!j.contains("state") ||
      !(j["state"].is_object() || j["state"].is_string())) {
    return absl::InvalidArgumentError(
        "state: a JSON object or a string is required (the exact state the "
        "question is asked on)");
  }
  row.state = j["state"];
  row.state_sha256 = policy::StateSha256(row.state);

  if (!j.contains("label") || !j["label"].is_number_integer()) {
    return absl::InvalidArgumentError(
        "label: an integer option index is required (Yes = 0)");
  }
  const int64_t label = j["label"].get<int64_t>();
  if (label < 0 || label >= question.k()) {
    return absl::InvalidArgumentError(
        absl::StrCat("label: ", label, " is outside [0, ", question.k(),
                     ") for ", row.question_id, " (K=", question.k(), ")"));
  }
  row.label_index = static_cast<int>(label);

  if (!j.contains("source") || !j["source"].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("source: a string is required (", SourceNames(), ")"));
  }
  row.label_source = j["source"].get<std::string>();
  const std::optional<double> default_weight = SourceWeight(row.label_source);
  if (!default_weight.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "source: '", row.label_source, "' is not one of ", SourceNames()));
  }
  row.weight = *default_weight;
  if (j.contains("weight") && !j["weight"].is_null()) {
    if (!j["weight"].is_number()) {
      return absl::InvalidArgumentError("weight: a number is required");
    }
    row.weight = j["weight"].get<double>();
    if (!std::isfinite(row.weight) || row.weight <= 0.0 || row.weight > 1.0) {
      return absl::InvalidArgumentError(
          absl::StrCat("weight: ", j["weight"].dump(), " is outside (0, 1]"));
    }
  }

  if (!j.contains("card") || !j["card"].is_string() ||
      j["card"].get<std::string>().empty()) {
    return absl::InvalidArgumentError(
        "card: a non-empty card id is required (leave-one-card-out groups "
        "labels by card)");
  }
  row.card = j["card"].get<std::string>();

  if (j.contains("source_ref") && !j["source_ref"].is_null()) {
    if (!j["source_ref"].is_string()) {
      return absl::InvalidArgumentError("source_ref: a string is required");
    }
    row.source_ref = j["source_ref"].get<std::string>();
  }
  return row;
}

}  // namespace

ParsedLabels ParseLabelLines(std::string_view text,
                             const questions::QuestionSet& questions,
                             const std::string& ts) {
  ParsedLabels out;
  // (key, state, source) -> the line that first had it.
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> first;
  int64_t line_no = 0;
  // Debian's Abseil takes absl::string_view, not std::string_view.
  const std::string all(text);
  for (absl::string_view piece : absl::StrSplit(all, '\n')) {
    ++line_no;
    const std::string line(absl::StripAsciiWhitespace(piece));
    if (line.empty()) continue;
    auto parsed = text::ParseStrictOrderedJson(line, {});
    if (!parsed.ok()) {
      out.problems.push_back({line_no, std::string(parsed.status().message())});
      continue;
    }
    const Json j = *std::move(parsed);
    absl::StatusOr<LabelRow> row = RowOf(j, questions);
    if (!row.ok()) {
      out.problems.push_back({line_no, std::string(row.status().message())});
      continue;
    }
    const auto key = std::make_tuple(row->question_key, row->state_sha256,
                                     row->label_source);
    if (const auto it = first.find(key); it != first.end()) {
      out.problems.push_back(
          {line_no, absl::StrCat("duplicate of line ", it->second,
                                 " (same question, state and source)")});
      continue;
    }
    first.emplace(key, line_no);
    row->ts = ts;
    out.rows.push_back(*std::move(row));
  }
  return out;
}

Json IngestSummary(const std::vector<LabelRow>& rows, int inserted) {
  std::map<std::string, std::map<std::string, int>> per_question;
  for (const LabelRow& row : rows) {
    ++per_question[row.question_id][row.label_source];
  }
  Json per = Json::object();
  for (const auto& [qid, sources] : per_question) {
    Json counts = Json::object();
    for (const auto& [source, n] : sources) counts[source] = n;
    per[qid] = std::move(counts);
  }
  Json summary;
  summary["inserted"] = inserted;
  summary["skipped_existing"] = static_cast<int>(rows.size()) - inserted;
  summary["per_question"] = std::move(per);
  return summary;
}

}  // namespace mesa_anyjev::learn
