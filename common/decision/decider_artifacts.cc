// The Decider's artifacts: loading one question's artifact or a heads/export
// file (all or nothing), and exporting them (decision-method.md 9).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decision/contextual.h"
#include "common/decision/decider.h"
#include "common/decision/decider_internal.h"
#include "common/decision/head_fit.h"
#include "common/decision/legacy_random_state.h"
#include "common/decision/py_json.h"
#include "common/status/status_macros.h"
#include "common/text/json_numbers.h"
#include "common/util/hash.h"

namespace mesa_anyjev::decision {

using decider_internal::Json;

namespace {

// The state text of an observation as stored in a file: strings as they
// are, anything else rendered as the reference's render_state would.
std::string StateText(const Json& state) {
  if (state.is_null()) return "";
  if (state.is_string()) return state.get<std::string>();
  if (state.is_array() && !state.empty()) {
    bool chat = true;
    for (const auto& m : state) {
      chat =
          chat && m.is_object() && m.contains("role") && m.contains("content");
    }
    if (chat) {
      std::vector<std::string> lines;
      for (const auto& m : state) {
        const auto field = [](const Json& v) {
          return v.is_string() ? v.get<std::string>() : PyJsonDumpsIndent2(v);
        };
        lines.push_back(
            absl::StrCat(field(m["role"]), ": ", field(m["content"])));
      }
      return absl::StrJoin(lines, "\n");
    }
  }
  return PyJsonDumpsIndent2(state);
}

// "layer_abs" of a head entry: an integer block of the served model.
absl::StatusOr<int> LayerAbs(const Json& art, const Capabilities& caps) {
  if (!art.contains("layer_abs") || !art["layer_abs"].is_number_integer()) {
    return absl::InvalidArgumentError("no integer \"layer_abs\"");
  }
  const int64_t layer = art["layer_abs"].get<int64_t>();
  const int64_t top = caps.n_layers > 0 ? caps.n_layers : INT32_MAX;
  if (layer < 0 || layer > top) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer_abs: ", layer, " is outside [0, ", top,
                     "] for the served model (n_layers=", caps.n_layers, ")"));
  }
  return static_cast<int>(layer);
}

// A head from outside, against the served model: its width must be the
// model's hidden size and its K the question's (k; 0 when unknown). A backend
// without hidden states keeps heads for export only, so their width is not
// checked there.
absl::Status CheckHeadShape(const LinearHead& head, const Capabilities& caps,
                            int k) {
  if (caps.hidden_states && caps.hidden_size > 0 &&
      head.w.rows() != caps.hidden_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "W: [", head.w.rows(), ", ", head.w.cols(),
        "] does not read the served model's hidden_size=", caps.hidden_size));
  }
  if (k > 0 && head.w.cols() != k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "W: ", head.w.cols(), " columns for a question with K=", k));
  }
  return absl::OkStatus();
}

