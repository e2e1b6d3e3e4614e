// questions.lock.json (docs/cli.md): the frozen identity of every
// question, so a reworded question or changed option list is caught before
// its key silently rotates away from its labels, priors and bundles.
//
// The file is Python's json.dumps(lock, indent=1, ensure_ascii=False) + "\n"
// of {"questions": {qid: {kind, text, options, key, twin}},
// "hosted_sql": {qid: prompt_jev SQL}, "lock_sha": hex}, byte for byte.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/questions/question_set.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::questions {

inline constexpr char kLockFileName[] = "questions.lock.json";

// The "questions" mapping: {qid: {kind, text, options, key, twin}} in the
// set's order; twin is null or the twin's id.
nlohmann::ordered_json LockQuestions(const QuestionSet& set);

// SHA-256 hex of the "questions" mapping alone, serialised with sorted keys,
// separators "," and ":" and non-ASCII kept (hosted_sql is outside it).
std::string LockSha(const QuestionSet& set);
// The same of a "questions" mapping as a client sends it (the Bundles
// service checks a recorded lock against its sha).
std::string LockShaOf(const nlohmann::ordered_json& questions);
// {question id: key} of the set.
std::map<std::string, std::string> LockKeys(const QuestionSet& set);

// The prompt_jev SQL literal hosted Jev would run for a question:
// prompt_jev(state_text, '<text>', noul := TRUE) | choice := ['a', ...] |
// score := [...], with single quotes doubled.
std::string HostedSql(const decision::Question& question);

// The whole lock document, and the exact file text (with trailing newline).
nlohmann::ordered_json LockDocument(const QuestionSet& set);
std::string LockFileText(const QuestionSet& set);

// The drift lines of `set` against a lock document's text, for each id in
// the sorted union of both: "<qid>: new question, not in the lock",
// "<qid>: in the lock but no longer defined", "<qid>: key <old> -> <new>
// (...)" or "<qid>: twin changed". Empty when in sync. INVALID_ARGUMENT
// naming the field when the text is not a lock document.
absl::StatusOr<std::vector<std::string>> DriftAgainst(
    const QuestionSet& set, std::string_view lock_text);

// DriftAgainst the file at `path`; a missing file is the single line
// "questions.lock.json is missing; run `mesa-anyjev questions
// --update-lock`". Other read errors name the path.
absl::StatusOr<std::vector<std::string>> LockDrift(const QuestionSet& set,
                                                   const std::string& path);

}  // namespace mesa_anyjev::questions
