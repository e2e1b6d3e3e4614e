// Agreement records (see agreement_record.h).
#include "common/bundles/agreement_record.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/util/files.h"

namespace mesa_anyjev::bundles {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxRecordBytes = 8 << 20;
constexpr const char* kVerdicts[] = {"agree", "disagree", "n/a"};

absl::Status Field(const Json& object, const char* name, Json::value_t type,
                   const std::string& where) {
  if (!object.contains(name)) {
    return absl::InvalidArgumentError(absl::StrCat(where, name, ": required"));
  }
  const Json& value = object[name];
  const bool ok = type == Json::value_t::number_float ? value.is_number()
                                                      : value.type() == type;
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, name, ": has the wrong type (", value.type_name(), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckModel(const Json& model, const std::string& where) {
  if (!model.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not an object"));
  }
  const std::string at = where + ".";
  RETURN_IF_ERROR(Field(model, "model", Json::value_t::string, at));
  RETURN_IF_ERROR(Field(model, "model_identity", Json::value_t::string, at));
  RETURN_IF_ERROR(Field(model, "backend_kind", Json::value_t::string, at));
  if (model["model"].get<std::string>().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(at, "model: empty"));
  }
  if (model.contains("hidden") && !model["hidden"].is_null()) {
    const Json& hidden = model["hidden"];
    if (!hidden.is_object() || !hidden.contains("n_layers") ||
        !hidden["n_layers"].is_number_integer() ||
        !hidden.contains("hidden_size") ||
        !hidden["hidden_size"].is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, "hidden: null or {n_layers, hidden_size} integers"));
    }
  }
  return absl::OkStatus();
}

std::string String(const Json& object, const char* name) {
  return object.contains(name) && object[name].is_string()
             ? object[name].get<std::string>()
             : std::string();
}

RecordedModel ModelOf(const Json& m) {
  RecordedModel out{String(m, "model"), String(m, "model_identity"),
                    String(m, "backend_kind"), std::nullopt};
  if (m.contains("hidden") && m["hidden"].is_object()) {
    out.hidden = std::pair<int, int>{m["hidden"]["n_layers"].get<int>(),
                                     m["hidden"]["hidden_size"].get<int>()};
  }
  return out;
}

// Which of the record's two models is `self` (-1: neither).
int SelfIndex(const std::vector<RecordedModel>& models,
              const ModelBinding& self) {
  for (size_t i = 0; i < models.size(); ++i) {
    if (SameModel(models[i], self)) return static_cast<int>(i);
  }
  return -1;
}

std::string Short(const std::string& identity) {
  return identity.empty() ? "none" : identity.substr(0, 12);
}

}  // namespace

absl::Status CheckAgreementRecord(const Json& record) {
  if (!record.is_object()) {
    return absl::InvalidArgumentError("agreement record: not a JSON object");
  }
  const std::string at = "agreement record: ";
  RETURN_IF_ERROR(Field(record, "record", Json::value_t::string, at));
  if (record["record"] != kAgreementRecord) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "record: ", record["record"].dump(), " is not \"",
                     kAgreementRecord, "\""));
  }
  RETURN_IF_ERROR(Field(record, "date", Json::value_t::string, at));
  RETURN_IF_ERROR(
      Field(record, "questions_lock_sha", Json::value_t::string, at));
  RETURN_IF_ERROR(Field(record, "labels_sha256", Json::value_t::string, at));
  RETURN_IF_ERROR(Field(record, "models", Json::value_t::array, at));
  if (record["models"].size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "models: needs exactly two (a, b)"));
  }
  for (size_t i = 0; i < 2; ++i) {
    RETURN_IF_ERROR(
        CheckModel(record["models"][i], absl::StrCat(at, "models[", i, "]")));
  }
  RETURN_IF_ERROR(Field(record, "questions", Json::value_t::object, at));
  for (const auto& [id, q] : record["questions"].items()) {
    RETURN_IF_ERROR(CheckQuestionId(id));
    const std::string where = absl::StrCat(at, "questions.", id, ".");
    if (!q.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": not an object"));
    }
    RETURN_IF_ERROR(Field(q, "key", Json::value_t::string, where));
    RETURN_IF_ERROR(Field(q, "labels_sha256", Json::value_t::string, where));
    RETURN_IF_ERROR(Field(q, "verdict", Json::value_t::string, where));
    const std::string verdict = q["verdict"].get<std::string>();
    if (std::find(std::begin(kVerdicts), std::end(kVerdicts), verdict) ==
        std::end(kVerdicts)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "verdict: '", verdict, "' is not agree, disagree or n/a"));
    }
  }
  return absl::OkStatus();
}

std::vector<RecordedModel> RecordedModels(const Json& record) {
  std::vector<RecordedModel> out;
  for (const Json& m : record["models"]) out.push_back(ModelOf(m));
  return out;
}

bool SameModel(const RecordedModel& recorded, const ModelBinding& binding) {
  return recorded.model == binding.model &&
         (recorded.identity.empty() || binding.identity.empty() ||
          recorded.identity == binding.identity);
}

std::string AgreementFileName(const RecordedModel& other) {
  return absl::StrCat(ModelSlug(other.model), ".", Short(other.identity),
                      ".json");
}

