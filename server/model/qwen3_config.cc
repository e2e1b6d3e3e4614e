#include "server/model/qwen3_config.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/text/strict_json.h"

namespace mesa_anyjev::model {
namespace {

using nlohmann::json;

// config.json's top level, each refusal naming the file and the key.
class Reader {
 public:
  Reader(const json& doc, std::string source)
      : doc_(doc), source_(std::move(source)) {}

  absl::Status Error(const std::string& key, const std::string& why) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": ", key, ": ", why));
  }

  // The value of `key`; nullptr when it is absent or null.
  const json* Find(const std::string& key) const {
    const auto it = doc_.find(key);
    return it == doc_.end() || it->is_null() ? nullptr : &*it;
  }

  // A required positive integer (present but null is the wrong type).
  absl::StatusOr<int64_t> Positive(const std::string& key) const {
    const auto it = doc_.find(key);
    if (it == doc_.end()) {
      return Error(key, "missing");
    }
    if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
      return Error(
          key, absl::StrCat("must be a positive integer, not ", it->dump()));
    }
    return it->get<int64_t>();
  }

  // A positive integer, `fallback` when absent or null.
  absl::StatusOr<int64_t> Positive(const std::string& key,
                                   int64_t fallback) const {
    return Find(key) == nullptr ? fallback : Positive(key);
  }

  // `value` (the key's, wherever it was found) as a positive number,
  // `fallback` when there is none.
  absl::StatusOr<double> PositiveNumber(const std::string& key,
                                        const json* value,
                                        double fallback) const {
    if (value == nullptr) {
      return fallback;
    }
    if (!value->is_number() || value->get<double>() <= 0) {
      return Error(key, "must be a positive number");
    }
    return value->get<double>();
  }

  // A boolean, `fallback` when absent or null.
  absl::StatusOr<bool> Boolean(const std::string& key, bool fallback) const {
    const json* value = Find(key);
    if (value == nullptr) {
      return fallback;
    }
    if (!value->is_boolean()) {
      return Error(key, "must be a boolean");
    }
    return value->get<bool>();
  }

 private:
  const json& doc_;
  std::string source_;
};

absl::StatusOr<json> ParseObject(std::string_view text,
                                 const std::string& source) {
  auto parsed = text::ParseStrictJson(text, {});
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", parsed.status().message()));
  }
  if (!parsed->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a JSON object"));
  }
  return *std::move(parsed);
}

absl::Status CheckArchitecture(const Reader& r) {
  const json* archs = r.Find("architectures");
  if (archs == nullptr || !archs->is_array() || archs->size() != 1 ||
      (*archs)[0] != "Qwen3ForCausalLM") {
    return r.Error(
        "architectures",
        absl::StrCat("only [\"Qwen3ForCausalLM\"] is supported, not ",
                     archs == nullptr ? "none" : archs->dump()));
  }
  if (const json* type = r.Find("model_type"); type && *type != "qwen3") {
    return r.Error("model_type",
                   absl::StrCat("expected \"qwen3\", not ", type->dump()));
  }
  return absl::OkStatus();
}

// The network's sizes; the rest of the config keeps its defaults.
absl::StatusOr<Qwen3Config> ReadDimensions(const Reader& r) {
  Qwen3Config c;
  ASSIGN_OR_RETURN(c.vocab_size, r.Positive("vocab_size"));
  ASSIGN_OR_RETURN(c.hidden_size, r.Positive("hidden_size"));
  ASSIGN_OR_RETURN(c.intermediate_size, r.Positive("intermediate_size"));
  ASSIGN_OR_RETURN(c.num_hidden_layers, r.Positive("num_hidden_layers"));
  ASSIGN_OR_RETURN(c.num_attention_heads, r.Positive("num_attention_heads"));
  // transformers' defaults: as many KV heads as query heads, and head_dim
  // = hidden / heads (Qwen3 files state it; it is not always that).
  ASSIGN_OR_RETURN(c.num_key_value_heads,
                   r.Positive("num_key_value_heads", c.num_attention_heads));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return r.Error("num_key_value_heads",
                   absl::StrCat(c.num_key_value_heads,
                                " does not divide num_attention_heads=",
                                c.num_attention_heads));
  }
  ASSIGN_OR_RETURN(
      c.head_dim,
      r.Positive("head_dim", c.hidden_size / c.num_attention_heads));
  if (c.head_dim == 0) {
    return r.Error("head_dim",
                   absl::StrCat("absent, and hidden_size ", c.hidden_size,
                                " / num_attention_heads ",
                                c.num_attention_heads, " is 0"));
  }
  if (c.head_dim % 2 != 0) {
    return r.Error("head_dim", "must be even for rotary embeddings");
  }
  return c;
}

