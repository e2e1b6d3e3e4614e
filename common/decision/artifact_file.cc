// Parsing and writing the heads/export file (see artifact_file.h).
#include "common/decision/artifact_file.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decision/py_json.h"
#include "common/status/status_macros.h"
#include "common/text/json_numbers.h"
#include "common/util/hash.h"

namespace mesa_anyjev::decision {

namespace {

using Json = nlohmann::ordered_json;

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

// `status`'s message behind `where`, as INVALID_ARGUMENT: what a malformed
// entry gets.
absl::Status Malformed(const std::string& where, const absl::Status& status) {
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", status.message()));
}

// Refused when `json` names a model other than `model`; `what` says whose
// ("artifact was", "artifacts were").
absl::Status CheckModelName(const Json& json, const std::string& model,
                            const char* what) {
  if (json.contains("model") && !json["model"].is_null() &&
      json["model"] != model) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " fit on ", json["model"].dump(), ", the model is '",
                     model, "'"));
  }
  return absl::OkStatus();
}

// A file's section `name` when it is an object, else an empty one.
const Json& Section(const Json& file, const char* name) {
  static const Json* const empty = new Json(Json::object());
  return file.contains(name) && file[name].is_object() ? file[name] : *empty;
}

// An L1 artifact: a temperature, the one method with a loader.
absl::StatusOr<std::shared_ptr<const TemperatureScaler>> ParseTemperature(
    const Json& art) {
  const std::string method =
      art.is_object() ? art.value("method", std::string()) : std::string();
  if (!method.empty() && method.substr(0, method.find(':')) != "temperature") {
    return absl::InvalidArgumentError(absl::StrCat(
        "method '", method, "' has no loader (known: temperature)"));
  }
  ASSIGN_OR_RETURN(TemperatureScaler scaler, TemperatureScaler::FromJson(art));
  return std::make_shared<const TemperatureScaler>(std::move(scaler));
}

// The question a head is loaded for, as the caller knows it.
HeadEntry DescribedBy(const Question& question) {
  HeadEntry about;
  about.question_id = question.id();
  about.kind = question.kind();
  about.text = question.text();
  about.options = question.options();
  return about;
}

// The question a heads-file entry says it was fit on; the file's key stands
// in for an id it does not name.
HeadEntry DescribedByEntry(const Json& art, const std::string& key) {
  HeadEntry about;
  about.question_id = key;
  if (art.contains("kind") && art["kind"].is_string()) {
    const auto kind = ParseQuestionKind(art["kind"].get<std::string>());
    if (kind.ok()) about.kind = *kind;
  }
  if (art.contains("text") && art["text"].is_string()) {
    about.text = art["text"].get<std::string>();
  }
  if (art.contains("options") && art["options"].is_array()) {
    about.options = art["options"].get<std::vector<std::string>>();
  }
  return about;
}

// A head entry: the head, its block and the question `about` describes (the
// entry's own "question_id" wins), checked against the served model: its
// width against the hidden size, its K against the options when known.
absl::StatusOr<HeadEntry> ParseHead(const Json& art, const Capabilities& caps,
                                    HeadEntry about) {
  ASSIGN_OR_RETURN(about.head, LinearHead::FromJson(art));
  ASSIGN_OR_RETURN(about.layer_abs, LayerAbs(art, caps));
  if (art.contains("question_id") && art["question_id"].is_string()) {
    about.question_id = art["question_id"].get<std::string>();
  }
  const int k =
      about.options.has_value() ? static_cast<int>(about.options->size()) : 0;
  RETURN_IF_ERROR(CheckHeadShape(about.head, caps, k));
  return about;
}

// One asked key's label-free adaptation statistics.
absl::StatusOr<AdaptationStats> ParseAdaptation(const Json& stats) {
  // operator[] on a const value must not meet a missing key.
  const auto field = [&stats](const char* name) {
    return stats.is_object() && stats.contains(name) ? stats.at(name) : Json();
  };
  auto sum = DecodeArray(field("sum"));
  auto sumsq = DecodeArray(field("sumsq"));
  if (!sum.ok() || !sumsq.ok() || sum->values.size() != sumsq->values.size()) {
    return absl::InvalidArgumentError("malformed sum or sumsq");
  }
  const int64_t n = stats.value("n", int64_t{-1});
  if (n < 0) return absl::InvalidArgumentError("no non-negative \"n\"");
  return AdaptationStats{sum->values, sumsq->values, n};
}

absl::StatusOr<LoadedObservations> ParseObservations(const std::string& key,
                                                     const Json& r) {
  LoadedObservations loaded;
  loaded.key = key;
  const std::string kind_name = r.contains("kind") && r["kind"].is_string()
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
    for (const auto& s : r["states"]) loaded.states.push_back(StateText(s));
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
  return loaded;
}

}  // namespace

