// What a bundle version's manifest.json says and the rules read from it
// (docs/bundles.md): the model binding, stale question keys, the LOCO
// figures and the promote gate. Pure functions over JSON.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::bundles {

using Json = nlohmann::ordered_json;

// The model a store serves: its id ("fake", "Qwen/Qwen3-8B") and the sha256
// fingerprint GetModelInfo reports; an empty identity (the gateway has none)
// is not compared.
struct ModelBinding {
  std::string model;
  std::string identity;
};

// The model id with "/" -> "__" (the anyjev-heads convention).
std::string ModelSlug(std::string_view model);

// A question id usable as a pointer file name: 1..128 of [A-Za-z0-9._-],
// not starting with '.'.
absl::Status CheckQuestionId(std::string_view question_id);

// A bundle's JSON through the strict parser (text/strict_json.h: depth,
// UTF-8, duplicate keys); INVALID_ARGUMENT naming `what`.
absl::StatusOr<Json> ParseJsonLimited(std::string_view bytes,
                                      std::string_view what);

// Whether a manifest may be served by `serving` under the lock `lock_sha`:
// FAILED_PRECONDITION naming both models (or both identities) when they
// differ; when the manifest's questions_lock_sha differs from `lock_sha` and
// `live_keys` (question id -> key of the caller's question set) is given,
// refused naming every per_question key no live question produces (a
// differing lock whose keys are all live is accepted: a bundle stays valid
// while every question it was fit for still exists).
absl::Status CheckBinding(const Json& manifest, const ModelBinding& serving,
                          std::string_view lock_sha,
                          const std::map<std::string, std::string>* live_keys);

// The pooled leave-one-card-out figures of `question_id`
// (validation.<q>.loco.acc / .ece), when the version carries both.
struct Loco {
  double acc = 0;
  double ece = 0;
};
std::optional<Loco> LocoOf(const Json& manifest,
                           const std::string& question_id);

// The promote gate: a version without LOCO figures for the question is
// refused (the reference let it through, so an unvalidated fit could replace
// a validated one); against a current version C != N that has
// them, N is refused when acc drops by more than 1e-9 or ECE rises by more
// than 1e-9, as "v<N> regresses against v<C>: acc <new:.3f> vs <old:.3f>,
// ece <new:.3f> vs <old:.3f>". FAILED_PRECONDITION with that message.
absl::Status PromoteGate(int version, const Json& manifest,
                         std::optional<int> current,
                         const Json* current_manifest,
                         const std::string& question_id);

// The per_question entry's key, or FAILED_PRECONDITION when the version has
// nothing for the question.
absl::StatusOr<std::string> QuestionKey(int version, const Json& manifest,
                                        const std::string& question_id);

}  // namespace mesa_anyjev::bundles
