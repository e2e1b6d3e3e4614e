// Questions and their keys (see question.h).
#include "common/decision/question.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decision/py_format.h"
#include "common/util/enum_names.h"
#include "common/util/hash.h"

namespace mesa_anyjev::decision {

namespace {

constexpr util::EnumName<QuestionKind> kQuestionKindNames[] = {
    {QuestionKind::kChoice, "choice"},
    {QuestionKind::kNoul, "noul"},
    {QuestionKind::kScore, "score"}};
static_assert(util::NamesEvery(kQuestionKindNames, QuestionKind::kScore));

}  // namespace

const char* QuestionKindName(QuestionKind kind) {
  return util::NameIn(kQuestionKindNames, kind);
}

absl::StatusOr<QuestionKind> ParseQuestionKind(std::string_view name) {
  if (auto kind = util::ValueIn(kQuestionKindNames, name)) return *kind;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown question kind '", std::string(name), "' (expected ",
                   util::NamesIn(kQuestionKindNames), ")"));
}

Question::Question(QuestionKind kind, std::string text,
                   std::vector<std::string> options, std::string name,
                   double lo, double hi, bool ordered,
                   std::optional<std::vector<double>> centers)
    : kind_(kind),
      text_(std::move(text)),
      options_(std::move(options)),
      name_(std::move(name)),
      scale_lo_(lo),
      scale_hi_(hi),
      ordered_(ordered),
      centers_(std::move(centers)) {
  ComputeKey();
}

absl::StatusOr<Question> Question::Choice(std::string text,
                                          std::vector<std::string> options,
                                          std::string name) {
  if (options.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a choice needs at least 2 options, got ", options.size()));
  }
  if (options.size() > static_cast<size_t>(kMaxChoiceOptions)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a choice supports at most ", kMaxChoiceOptions,
                     " options (letter labels A..Z), got ", options.size()));
  }
  if (std::set<std::string>(options.begin(), options.end()).size() !=
      options.size()) {
    return absl::InvalidArgumentError("choice options must be unique");
  }
  return Question(QuestionKind::kChoice, std::move(text), std::move(options),
                  std::move(name), 0.0, 1.0, false, std::nullopt);
}

Question Question::Noul(std::string text, std::string name) {
  return Question(QuestionKind::kNoul, std::move(text), {"Yes", "No"},
                  std::move(name), 0.0, 1.0, false, std::nullopt);
}

absl::StatusOr<Question> Question::ScoreBins(std::string text, int bins,
                                             double lo, double hi,
                                             std::string name) {
  if (bins < kMinScoreLevels || bins > kMaxScoreLevels) {
    return absl::InvalidArgumentError(
        absl::StrCat("a score supports ", kMinScoreLevels, " to ",
                     kMaxScoreLevels, " bins, got ", bins));
  }
  // Finite ends and a finite width: the bins' edges are printed in the
  // prompt and a score's value is read off them.
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi) ||
      !std::isfinite(hi - lo)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a score scale must be finite (lo, hi) with hi > lo and a finite "
        "width, got (",
        PyFloatRepr(lo), ", ", PyFloatRepr(hi), ")"));
  }
  // edges[i] = lo + (hi - lo) * i / bins, evaluated as Python does.
  std::vector<double> edges;
  for (int i = 0; i <= bins; ++i) {
    edges.push_back(lo + (hi - lo) * static_cast<double>(i) /
                             static_cast<double>(bins));
  }
  std::vector<std::string> labels;
  for (int i = 0; i < bins; ++i) {
    labels.push_back(
        absl::StrCat(PyFormatG(edges[i]), " to ", PyFormatG(edges[i + 1])));
  }
  for (int i = 1; i < bins; ++i) {
    if (labels[i] == labels[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("a score scale (", PyFloatRepr(lo), ", ",
                       PyFloatRepr(hi), ") is too narrow for ", bins,
                       " bins: two print as '", labels[i], "'"));
    }
  }
  return Question(QuestionKind::kScore, std::move(text), std::move(labels),
                  std::move(name), lo, hi, true, std::nullopt);
}

