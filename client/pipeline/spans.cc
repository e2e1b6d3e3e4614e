// The span rule (see spans.h).
#include "client/pipeline/spans.h"

#include <algorithm>
#include <cstddef>
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
  std::vector<StateResult> out(texts.size());
  std::map<size_t, absl::Status> refused;  // span position -> first refusal
  for (const auto& [begin, end] : QuestionSlices(n_questions, max_questions)) {
    std::vector<size_t> live(texts.size());
    for (size_t s = 0; s < live.size(); ++s) live[s] = s;
    while (!live.empty()) {
      std::vector<std::string> sent;
      sent.reserve(live.size());
      for (const size_t s : live) sent.push_back(texts[s]);
      auto decided = call(sent, begin, end);
      if (!decided.ok()) {
        const auto named = RefusedState(decided.status());
        if (!named.has_value() || *named >= live.size()) {
          return decided.status();
        }
        // Out of this slice's call only, as the Python client does: the
        // other slices' calls keep it, and each call's batch prior comes
        // from the states it decided.
        const size_t s = live[*named];
        refused.emplace(
            s, Renamed(decided.status(), first + static_cast<int64_t>(s)));
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(*named));
        continue;
      }
      if (decided->size() != live.size()) {
        return absl::InternalError("a call answered another number of states");
      }
      for (size_t i = 0; i < live.size(); ++i) {
        for (auto& d : (*decided)[i])
          out[live[i]].decisions.push_back(std::move(d));
      }
      break;
    }
  }
  // A state any slice refused is that refusal alone.
  for (auto& [s, status] : refused) {
    out[s].decisions.clear();
    out[s].refused = std::move(status);
  }
  return out;
}

}  // namespace mesa_anyjev::client::pipeline
