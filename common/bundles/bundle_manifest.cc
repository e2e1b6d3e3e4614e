#include "common/bundles/bundle_manifest.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/text/strict_json.h"

namespace mesa_anyjev::bundles {
namespace {

constexpr double kGateEpsilon = 1e-9;

std::string StringField(const Json& manifest, const char* name) {
  return manifest.contains(name) && manifest[name].is_string()
             ? manifest[name].get<std::string>()
             : std::string();
}

}  // namespace

std::string ModelSlug(std::string_view model) {
  return absl::StrReplaceAll(std::string(model), {{"/", "__"}});
}

absl::Status CheckQuestionId(std::string_view question_id) {
  bool ok = !question_id.empty() && question_id.size() <= 128 &&
            question_id[0] != '.';
  for (const char c : question_id) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "question_id '", std::string(question_id.substr(0, 160)),
      "': 1..128 characters of [A-Za-z0-9._-], not starting with '.'"));
}

absl::StatusOr<Json> ParseJsonLimited(std::string_view bytes,
                                      std::string_view what) {
  // Sizes are checked by the callers (limits.max_bundle_bytes).
  auto parsed = text::ParseStrictOrderedJson(
      bytes, {.max_bytes = bytes.size(), .max_bytes_name = "its size"});
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(what), ": ", parsed.status().message()));
  }
  return parsed;
}

absl::Status CheckBinding(const Json& manifest, const ModelBinding& serving,
                          std::string_view lock_sha,
                          const std::map<std::string, std::string>* live_keys) {
  const std::string model = StringField(manifest, "model");
  const std::string identity = StringField(manifest, "model_identity");
  if (model != serving.model ||
      (!identity.empty() && !serving.identity.empty() &&
       identity != serving.identity)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "bundle was fit on model '", model, "' (identity ",
        identity.empty() ? "unknown" : identity, "), the serving model is '",
        serving.model, "' (identity ",
        serving.identity.empty() ? "unknown" : serving.identity,
        "); another model's bundle loads only through `mesa-anyjev bundles "
        "adopt`, once `mesa-anyjev bench compare` shows the two agree on the "
        "question"));
  }
  const std::string lock = StringField(manifest, "questions_lock_sha");
  if (lock == lock_sha || live_keys == nullptr) return absl::OkStatus();
  std::set<std::string> live;
  for (const auto& [id, key] : *live_keys) live.insert(key);
  std::vector<std::string> stale;
  if (manifest.contains("per_question") &&
      manifest["per_question"].is_object()) {
    for (const auto& [id, entry] : manifest["per_question"].items()) {
      const std::string key =
          entry.is_object() && entry.contains("key") && entry["key"].is_string()
              ? entry["key"].get<std::string>()
              : std::string();
      if (!live.contains(key)) {
        stale.push_back(absl::StrCat(id, ":", key.substr(0, 12)));
      }
    }
  }
  if (stale.empty()) return absl::OkStatus();
  std::sort(stale.begin(), stale.end());
  return absl::FailedPreconditionError(absl::StrCat(
      "artifact was fit under a different questions.lock.json and these "
      "question keys no longer exist: ",
      absl::StrJoin(stale, ", "), " (DESIGN D7/D24)"));
}

std::optional<Loco> LocoOf(const Json& manifest,
                           const std::string& question_id) {
  if (!manifest.contains("validation") || !manifest["validation"].is_object() ||
      !manifest["validation"].contains(question_id)) {
    return std::nullopt;
  }
  const Json& v = manifest["validation"][question_id];
  if (!v.is_object() || !v.contains("loco") || !v["loco"].is_object()) {
    return std::nullopt;
  }
  const Json& loco = v["loco"];
  if (!loco.contains("acc") || !loco["acc"].is_number() ||
      !loco.contains("ece") || !loco["ece"].is_number()) {
    return std::nullopt;
  }
  return Loco{loco["acc"].get<double>(), loco["ece"].get<double>()};
}

absl::Status PromoteGate(int version, const Json& manifest,
                         std::optional<int> current,
                         const Json* current_manifest,
                         const std::string& question_id) {
  const std::optional<Loco> fresh = LocoOf(manifest, question_id);
  if (!fresh.has_value()) {
    // The reference skips the gate here, so a --no-loco fit could
    // replace a validated one unchecked.
    return absl::FailedPreconditionError(
        absl::StrCat("v", version, " has no LOCO figures for ", question_id,
                     "; the promote gate cannot pass it (force to override)"));
  }
  if (!current.has_value() || *current == version ||
      current_manifest == nullptr) {
    return absl::OkStatus();
  }
  const std::optional<Loco> old = LocoOf(*current_manifest, question_id);
  if (!old.has_value()) return absl::OkStatus();  // nothing to regress from
  if (fresh->acc < old->acc - kGateEpsilon ||
      fresh->ece > old->ece + kGateEpsilon) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "v%d regresses against v%d: acc %.3f vs %.3f, ece %.3f vs %.3f",
        version, *current, fresh->acc, old->acc, fresh->ece, old->ece));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> QuestionKey(int version, const Json& manifest,
                                        const std::string& question_id) {
  if (manifest.contains("per_question") &&
      manifest["per_question"].is_object() &&
      manifest["per_question"].contains(question_id)) {
    const Json& entry = manifest["per_question"][question_id];
    if (entry.is_object() && entry.contains("key") &&
        entry["key"].is_string()) {
      return entry["key"].get<std::string>();
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "v", version, " has no artifact for question ", question_id));
}

}  // namespace mesa_anyjev::bundles