absl::StatusOr<Question> Question::ScoreLevels(std::string text,
                                               std::vector<std::string> levels,
                                               std::string name) {
  if (levels.size() < static_cast<size_t>(kMinScoreLevels) ||
      levels.size() > static_cast<size_t>(kMaxScoreLevels)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a score supports ", kMinScoreLevels, " to ",
                     kMaxScoreLevels, " levels, got ", levels.size()));
  }
  std::vector<double> centers;
  for (size_t i = 0; i < levels.size(); ++i) {
    centers.push_back(static_cast<double>(i));
  }
  const double hi = static_cast<double>(levels.size() - 1);
  return Question(QuestionKind::kScore, std::move(text), std::move(levels),
                  std::move(name), 0.0, hi, true, std::move(centers));
}

Question Question::FromStored(QuestionKind kind, std::string text,
                              std::vector<std::string> options,
                              std::string name) {
  return Question(kind, std::move(text), std::move(options), std::move(name),
                  0.0, 1.0, kind == QuestionKind::kScore, std::nullopt);
}

absl::Status Question::SetCustomLabels(std::vector<std::string> labels) {
  if (kind_ == QuestionKind::kNoul) {
    return absl::InvalidArgumentError(
        "a noul's labels are Yes and No; custom labels apply to choice and "
        "score only");
  }
  if (labels.size() != options_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "labels: ", labels.size(), " given for ", options_.size(), " options"));
  }
  if (std::set<std::string>(labels.begin(), labels.end()).size() !=
      labels.size()) {
    return absl::InvalidArgumentError("labels must be unique");
  }
  for (const std::string& label : labels) {
    if (label.empty()) {
      return absl::InvalidArgumentError("labels must not be empty");
    }
  }
  custom_labels_ = std::move(labels);
  ComputeKey();
  return absl::OkStatus();
}

void Question::ComputeKey() {
  // json.dumps({"kind", "text", "options", "scale", "centers"},
  // sort_keys=True, ensure_ascii=False): keys in sorted order, ", " and ": "
  // separators, floats as repr.
  const auto list = [](const auto& items, auto format) {
    std::vector<std::string> parts;
    for (const auto& item : items) parts.push_back(format(item));
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  };
  const std::string centers =
      centers_.has_value() && !centers_->empty()
          ? list(*centers_, [](double c) { return PyFloatRepr(c); })
          : "null";
  std::string payload =
      absl::StrCat("{\"centers\": ", centers, ", \"kind\": \"",
                   QuestionKindName(kind_), "\", ");
  if (!custom_labels_.empty()) {
    absl::StrAppend(&payload, "\"labels\": ",
                    list(custom_labels_,
                         [](const std::string& s) { return PyJsonString(s); }),
                    ", ");
  }
  absl::StrAppend(
      &payload, "\"options\": ",
      list(options_, [](const std::string& s) { return PyJsonString(s); }),
      ", \"scale\": [", PyFloatRepr(scale_lo_), ", ", PyFloatRepr(scale_hi_),
      "], \"text\": ", PyJsonString(text_), "}");
  key_ = util::Sha256Hex(payload).substr(0, 16);
}

std::string Question::id() const {
  return name_.empty() ? absl::StrCat("q_", key_.substr(0, 8)) : name_;
}

std::vector<double> Question::BinCenters() const {
  if (centers_.has_value()) return *centers_;
  std::vector<double> out;
  const double n = static_cast<double>(k());
  for (int i = 0; i < k(); ++i) {
    out.push_back(scale_lo_ +
                  (scale_hi_ - scale_lo_) * (static_cast<double>(i) + 0.5) / n);
  }
  return out;
}

bool Question::IsScoreBins() const {
  if (kind_ != QuestionKind::kScore) return false;
  auto as_bins = ScoreBins(text_, k(), scale_lo_, scale_hi_, name_);
  return as_bins.ok() && as_bins->key() == key_;
}

}  // namespace mesa_anyjev::decision
