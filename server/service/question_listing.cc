// Decisions.ListQuestions (see question_listing.h).
#include "server/service/question_listing.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/decision/question_message.h"
#include "common/questions/question_lock.h"

namespace mesa_anyjev::service {

namespace v1 = ::mesa::anyjev::v1;

namespace {

void Fill(const questions::QuestionEntry& entry,
          const decision::Decider& decider,
          const std::map<std::string, ServedBundle>& bundles,
          v1::ServedQuestion* out) {
  const decision::Question& question = entry.question;
  decision::QuestionToMessage(question, out->mutable_question());
  out->set_key(question.key());
  out->set_twin(entry.twin.value_or(""));
  out->set_scope(questions::ScopeName(entry.scope));
  // What the CLI's Decide would get: auto with exact_heads. Auto always
  // resolves to a level; L0 is its floor.
  decision::DecideOptions options;
  options.exact_heads = true;
  const auto level =
      decider.ServedLevel(question, decision::Level::kAuto, options);
  out->set_level(
      decision::LevelName(level.ok() ? *level : decision::Level::kL0));
  if (const auto it = bundles.find(entry.id());
      it != bundles.end() && it->second.key == question.key()) {
    out->set_bundle_version(it->second.version);
  }
}

}  // namespace

absl::Status ListQuestions(const v1::ListQuestionsRequest& request,
                           const questions::QuestionSet& set,
                           const decision::Decider& decider,
                           const std::map<std::string, ServedBundle>& bundles,
                           v1::ListQuestionsResponse* response) {
  if (request.ids_size() > kMaxListedIds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ids: ", request.ids_size(), " ids exceed ", kMaxListedIds,
        " (leave ids empty to list all ", set.entries().size(), ")"));
  }
  std::vector<const questions::QuestionEntry*> entries;
  for (int i = 0; i < request.ids_size(); ++i) {
    const std::string& id = request.ids(i);
    const std::string field = absl::StrCat("ids[", i, "]");
    if (id.empty() || id.size() > kMaxQuestionIdBytes) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", id.size(),
                                                     " bytes; an id has 1..",
                                                     kMaxQuestionIdBytes));
    }
    auto entry = set.Find(id);
    if (!entry.ok()) {
      return absl::NotFoundError(
          absl::StrCat(field, ": ", entry.status().message()));
    }
    entries.push_back(*entry);
  }
  if (request.ids_size() == 0) {
    for (const questions::QuestionEntry& entry : set.entries()) {
      entries.push_back(&entry);
    }
  }
  for (const questions::QuestionEntry* entry : entries) {
    Fill(*entry, decider, bundles, response->add_questions());
  }
  response->set_lock_sha(questions::LockSha(set));
  response->set_model(decider.model_name());
  return absl::OkStatus();
}

}  // namespace mesa_anyjev::service
