// `mesa-anyjev questions`: lists the fixed-key questions, checks them against
// questions.lock.json (--check) or rewrites the lock (--update-lock). The
// messages are the reference's: "questions in sync; lock_sha <sha>", one
// "DRIFT: <line>" per drift line on stderr, "questions.lock.json updated;
// lock_sha <sha>".
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands/commands.h"
#include "client/ui/table.h"
#include "client/ui/terminal.h"
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
    ui::PrintJson(
        Json{{"in_sync", drift->empty()}, {"lock_sha", sha}, {"drift", *drift}},
        std::cout);
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

Json EntryJson(const QuestionEntry& e) {
  return Json{
      {"id", e.id()},
      {"kind", decision::QuestionKindName(e.question.kind())},
      {"scope", questions::ScopeName(e.scope)},
      {"k", e.question.k()},
      {"key", e.question.key()},
      {"text", e.question.text()},
      {"options", e.question.options()},
      {"twin", e.twin ? Json(*e.twin) : Json(nullptr)},
  };
}

void List(const QuestionSet& set, bool json) {
  if (json) {
    Json rows = Json::array();
    for (const QuestionEntry& e : set.entries()) rows.push_back(EntryJson(e));
    ui::PrintJson(
        Json{{"questions", rows}, {"lock_sha", questions::LockSha(set)}},
        std::cout);
    return;
  }
  ui::Table table({{"id"},
                   {"kind"},
                   {"K", ui::Align::kRight},
                   {"options", ui::Align::kLeft, true, 24},
                   {"text", ui::Align::kLeft, true}});
  for (const QuestionEntry& e : set.entries()) {
    // The text's first line: the rest is shown by `questions show`.
    const std::string& text = e.question.text();
    table.AddRow({e.id(), decision::QuestionKindName(e.question.kind()),
                  absl::StrCat(e.question.k()),
                  absl::StrJoin(e.question.options(), ", "),
                  text.substr(0, text.find('\n'))});
  }
  table.Print(std::cout, ui::OutputColumns());
  std::cout << "lock_sha " << questions::LockSha(set)
            << "; `mesa-anyjev questions show ID` prints one in full\n";
}

int Show(const QuestionSet& set, const QuestionsOptions& options) {
  auto entry = set.Find(options.show_id);
  if (!entry.ok()) {
    std::cerr << "mesa-anyjev questions show: " << entry.status().message()
              << "\n";
    return 2;
  }
  const QuestionEntry& e = **entry;
  if (options.json) {
    ui::PrintJson(EntryJson(e), std::cout);
    return 0;
  }
  std::cout << e.id() << "  (" << decision::QuestionKindName(e.question.kind())
            << ", K=" << e.question.k() << ", scope "
            << questions::ScopeName(e.scope) << ", key " << e.question.key()
            << ")\n\n"
            << e.question.text() << "\n\n";
  for (size_t i = 0; i < e.question.options().size(); ++i) {
    std::cout << "  " << (i + 1) << ". " << e.question.options()[i] << "\n";
  }
  if (e.twin)
    std::cout << "\ntwin (asked when K is over the cap): " << *e.twin << "\n";
  return 0;
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
  if (!options.show_id.empty()) return Show(set, options);
  List(set, options.json);
  return 0;
}

}  // namespace mesa_anyjev::client