// A RoPE object (rope_parameters, rope_scaling) must name the default type,
// as rope_type or the legacy type; rope_parameters may also name none.
absl::Status CheckRopeType(const Reader& r, const std::string& key,
                           bool type_required) {
  const json* params = r.Find(key);
  if (params == nullptr) {
    return absl::OkStatus();
  }
  const auto type = params->find("rope_type");
  const auto legacy = params->find("type");
  const json* kind = type != params->end()     ? &*type
                     : legacy != params->end() ? &*legacy
                                               : nullptr;
  if (kind != nullptr && *kind != "default") {
    return r.Error(key, absl::StrCat("RoPE scaling ", kind->dump(),
                                     " is not supported (only default)"));
  }
  if (kind == nullptr && type_required) {
    return r.Error(key, "RoPE scaling without a type is not supported");
  }
  return absl::OkStatus();
}

// transformers 5 writes rope_parameters {rope_type, rope_theta}; 4.x writes
// rope_theta and rope_scaling at the top level. Only unscaled RoPE is
// computed here.
absl::StatusOr<double> ReadRopeTheta(const Reader& r, double fallback) {
  const json* rope = r.Find("rope_parameters");
  if (rope != nullptr && !rope->is_object()) {
    return r.Error("rope_parameters", "must be an object");
  }
  RETURN_IF_ERROR(CheckRopeType(r, "rope_parameters", /*type_required=*/false));
  RETURN_IF_ERROR(CheckRopeType(r, "rope_scaling", /*type_required=*/true));
  const json* theta = rope != nullptr && rope->contains("rope_theta")
                          ? &(*rope)["rope_theta"]
                          : r.Find("rope_theta");
  return r.PositiveNumber("rope_theta", theta, fallback);
}

// What the forward does not compute is refused by name.
absl::Status CheckSupported(const Reader& r) {
  if (const json* act = r.Find("hidden_act"); act && *act != "silu") {
    return r.Error(
        "hidden_act",
        absl::StrCat("only \"silu\" is supported, not ", act->dump()));
  }
  if (const json* bias = r.Find("attention_bias"); bias && *bias != false) {
    return r.Error("attention_bias", "attention biases are not supported");
  }
  if (const json* sliding = r.Find("use_sliding_window");
      sliding && *sliding != false) {
    return r.Error("use_sliding_window",
                   "sliding-window attention is not supported");
  }
  if (const json* types = r.Find("layer_types")) {
    for (const json& t : *types) {
      if (t != "full_attention") {
        return r.Error("layer_types", absl::StrCat("layer type ", t.dump(),
                                                   " is not supported"));
      }
    }
  }
  return absl::OkStatus();
}

// The dtype the weights were saved in, informational: "dtype"
// (transformers 5) or "torch_dtype" (4.x), the latter when both are there.
std::string SavedDType(const Reader& r) {
  std::string saved;
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (const json* d = r.Find(key); d && d->is_string()) {
      saved = d->get<std::string>();
    }
  }
  return saved;
}

}  // namespace

absl::StatusOr<Qwen3Config> Qwen3Config::FromJson(std::string_view text,
                                                  std::string_view source) {
  const std::string src(source);
  ASSIGN_OR_RETURN(const json doc, ParseObject(text, src));
  const Reader r(doc, src);
  RETURN_IF_ERROR(CheckArchitecture(r));
  ASSIGN_OR_RETURN(Qwen3Config c, ReadDimensions(r));
  ASSIGN_OR_RETURN(
      c.rms_norm_eps,
      r.PositiveNumber("rms_norm_eps", r.Find("rms_norm_eps"), c.rms_norm_eps));
  ASSIGN_OR_RETURN(c.rope_theta, ReadRopeTheta(r, c.rope_theta));
  ASSIGN_OR_RETURN(c.tie_word_embeddings,
                   r.Boolean("tie_word_embeddings", c.tie_word_embeddings));
  RETURN_IF_ERROR(CheckSupported(r));
  c.torch_dtype = SavedDType(r);
  return c;
}

int64_t Qwen3Config::ParameterCount() const {
  // In double first: a hostile config.json must not overflow the exact sum.
  const auto count = [&](auto zero) {
    using T = decltype(zero);
    const T h = static_cast<T>(hidden_size), d = static_cast<T>(head_dim);
    const T q = static_cast<T>(num_attention_heads) * d;
    const T kv = static_cast<T>(num_key_value_heads) * d;
    const T layer = 2 * h + 2 * q * h + 2 * kv * h + 2 * d +
                    3 * static_cast<T>(intermediate_size) * h;
    const T embed = static_cast<T>(vocab_size) * h;
    return embed * (tie_word_embeddings ? 1 : 2) +
           layer * static_cast<T>(num_hidden_layers) + h;
  };
  if (count(0.0) > 9e18) return std::numeric_limits<int64_t>::max();
  return count(int64_t{0});
}

}  // namespace mesa_anyjev::model