absl::StatusOr<std::string> WriteAgreement(const std::string& lock_dir,
                                           const ModelBinding& self,
                                           const Json& record) {
  RETURN_IF_ERROR(CheckAgreementRecord(record));
  const std::vector<RecordedModel> models = RecordedModels(record);
  const int at = SelfIndex(models, self);
  if (at < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the agreement record is between '", models[0].model,
                     "' and '", models[1].model, "', not of '", self.model,
                     "' (identity ", Short(self.identity), ")"));
  }
  const fs::path dir = fs::path(lock_dir) / kAgreementsDir;
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", dir.string(), ": ", error.message()));
  }
  const std::string path = (dir / AgreementFileName(models[1 - at])).string();
  RETURN_IF_ERROR(util::WriteFileAtomic(path, record.dump(1) + "\n"));
  return path;
}

std::vector<StoredAgreement> ListAgreements(const std::string& lock_dir) {
  std::vector<StoredAgreement> out;
  std::error_code error;
  std::vector<fs::path> files;
  for (const auto& entry :
       fs::directory_iterator(fs::path(lock_dir) / kAgreementsDir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || !name.ends_with(".json")) continue;
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    StoredAgreement stored{file.string(), absl::UnknownError("")};
    auto text =
        util::ReadFile(stored.path, {.max_bytes = kMaxRecordBytes,
                                     .limit_name = "the 8 MiB record cap",
                                     .follow_symlinks = false});
    if (!text.ok()) {
      stored.record = text.status();
    } else {
      stored.record = ParseJsonLimited(*text, file.filename().string());
      if (stored.record.ok()) {
        if (absl::Status valid = CheckAgreementRecord(*stored.record);
            !valid.ok()) {
          stored.record = valid;
        }
      }
    }
    out.push_back(std::move(stored));
  }
  return out;
}

Standing StandingOf(const Json& record, const ModelBinding& self,
                    const ModelBinding* other_now, const std::string& lock_sha,
                    const std::string& question_id, const std::string& live_key,
                    const std::string* labels_sha256_now) {
  Standing out;
  const std::vector<RecordedModel> models = RecordedModels(record);
  const int at = SelfIndex(models, self);
  auto stale = [&](std::string why) {
    out.verdict = "stale";
    out.why = std::move(why);
    return out;
  };
  if (at < 0) {
    out.other = models[1];
    return stale(absl::StrCat("'", self.model, "' is no longer the model ",
                              "recorded (identity now ", Short(self.identity),
                              ")"));
  }
  out.other = models[1 - at];
  if (other_now != nullptr && !SameModel(out.other, *other_now)) {
    return stale(absl::StrCat("'", out.other.model, "' was identity ",
                              Short(out.other.identity), ", is now ",
                              Short(other_now->identity)));
  }
  if (String(record, "questions_lock_sha") != lock_sha) {
    return stale(absl::StrCat("measured under questions lock ",
                              String(record, "questions_lock_sha").substr(0, 8),
                              ", the lock is now ", lock_sha.substr(0, 8)));
  }
  const Json& questions = record["questions"];
  if (!questions.contains(question_id)) {
    out.verdict = "n/a";
    out.why = "not measured";
    return out;
  }
  const Json& q = questions[question_id];
  if (q["key"] != live_key) {
    return stale(absl::StrCat(
        "measured for key ", q["key"].get<std::string>().substr(0, 12),
        ", the question's key is now ", live_key.substr(0, 12)));
  }
  if (labels_sha256_now != nullptr &&
      q["labels_sha256"] != *labels_sha256_now) {
    return stale("the question's labels changed since (labels_sha256 " +
                 q["labels_sha256"].get<std::string>().substr(0, 12) + " -> " +
                 labels_sha256_now->substr(0, 12) + ")");
  }
  out.verdict = q["verdict"].get<std::string>();
  return out;
}

AgreementLookup FindAgreement(const std::vector<StoredAgreement>& records,
                              const ModelBinding& self,
                              const ModelBinding& other,
                              const std::string& lock_sha,
                              const std::string& question_id,
                              const std::string& live_key,
                              const std::string* labels_sha256_now) {
  AgreementLookup out;
  out.why_not = absl::StrCat("no agreement record between '", self.model,
                             "' and '", other.model, "'");
  for (const StoredAgreement& stored : records) {
    if (!stored.record.ok()) continue;
    const std::vector<RecordedModel> models = RecordedModels(*stored.record);
    const int at = SelfIndex(models, self);
    if (at < 0 || models[1 - at].model != other.model) continue;
    const Standing standing =
        StandingOf(*stored.record, self, &other, lock_sha, question_id,
                   live_key, labels_sha256_now);
    if (standing.unlocks()) {
      out.record = *stored.record;
      out.path = stored.path;
      out.why_not.clear();
      return out;
    }
    out.why_not = absl::StrCat(
        "the agreement record ", stored.path, " says ", standing.verdict,
        " for ", question_id,
        standing.why.empty() ? "" : absl::StrCat(": ", standing.why));
  }
  return out;
}

}  // namespace mesa_anyjev::bundles
