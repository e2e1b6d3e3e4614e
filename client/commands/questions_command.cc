// `mesa-anyjev questions`: lists the fixed-key questions, checks them against
// questions.lock.json (--check) or rewrites the lock (--update-lock). The
// messages are the reference's: "questions in sync; lock_sha <sha>", one
// "DRIFT: <line>" per drift line on stderr, "questions.lock.json updated;
// lock_sha <sha>".
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "client/commands/commands.h"
#include "common/questions/question_lock.h"
#include "common/questions/question_set.h"
#include "common/util/files.h"

namespace mesa_anyjev::client {
namespace {

using Json = nlohmann::ordered_json;
using questions::QuestionEntry;
using questions::QuestionSet;

int Check(const QuestionSet& set, const QuestionsOptions& options) {
  auto drift = questions::LockDrift(set, options.lock_path);
  if (!drift.ok()) {
    std::cerr << "mesa-anyjev: " << drift.status().message() << "\n";
    return 2;
  }
  const std::string sha = questions::LockSha(set);
  if (options.json) {
    std::cout << Json{{"in_sync", drift->empty()},
                      {"lock_sha", sha},
                      {"drift", *drift}}
                     .dump()
              << "\n";
  } else if (drift->empty()) {
    std::cout << "questions in sync; lock_sha " << sha << "\n";
  }
  for (const std::string& line : *drift) {
    std::cerr << "DRIFT: " << line << "\n";
  }
  return drift->empty() ? 0 : 1;
}

int UpdateLock(const QuestionSet& set, const QuestionsOptions& options) {
  const absl::Status written =
      util::WriteFileAtomic(options.lock_path, questions::LockFileText(set));
  if (!written.ok()) {
    std::cerr << "mesa-anyjev: writing " << options.lock_path << ": "
              << written.message() << "\n";
    return 2;
  }
  std::cout << questions::kLockFileName << " updated; lock_sha "
            << questions::LockSha(set) << "\n";
  return 0;
}

void List(const QuestionSet& set, bool json) {
  if (json) {
    Json rows = Json::array();
    for (const QuestionEntry& e : set.entries()) {
      rows.push_back(Json{
          {"id", e.id()},
          {"kind", decision::QuestionKindName(e.question.kind())},
          {"scope", questions::ScopeName(e.scope)},
          {"k", e.question.k()},
          {"key", e.question.key()},
          {"twin", e.twin ? Json(*e.twin) : Json(nullptr)},
      });
    }
    std::cout << Json{{"questions", rows},
                      {"lock_sha", questions::LockSha(set)}}
                     .dump()
              << "\n";
    return;
  }
  size_t width = 0;
  for (const QuestionEntry& e : set.entries()) {
    width = std::max(width, e.id().size());
  }
  for (const QuestionEntry& e : set.entries()) {
    std::cout << std::left << std::setw(static_cast<int>(width)) << e.id()
              << "  " << std::setw(6)
              << decision::QuestionKindName(e.question.kind()) << "  "
              << std::right << std::setw(2) << e.question.k() << "  "
              << e.question.key() << "  " << (e.twin ? *e.twin : "-") << "\n";
  }
  std::cout << "lock_sha " << questions::LockSha(set) << "\n";
}

}  // namespace

std::string DefaultLockPath() {
  if (std::filesystem::exists(questions::kLockFileName)) {
    return questions::kLockFileName;
  }
  return MESA_ANYJEV_SOURCE_LOCK;
}

int RunQuestions(const QuestionsOptions& options_in) {
  const QuestionSet& set = QuestionSet::Reference();
  QuestionsOptions options = options_in;
  if (options.lock_path.empty()) {
    // A new lock is written here; a check reads the nearest one.
    options.lock_path = options.update_lock
                            ? std::string(questions::kLockFileName)
                            : DefaultLockPath();
  }
  if (options.check && options.update_lock) {
    std::cerr << "mesa-anyjev: --check and --update-lock exclude each other\n";
    return 2;
  }
  if (options.update_lock) return UpdateLock(set, options);
  if (options.check) return Check(set, options);
  List(set, options.json);
  return 0;
}

}  // namespace mesa_anyjev::client
