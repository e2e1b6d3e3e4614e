// The span rule (see spans.h).
#include "client/pipeline/spans.h"

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace mesa_anyjev::client::pipeline {
namespace {

constexpr absl::string_view kStates = "states[";

// Where "states[<digits>]" starts the daemon's field path: at the message's
// start or after "Decide: " (the call the CLI names); npos if nowhere.
size_t FieldStart(absl::string_view message) {
  for (size_t at = message.find(kStates); at != absl::string_view::npos;
       at = message.find(kStates, at + 1)) {
    if (at == 0 || (at >= 2 && message.substr(at - 2, 2) == ": ")) return at;
  }
  return absl::string_view::npos;
}

// The refusal with the state named by its input position, from its field
// path on ("states[130].text: ...").
absl::Status Renamed(const absl::Status& status, int64_t position) {
  const absl::string_view message = status.message();
  const size_t at = FieldStart(message);
  const size_t close = message.find(']', at);
  return absl::Status(status.code(),
                      absl::StrCat("states[", position, message.substr(close)));
}

}  // namespace

absl::Status CheckSpanSize(int64_t span, int32_t max_call_states) {
  if (span < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--span: ", span, " is not a number of states (>= 1)"));
  }
  if (max_call_states > 0 && span > max_call_states) {
    return absl::InvalidArgumentError(
        absl::StrCat("--span: ", span,
                     " states exceed the daemon's limits.max_decide_states=",
                     max_call_states, " (one span is one call)"));
  }
  return absl::OkStatus();
}

int64_t SpanStart(int64_t index, int64_t span) { return index / span * span; }

std::vector<std::pair<size_t, size_t>> QuestionSlices(size_t n, int32_t max) {
  const size_t step =
      max > 0 ? static_cast<size_t>(max) : std::max<size_t>(n, 1);
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t begin = 0; begin < n; begin += step) {
    out.emplace_back(begin, std::min(n, begin + step));
  }
  return out;
}

std::optional<size_t> RefusedState(const absl::Status& status) {
  if (!absl::IsInvalidArgument(status)) return std::nullopt;
  const absl::string_view message = status.message();
  const size_t at = FieldStart(message);
  if (at == absl::string_view::npos) return std::nullopt;
  const size_t digits = at + kStates.size();
  const size_t close = message.find(']', digits);
  size_t position = 0;
  if (close == absl::string_view::npos ||
      !absl::SimpleAtoi(message.substr(digits, close - digits), &position)) {
    return std::nullopt;
  }
  return position;
}

absl::StatusOr<std::vector<StateResult>> DecideSpan(
    const std::vector<std::string>& texts, int64_t first, size_t n_questions,
    int32_t max_questions, const SpanCall& call) {
  const auto slices = QuestionSlices(n_questions, max_questions);
  std::map<size_t, absl::Status> refused;  // span position -> refusal
  for (;;) {
    std::vector<size_t> live;
    std::vector<std::string> sent;
    for (size_t s = 0; s < texts.size(); ++s) {
      if (refused.count(s) == 0) {
        live.push_back(s);
        sent.push_back(texts[s]);
      }
    }
    std::vector<std::vector<decision::Decision>> rows(live.size());
    bool again = false;
    for (const auto& [begin, end] : slices) {
      if (live.empty()) break;
      auto decided = call(sent, begin, end);
      if (!decided.ok()) {
        const auto named = RefusedState(decided.status());
        if (!named.has_value() || *named >= live.size()) {
          return decided.status();
        }
        const size_t s = live[*named];
        refused[s] = Renamed(decided.status(), first + static_cast<int64_t>(s));
        again = true;
        break;
      }
      if (decided->size() != live.size()) {
        return absl::InternalError("a call answered another number of states");
      }
      for (size_t i = 0; i < live.size(); ++i) {
        for (auto& d : (*decided)[i]) rows[i].push_back(std::move(d));
      }
    }
    if (again) continue;
    std::vector<StateResult> out(texts.size());
    for (size_t i = 0; i < live.size(); ++i) {
      out[live[i]].decisions = std::move(rows[i]);
    }
    for (auto& [s, status] : refused) out[s].refused = std::move(status);
    return out;
  }
}

}  // namespace mesa_anyjev::client::pipeline