// What a file says of the model beyond its name, checked where it says it:
// anyjev's shipped files carry n_blocks and hidden_size, our exports also
// the served model's identity (a name alone does not tell two checkpoints
// apart).
absl::Status CheckFileModel(const nlohmann::ordered_json& file,
                            const ModelIdentity& served,
                            const Capabilities& caps) {
  if (file.contains("model_identity")) {
    const auto& identity = file["model_identity"];
    if (!identity.is_string()) {
      return absl::InvalidArgumentError("model_identity must be a string");
    }
    if (!served.identity.empty() && identity != served.identity) {
      return absl::FailedPreconditionError(absl::StrCat(
          "artifacts were fit on model_identity ", identity.get<std::string>(),
          ", the served model's is ", served.identity,
          " (same name, other weights or tokenizer)"));
    }
  }
  for (const auto& [field, want] :
       {std::pair<const char*, int64_t>{"n_blocks", caps.n_layers},
        std::pair<const char*, int64_t>{"hidden_size", caps.hidden_size}}) {
    if (!file.contains(field) || want <= 0) continue;
    const auto& got = file[field];
    if (!got.is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " must be an integer"));
    }
    if (got.get<int64_t>() != want) {
      return absl::FailedPreconditionError(
          absl::StrCat("artifacts were fit on a model with ", field, "=",
                       got.get<int64_t>(), ", the served model has ", want));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Decider::LoadArtifact(const Question& question,
                                   const nlohmann::ordered_json& artifact) {
  if (!artifact.is_object()) {
    return absl::InvalidArgumentError("an artifact must be a JSON object");
  }
  if (artifact.contains("model") && !artifact["model"].is_null() &&
      artifact["model"] != model_name()) {
    return absl::FailedPreconditionError(
        absl::StrCat("artifact was fit on ", artifact["model"].dump(),
                     ", the model is '", model_name(), "'"));
  }
  const bool other_layout = artifact.contains("question") &&
                            !artifact["question"].is_null() &&
                            artifact["question"] != question.key();
  const std::string method = artifact.value("method", std::string());
  if (method.rfind("head:", 0) == 0) {
    if (other_layout) {
      return absl::FailedPreconditionError(
          absl::StrCat("head artifact was fit on a different question layout (",
                       artifact["question"].dump(), " != ", question.key(),
                       "); fit a head for this one"));
    }
    ASSIGN_OR_RETURN(LinearHead head, LinearHead::FromJson(artifact));
    const Capabilities& caps = backend_->capabilities();
    auto layer = LayerAbs(artifact, caps);
    if (!layer.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("head artifact: ", layer.status().message()));
    }
    if (absl::Status shape = CheckHeadShape(head, caps, question.k());
        !shape.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("head artifact: ", shape.message()));
    }
    HeadEntry entry;
    entry.layer_abs = *layer;
    entry.head = std::move(head);
    entry.question_id =
        artifact.contains("question_id") && artifact["question_id"].is_string()
            ? artifact["question_id"].get<std::string>()
            : question.id();
    entry.kind = question.kind();
    entry.text = question.text();
    entry.options = question.options();
    heads_.Put(question.key(), Finish(question.key(), std::move(entry)));
    return absl::OkStatus();
  }
  if (artifact.contains("prior") && !artifact["prior"].is_null() &&
      other_layout) {
    // The frozen prior is indexed by (shift, position) of the layout it was
    // fit on; temperature-only artifacts load anywhere.
    return absl::FailedPreconditionError(absl::StrCat(
        "artifact carries a prior fit on a different question layout (",
        artifact["question"].dump(), " != ", question.key(),
        "); calibrate this layout"));
  }
  const std::string family =
      method.empty() ? "temperature" : method.substr(0, method.find(':'));
  if (family != "temperature") {
    return absl::InvalidArgumentError(absl::StrCat(
        "artifact method '", method, "' has no loader (known: temperature)"));
  }
  ASSIGN_OR_RETURN(TemperatureScaler scaler,
                   TemperatureScaler::FromJson(artifact));
  absl::MutexLock lock(&mu_);
  if (!artifacts_.contains(question.key())) {
    artifact_order_.push_back(question.key());
  }
  artifacts_[question.key()] =
      std::make_shared<const TemperatureScaler>(std::move(scaler));
  return absl::OkStatus();
}

