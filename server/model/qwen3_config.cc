#include "server/model/qwen3_config.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/text/strict_json.h"

namespace mesa_anyjev::model {
namespace {

using nlohmann::json;

class Reader {
 public:
  Reader(const json& doc, std::string source)
      : doc_(doc), source_(std::move(source)) {}

  absl::Status Error(const std::string& key, const std::string& why) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": ", key, ": ", why));
  }

  // A required positive integer.
  absl::StatusOr<int64_t> Positive(const std::string& key) const {
    const auto it = doc_.find(key);
    if (it == doc_.end()) return Error(key, "missing");
    if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
      return Error(
          key, absl::StrCat("must be a positive integer, not ", it->dump()));
    }
    return it->get<int64_t>();
  }

  const json* Find(const std::string& key) const {
    const auto it = doc_.find(key);
    return it == doc_.end() || it->is_null() ? nullptr : &*it;
  }

 private:
  const json& doc_;
  std::string source_;
};

}  // namespace

absl::StatusOr<Qwen3Config> Qwen3Config::FromJson(std::string_view text,
                                                  std::string_view source) {
  const std::string src(source);
  auto parsed = text::ParseStrictJson(text, {});
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(src, ": ", parsed.status().message()));
  }
  const json doc = *std::move(parsed);
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(src, ": not a JSON object"));
  }
  Reader r(doc, src);

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

  Qwen3Config c;
  auto set = [&](int64_t& field, const char* key) -> absl::Status {
    auto value = r.Positive(key);
    if (!value.ok()) return value.status();
    field = *value;
    return absl::OkStatus();
  };
  for (auto [field, key] : {std::pair{&c.vocab_size, "vocab_size"},
                            {&c.hidden_size, "hidden_size"},
                            {&c.intermediate_size, "intermediate_size"},
                            {&c.num_hidden_layers, "num_hidden_layers"},
                            {&c.num_attention_heads, "num_attention_heads"}}) {
    if (absl::Status s = set(*field, key); !s.ok()) return s;
  }
  c.num_key_value_heads = c.num_attention_heads;  // transformers' default
  if (r.Find("num_key_value_heads") != nullptr) {
    if (absl::Status s = set(c.num_key_value_heads, "num_key_value_heads");
        !s.ok()) {
      return s;
    }
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return r.Error("num_key_value_heads",
                   absl::StrCat(c.num_key_value_heads,
                                " does not divide num_attention_heads=",
                                c.num_attention_heads));
  }
  if (r.Find("head_dim") != nullptr) {
    if (absl::Status s = set(c.head_dim, "head_dim"); !s.ok()) return s;
  } else {
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) {
    return r.Error("head_dim", "must be even for rotary embeddings");
  }

  if (const json* eps = r.Find("rms_norm_eps")) {
    if (!eps->is_number() || eps->get<double>() <= 0) {
      return r.Error("rms_norm_eps", "must be a positive number");
    }
    c.rms_norm_eps = eps->get<double>();
  }
  // transformers 5 writes rope_parameters {rope_type, rope_theta}; 4.x writes
  // rope_theta and rope_scaling at the top level.
  const json* rope = r.Find("rope_parameters");
  const json* scaling = r.Find("rope_scaling");
  if (rope != nullptr && !rope->is_object()) {
    return r.Error("rope_parameters", "must be an object");
  }
  for (const json* params : {rope, scaling}) {
    if (params == nullptr) continue;
    const std::string key = params == rope ? "rope_parameters" : "rope_scaling";
    const auto type = params->find("rope_type");
    const auto legacy = params->find("type");
    const json* kind = type != params->end()     ? &*type
                       : legacy != params->end() ? &*legacy
                                                 : nullptr;
    if (kind != nullptr && *kind != "default") {
      return r.Error(key, absl::StrCat("RoPE scaling ", kind->dump(),
                                       " is not supported (only default)"));
    }
    if (kind == nullptr && params == scaling) {
      return r.Error(key, "RoPE scaling without a type is not supported");
    }
  }
  const json* theta = rope != nullptr && rope->contains("rope_theta")
                          ? &(*rope)["rope_theta"]
                          : r.Find("rope_theta");
  if (theta != nullptr) {
    if (!theta->is_number() || theta->get<double>() <= 0) {
      return r.Error("rope_theta", "must be a positive number");
    }
    c.rope_theta = theta->get<double>();
  }

  if (const json* tie = r.Find("tie_word_embeddings")) {
    if (!tie->is_boolean())
      return r.Error("tie_word_embeddings", "must be a boolean");
    c.tie_word_embeddings = tie->get<bool>();
  }
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
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (const json* d = r.Find(key); d && d->is_string()) {
      c.torch_dtype = d->get<std::string>();
    }
  }
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
