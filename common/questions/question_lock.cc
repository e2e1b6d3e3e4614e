// The question lock (see question_lock.h).
#include "common/questions/question_lock.h"

#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decision/py_json.h"
#include "common/text/strict_json.h"
#include "common/util/files.h"
#include "common/util/hash.h"

namespace mesa_anyjev::questions {
namespace {

using Json = nlohmann::ordered_json;

// A SQL string literal: single quotes doubled.
std::string SqlLiteral(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    out.push_back(c);
    if (c == '\'') out.push_back('\'');
  }
  out.push_back('\'');
  return out;
}

// What drift compares of one locked question.
struct Locked {
  std::string key;
  std::optional<std::string> twin;
};

absl::StatusOr<std::map<std::string, Locked>> ParseLocked(
    std::string_view text) {
  auto parsed = text::ParseStrictOrderedJson(text, {});
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the lock: ", parsed.status().message()));
  }
  const Json doc = *std::move(parsed);
  if (!doc.is_object() || !doc.contains("questions") ||
      !doc["questions"].is_object()) {
    return absl::InvalidArgumentError("the lock has no \"questions\" object");
  }
  std::map<std::string, Locked> out;
  for (const auto& [qid, entry] : doc["questions"].items()) {
    if (!entry.is_object() || !entry.contains("key") ||
        !entry["key"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the lock's questions.", qid, " has no string \"key\""));
    }
    Locked locked{entry["key"].get<std::string>(), std::nullopt};
    if (entry.contains("twin") && !entry["twin"].is_null()) {
      if (!entry["twin"].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("the lock's questions.", qid,
                         ".twin is neither null nor a string"));
      }
      locked.twin = entry["twin"].get<std::string>();
    }
    out.emplace(qid, std::move(locked));
  }
  return out;
}

}  // namespace

Json LockQuestions(const QuestionSet& set) {
  Json questions = Json::object();
  for (const QuestionEntry& e : set.entries()) {
    const decision::Question& q = e.question;
    questions[e.id()] = Json{
        {"kind", decision::QuestionKindName(q.kind())},
        {"text", q.text()},
        {"options", q.options()},
        {"key", q.key()},
        {"twin", e.twin ? Json(*e.twin) : Json(nullptr)},
    };
  }
  return questions;
}

std::string LockSha(const QuestionSet& set) {
  return LockShaOf(LockQuestions(set));
}

std::string LockShaOf(const Json& questions) {
  return util::Sha256Hex(decision::PyJsonCanonical(questions));
}

std::map<std::string, std::string> LockKeys(const QuestionSet& set) {
  std::map<std::string, std::string> keys;
  for (const QuestionEntry& e : set.entries()) keys[e.id()] = e.question.key();
  return keys;
}

std::string HostedSql(const decision::Question& question) {
  const std::string prefix =
      absl::StrCat("prompt_jev(state_text, ", SqlLiteral(question.text()));
  if (question.kind() == decision::QuestionKind::kNoul) {
    return absl::StrCat(prefix, ", noul := TRUE)");
  }
  std::vector<std::string> options;
  for (const std::string& option : question.options()) {
    options.push_back(SqlLiteral(option));
  }
  const char* arg =
      question.kind() == decision::QuestionKind::kChoice ? "choice" : "score";
  return absl::StrCat(prefix, ", ", arg, " := [", absl::StrJoin(options, ", "),
                      "])");
}

Json LockDocument(const QuestionSet& set) {
  Json hosted = Json::object();
  for (const QuestionEntry& e : set.entries()) {
    hosted[e.id()] = HostedSql(e.question);
  }
  return Json{{"questions", LockQuestions(set)},
              {"hosted_sql", std::move(hosted)},
              {"lock_sha", LockSha(set)}};
}

std::string LockFileText(const QuestionSet& set) {
  return absl::StrCat(
      decision::PyJsonDumps(LockDocument(set),
                            decision::PyJsonOptions{.indent = 1}),
      "\n");
}

absl::StatusOr<std::vector<std::string>> DriftAgainst(
    const QuestionSet& set, std::string_view lock_text) {
  auto locked = ParseLocked(lock_text);
  if (!locked.ok()) return locked.status();
  std::map<std::string, const QuestionEntry*> code;
  for (const QuestionEntry& e : set.entries()) code.emplace(e.id(), &e);
  std::set<std::string> ids;
  for (const auto& [qid, unused] : code) ids.insert(qid);
  for (const auto& [qid, unused] : *locked) ids.insert(qid);

  std::vector<std::string> lines;
  for (const std::string& qid : ids) {
    const auto in_code = code.find(qid);
    const auto in_lock = locked->find(qid);
    if (in_lock == locked->end()) {
      lines.push_back(absl::StrCat(qid, ": new question, not in the lock"));
    } else if (in_code == code.end()) {
      lines.push_back(absl::StrCat(qid, ": in the lock but no longer defined"));
    } else if (in_lock->second.key != in_code->second->question.key()) {
      lines.push_back(absl::StrCat(
          qid, ": key ", in_lock->second.key, " -> ",
          in_code->second->question.key(),
          " (wording or options changed; labels and artifacts need "
          "migration, DESIGN D7)"));
    } else if (in_lock->second.twin != in_code->second->twin) {
      lines.push_back(absl::StrCat(qid, ": twin changed"));
    }
  }
  return lines;
}

absl::StatusOr<std::vector<std::string>> LockDrift(const QuestionSet& set,
                                                   const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error) && !error) {
    return std::vector<std::string>{
        absl::StrCat(kLockFileName,
                     " is missing; run `mesa-anyjev questions --update-lock`")};
  }
  auto text = util::ReadFile(path);
  if (!text.ok()) return text.status();
  auto lines = DriftAgainst(set, *text);
  if (!lines.ok()) {
    return absl::Status(lines.status().code(),
                        absl::StrCat(path, ": ", lines.status().message()));
  }
  return lines;
}

}  // namespace mesa_anyjev::questions