absl::StatusOr<int> Decider::LoadArtifacts(const nlohmann::ordered_json& file) {
  if (!file.is_object()) {
    return absl::InvalidArgumentError("an artifacts file is a JSON object");
  }
  if (file.contains("model") && !file["model"].is_null() &&
      file["model"] != model_name()) {
    return absl::FailedPreconditionError(
        absl::StrCat("artifacts were fit on ", file["model"].dump(),
                     ", the model is '", model_name(), "'"));
  }
  RETURN_IF_ERROR(
      CheckFileModel(file, backend_->identity(), backend_->capabilities()));
  // Parse everything first: a file is loaded whole or not at all.
  std::vector<std::pair<std::string, std::shared_ptr<const TemperatureScaler>>>
      artifacts;
  std::vector<std::pair<std::string, std::shared_ptr<const HeadEntry>>> heads;
  std::vector<std::pair<std::string, AdaptationStats>> adaptation;
  struct LoadedObservations {
    std::string key;
    std::optional<Question> question;
    std::vector<std::string> states;
    std::vector<int> labels;
    std::optional<int> fits;
    std::optional<int> next_fit;
  };
  std::vector<LoadedObservations> observations;
  try {
    if (file.contains("artifacts") && file["artifacts"].is_object()) {
      for (const auto& [key, art] : file["artifacts"].items()) {
        const std::string method =
            art.is_object() ? art.value("method", std::string("temperature"))
                            : std::string();
        const std::string family = method.substr(0, method.find(':'));
        if (family != "temperature" && !method.empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("artifacts.", key, ": method '", method,
                           "' has no loader (known: temperature)"));
        }
        auto scaler = TemperatureScaler::FromJson(art);
        if (!scaler.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("artifacts.", key, ": ", scaler.status().message()));
        }
        artifacts.emplace_back(
            key, std::make_shared<const TemperatureScaler>(*std::move(scaler)));
      }
    }
    if (file.contains("heads") && file["heads"].is_object()) {
      for (const auto& [key, art] : file["heads"].items()) {
        auto head = LinearHead::FromJson(art);
        if (!head.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("heads.", key, ": ", head.status().message()));
        }
        auto layer = LayerAbs(art, backend_->capabilities());
        if (!layer.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("heads.", key, ".", layer.status().message()));
        }
        HeadEntry entry;
        entry.head = *std::move(head);
        entry.layer_abs = *layer;
        entry.question_id =
            art.contains("question_id") && art["question_id"].is_string()
                ? art["question_id"].get<std::string>()
                : key;
        if (art.contains("kind") && art["kind"].is_string()) {
          auto kind = ParseQuestionKind(art["kind"].get<std::string>());
          if (kind.ok()) entry.kind = *kind;
        }
        if (art.contains("text") && art["text"].is_string()) {
          entry.text = art["text"].get<std::string>();
        }
        if (art.contains("options") && art["options"].is_array()) {
          entry.options = art["options"].get<std::vector<std::string>>();
        }
        const int k = entry.options.has_value()
                          ? static_cast<int>(entry.options->size())
                          : 0;
        if (absl::Status shape =
                CheckHeadShape(entry.head, backend_->capabilities(), k);
            !shape.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("heads.", key, ".", shape.message()));
        }
        heads.emplace_back(key, Finish(key, std::move(entry)));
      }
    }
    if (file.contains("adaptation") && file["adaptation"].is_object()) {
      for (const auto& [key, st] : file["adaptation"].items()) {
        // operator[] on a const value must not meet a missing key.
        const Json& stats = st;  // a lambda cannot capture a binding (clang)
        const auto field = [&stats](const char* name) {
          return stats.is_object() && stats.contains(name) ? stats.at(name)
                                                           : Json();
        };
        auto sum = DecodeArray(field("sum"));
        auto sumsq = DecodeArray(field("sumsq"));
        if (!sum.ok() || !sumsq.ok() ||
            sum->values.size() != sumsq->values.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("adaptation.", key, ": malformed sum or sumsq"));
        }
        const int64_t n = st.value("n", int64_t{-1});
        if (n < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("adaptation.", key, ": no non-negative \"n\""));
        }
        adaptation.emplace_back(key,
                                AdaptationStats{sum->values, sumsq->values, n});
      }
    }
    if (file.contains("observations") && file["observations"].is_object()) {
      for (const auto& [key, r] : file["observations"].items()) {
        LoadedObservations loaded;
        loaded.key = key;
        const std::string kind_name =
            r.contains("kind") && r["kind"].is_string()
                ? r["kind"].get<std::string>()
                : "";
        const auto kind = ParseQuestionKind(kind_name);
        if (kind.ok() && r.contains("options") && r["options"].is_array() &&
            !r["options"].empty()) {
          loaded.question = Question::FromStored(
              *kind, r.value("text", std::string()),
              r["options"].get<std::vector<std::string>>(),
              r.contains("question_id") && r["question_id"].is_string()
                  ? r["question_id"].get<std::string>()
                  : "");
        }
        if (r.contains("states")) {
          for (const auto& s : r["states"])
            loaded.states.push_back(StateText(s));
        }
        if (r.contains("labels")) {
          for (const auto& l : r["labels"]) {
            ASSIGN_OR_RETURN(
                const int64_t label,
                text::JsonInteger(l, "observations labels", 0, INT32_MAX));
            loaded.labels.push_back(static_cast<int>(label));
          }
        }
        if (loaded.labels.size() != loaded.states.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("observations.", key, ": ", loaded.labels.size(),
                           " labels for ", loaded.states.size(), " states"));
        }
        for (auto [field, into] : {std::pair{"fits", &loaded.fits},
                                   std::pair{"next_fit", &loaded.next_fit}}) {
          if (!r.contains(field)) continue;
          ASSIGN_OR_RETURN(const int64_t n,
                           text::JsonInteger(r[field], field, 0, INT32_MAX));
          *into = static_cast<int>(n);
        }
        observations.push_back(std::move(loaded));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifacts file: malformed: ", e.what()));
  }
  {
    absl::MutexLock lock(&mu_);
    // Labels index the options of the question they belong to; checked
    // before anything changes.
    for (const LoadedObservations& loaded : observations) {
      const auto it = observed_.find(loaded.key);
      const Question* question = loaded.question.has_value() ? &*loaded.question
                                 : it != observed_.end() ? &it->second->question
                                                         : nullptr;
      if (question == nullptr) continue;
      for (size_t i = 0; i < loaded.labels.size(); ++i) {
        if (loaded.labels[i] < 0 || loaded.labels[i] >= question->k()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "observations.", loaded.key, ".labels[", i,
              "]: ", loaded.labels[i],
              " is not an option index of a question with K=", question->k()));
        }
      }
    }
    for (auto& [key, scaler] : artifacts) {
      if (!artifacts_.contains(key)) artifact_order_.push_back(key);
      artifacts_[key] = std::move(scaler);
    }
    for (LoadedObservations& loaded : observations) {
      auto it = observed_.find(loaded.key);
      if (it == observed_.end()) {
        if (!loaded.question.has_value()) continue;
        it = observed_
                 .emplace(loaded.key,
                          std::make_shared<Observed>(
                              Observed{*loaded.question, {}, {}, 0, 30, false}))
                 .first;
        observed_order_.push_back(loaded.key);
      }
      Observed& rec = *it->second;
      rec.states.insert(rec.states.end(), loaded.states.begin(),
                        loaded.states.end());
      rec.labels.insert(rec.labels.end(), loaded.labels.begin(),
                        loaded.labels.end());
      if (loaded.fits.has_value()) rec.fits = *loaded.fits;
      if (loaded.next_fit.has_value()) rec.next_fit = *loaded.next_fit;
    }
  }
  for (auto& [key, entry] : heads) heads_.Put(key, std::move(entry));
  for (auto& [key, stats] : adaptation) {
    heads_.SetAdaptation(key, std::move(stats));
  }
  return static_cast<int>(artifacts.size() + heads.size());
}