absl::StatusOr<LoadedArtifacts> ParseArtifact(
    const Backend& model, const Question& question,
    const nlohmann::ordered_json& artifact) {
  if (!artifact.is_object()) {
    return absl::InvalidArgumentError("an artifact must be a JSON object");
  }
  RETURN_IF_ERROR(
      CheckModelName(artifact, model.identity().name, "artifact was"));
  const std::string& key = question.key();
  // A head, and an L1 artifact's frozen prior, are indexed by the layout
  // (shift, position) they were fit on; temperature-only artifacts load
  // anywhere.
  const bool other_layout = artifact.contains("question") &&
                            !artifact["question"].is_null() &&
                            artifact["question"] != key;
  LoadedArtifacts loaded;
  try {
    if (artifact.value("method", std::string()).rfind("head:", 0) == 0) {
      if (other_layout) {
        return absl::FailedPreconditionError(absl::StrCat(
            "head artifact was fit on a different question layout (",
            artifact["question"].dump(), " != ", key,
            "); fit a head for this one"));
      }
      auto entry =
          ParseHead(artifact, model.capabilities(), DescribedBy(question));
      if (!entry.ok()) return Malformed("head artifact", entry.status());
      loaded.heads.emplace_back(key, Versioned(model, key, *std::move(entry)));
      return loaded;
    }
    if (artifact.contains("prior") && !artifact["prior"].is_null() &&
        other_layout) {
      return absl::FailedPreconditionError(absl::StrCat(
          "artifact carries a prior fit on a different question layout (",
          artifact["question"].dump(), " != ", key,
          "); calibrate this layout"));
    }
    auto scaler = ParseTemperature(artifact);
    if (!scaler.ok()) return Malformed("artifact", scaler.status());
    loaded.artifacts.emplace_back(key, *std::move(scaler));
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact: malformed: ", e.what()));
  }
  return loaded;
}

absl::StatusOr<LoadedArtifacts> ParseArtifactsFile(
    const Backend& model, const nlohmann::ordered_json& file) {
  if (!file.is_object()) {
    return absl::InvalidArgumentError("an artifacts file is a JSON object");
  }
  RETURN_IF_ERROR(
      CheckModelName(file, model.identity().name, "artifacts were"));
  const Capabilities& caps = model.capabilities();
  RETURN_IF_ERROR(CheckFileModel(file, model.identity(), caps));
  LoadedArtifacts loaded;
  try {
    for (const auto& [key, art] : Section(file, "artifacts").items()) {
      auto scaler = ParseTemperature(art);
      if (!scaler.ok()) {
        return Malformed(absl::StrCat("artifacts.", key), scaler.status());
      }
      loaded.artifacts.emplace_back(key, *std::move(scaler));
    }
    for (const auto& [key, art] : Section(file, "heads").items()) {
      auto entry = ParseHead(art, caps, DescribedByEntry(art, key));
      if (!entry.ok()) {
        return Malformed(absl::StrCat("heads.", key), entry.status());
      }
      loaded.heads.emplace_back(key, Versioned(model, key, *std::move(entry)));
    }
    for (const auto& [key, stats] : Section(file, "adaptation").items()) {
      auto parsed = ParseAdaptation(stats);
      if (!parsed.ok()) {
        return Malformed(absl::StrCat("adaptation.", key), parsed.status());
      }
      loaded.adaptation.emplace_back(key, *std::move(parsed));
    }
    for (const auto& [key, r] : Section(file, "observations").items()) {
      ASSIGN_OR_RETURN(LoadedObservations observations,
                       ParseObservations(key, r));
      loaded.observations.push_back(std::move(observations));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifacts file: malformed: ", e.what()));
  }
  return loaded;
}

nlohmann::ordered_json FileModelFields(const Backend& model) {
  Json out;
  out["model"] = model.identity().name;
  const Capabilities& caps = model.capabilities();
  if (!model.identity().identity.empty()) {
    out["model_identity"] = model.identity().identity;
  }
  if (caps.hidden_states) {
    out["n_blocks"] = caps.n_layers;
    out["hidden_size"] = caps.hidden_size;
  }
  return out;
}

nlohmann::ordered_json L1ArtifactJson(const Backend& model,
                                      const std::string& key,
                                      const TemperatureScaler& scaler) {
  Json out;
  out["model"] = model.identity().name;
  out["question"] = key;
  const Json body = scaler.ToJson();
  for (const auto& [field, value] : body.items()) out[field] = value;
  return out;
}

nlohmann::ordered_json HeadArtifactJson(const Backend& model,
                                        const std::string& key,
                                        const HeadEntry& entry) {
  Json out;
  out["model"] = model.identity().name;
  out["question"] = key;
  out["question_id"] = entry.question_id;
  out["kind"] = entry.kind.has_value() ? Json(QuestionKindName(*entry.kind))
                                       : Json(nullptr);
  out["text"] = entry.text.has_value() ? Json(*entry.text) : Json(nullptr);
  out["options"] =
      entry.options.has_value() ? Json(*entry.options) : Json(nullptr);
  out["layer_abs"] = entry.layer_abs;
  out["n_blocks"] = model.capabilities().n_layers;
  out["hidden_size"] = entry.head.w.rows();
  const Json body = entry.head.ToJson();
  for (const auto& [k, v] : body.items()) out[k] = v;
  return out;
}

std::shared_ptr<const HeadEntry> Versioned(const Backend& model,
                                           const std::string& key,
                                           HeadEntry entry) {
  entry.version.clear();
  entry.version =
      util::Sha256Hex(HeadArtifactJson(model, key, entry).dump()).substr(0, 16);
  return std::make_shared<const HeadEntry>(std::move(entry));
}

nlohmann::ordered_json AdaptationJson(const AdaptationStats& stats) {
  const std::vector<int64_t> shape = {static_cast<int64_t>(stats.sum.size())};
  Json out;
  out["sum"] = EncodeArray(stats.sum, shape);
  out["sumsq"] = EncodeArray(stats.sumsq, shape);
  out["n"] = stats.n;
  return out;
}

}  // namespace mesa_anyjev::decision