absl::Status Decider::ReplaceKeyArtifacts(const std::string& key,
                                          const nlohmann::ordered_json& file) {
  if (!file.is_object()) {
    return absl::InvalidArgumentError("an artifacts file is a JSON object");
  }
  const auto holds = [&](const char* part) {
    return file.contains(part) && file[part].is_object() &&
           file[part].contains(key);
  };
  const bool has_artifact = holds("artifacts");
  const bool has_head = holds("heads");
  Json part;
  if (file.contains("model")) part["model"] = file["model"];
  part["artifacts"] = Json::object();
  part["heads"] = Json::object();
  if (has_artifact) part["artifacts"][key] = file["artifacts"][key];
  if (has_head) part["heads"][key] = file["heads"][key];
  RETURN_IF_ERROR(LoadArtifacts(part).status());
  if (!has_artifact) {
    absl::MutexLock lock(&mu_);
    if (artifacts_.erase(key) > 0) {
      artifact_order_.erase(
          std::find(artifact_order_.begin(), artifact_order_.end(), key));
    }
  }
  if (!has_head) heads_.Remove(key);
  return absl::OkStatus();
}

nlohmann::ordered_json Decider::ExportArtifacts(
    bool include_observations) const {
  Json out;
  out["model"] = model_name();
  const Capabilities& caps = backend_->capabilities();
  if (!backend_->identity().identity.empty()) {
    out["model_identity"] = backend_->identity().identity;
  }
  if (caps.hidden_states) {
    out["n_blocks"] = caps.n_layers;
    out["hidden_size"] = caps.hidden_size;
  }
  Json artifacts = Json::object();
  Json observations = Json::object();
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& key : artifact_order_) {
      Json art;
      art["model"] = model_name();
      art["question"] = key;
      const Json body = artifacts_.at(key)->ToJson();
      for (const auto& [k, v] : body.items()) art[k] = v;
      artifacts[key] = std::move(art);
    }
    if (include_observations) {
      for (const std::string& key : observed_order_) {
        const Observed& rec = *observed_.at(key);
        Json r;
        r["question_id"] = rec.question.id();
        r["kind"] = QuestionKindName(rec.question.kind());
        r["text"] = rec.question.text();
        r["options"] = rec.question.options();
        r["states"] = rec.states;
        r["labels"] = rec.labels;
        r["fits"] = rec.fits;
        r["next_fit"] = rec.next_fit;
        observations[key] = std::move(r);
      }
    }
  }
  out["artifacts"] = std::move(artifacts);
  Json heads = Json::object();
  for (const auto& [key, entry] : heads_.All()) {
    heads[key] = HeadArtifact(key, *entry);
  }
  out["heads"] = std::move(heads);
  Json adaptation = Json::object();
  for (const auto& [key, stats] : heads_.Adaptations()) {
    if (stats.n <= 0) continue;
    const std::vector<int64_t> shape = {static_cast<int64_t>(stats.sum.size())};
    Json st;
    st["sum"] = EncodeArray(stats.sum, shape);
    st["sumsq"] = EncodeArray(stats.sumsq, shape);
    st["n"] = stats.n;
    adaptation[key] = std::move(st);
  }
  if (!adaptation.empty()) out["adaptation"] = std::move(adaptation);
  if (!observations.empty()) out["observations"] = std::move(observations);
  return out;
}

}  // namespace mesa_anyjev::decision
