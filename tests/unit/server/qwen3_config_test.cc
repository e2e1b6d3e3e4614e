// Qwen3Config::FromJson over config.json variants: every refusal with its
// exact message, the order the checks run in, transformers' defaults and the
// two RoPE layouts (4.x top-level keys, 5.x rope_parameters).
#include "server/model/qwen3_config.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::model {
namespace {

using Catch::Contains;
using nlohmann::json;

constexpr char kSource[] = "c.json";

// A config every check accepts, with every optional key present.
json Valid() {
  return {
      {"architectures", {"Qwen3ForCausalLM"}},
      {"model_type", "qwen3"},
      {"vocab_size", 151},
      {"hidden_size", 64},
      {"intermediate_size", 96},
      {"num_hidden_layers", 2},
      {"num_attention_heads", 4},
      {"num_key_value_heads", 2},
      {"head_dim", 16},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 1000000.0},
      {"tie_word_embeddings", true},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"use_sliding_window", false},
      {"layer_types", {"full_attention", "full_attention"}},
      {"torch_dtype", "bfloat16"},
  };
}

absl::StatusOr<Qwen3Config> Parse(const json& config) {
  return Qwen3Config::FromJson(config.dump(), kSource);
}

// `config` is refused with INVALID_ARGUMENT and exactly `expected`.
void CheckRefused(const json& config, const std::string& expected) {
  const auto parsed = Parse(config);
  REQUIRE_FALSE(parsed.ok());
  CHECK(absl::IsInvalidArgument(parsed.status()));
  CHECK(std::string(parsed.status().message()) == expected);
}

struct Refusal {
  std::string key;
  json value;  // null: the key is removed
  std::string expected;
};

void CheckRefusals(const std::vector<Refusal>& cases) {
  for (const Refusal& c : cases) {
    INFO(c.key << " = " << c.value.dump());
    json config = Valid();
    if (c.value.is_null()) {
      config.erase(c.key);
    } else {
      config[c.key] = c.value;
    }
    CheckRefused(config, c.expected);
  }
}

TEST_CASE("qwen3 config: a complete config.json", "[qwen3_config]") {
  const auto parsed = Parse(Valid());
  REQUIRE(parsed.ok());
  const Qwen3Config& c = *parsed;
  CHECK(c.vocab_size == 151);
  CHECK(c.hidden_size == 64);
  CHECK(c.intermediate_size == 96);
  CHECK(c.num_hidden_layers == 2);
  CHECK(c.num_attention_heads == 4);
  CHECK(c.num_key_value_heads == 2);
  CHECK(c.head_dim == 16);
  CHECK(c.rms_norm_eps == 1e-5);
  CHECK(c.rope_theta == 1000000.0);
  CHECK(c.tie_word_embeddings);
  CHECK(c.torch_dtype == "bfloat16");
  // embed 151 x 64 once (tied), 2 layers of 30880, the final norm.
  CHECK(c.ParameterCount() == 151 * 64 + 2 * 30880 + 64);
}

TEST_CASE("qwen3 config: transformers' defaults for absent or null keys",
          "[qwen3_config]") {
  const json minimal = {
      {"architectures", {"Qwen3ForCausalLM"}},
      {"vocab_size", 10},
      {"hidden_size", 48},
      {"intermediate_size", 8},
      {"num_hidden_layers", 1},
      {"num_attention_heads", 4},
  };
  for (const bool with_nulls : {false, true}) {
    INFO("optional keys null: " << with_nulls);
    json config = minimal;
    if (with_nulls) {
      for (const char* key :
           {"model_type", "num_key_value_heads", "head_dim", "rms_norm_eps",
            "rope_parameters", "rope_scaling", "rope_theta",
            "tie_word_embeddings", "hidden_act", "attention_bias",
            "use_sliding_window", "layer_types", "dtype", "torch_dtype"}) {
        config[key] = nullptr;
      }
    }
    const auto parsed = Parse(config);
    REQUIRE(parsed.ok());
    CHECK(parsed->num_key_value_heads == 4);  // = num_attention_heads
    CHECK(parsed->head_dim == 12);            // = hidden / heads
    CHECK(parsed->rms_norm_eps == 1e-6);
    CHECK(parsed->rope_theta == 10000.0);
    CHECK_FALSE(parsed->tie_word_embeddings);
    CHECK(parsed->torch_dtype.empty());
  }
}

TEST_CASE("qwen3 config: RoPE in either layout", "[qwen3_config]") {
  json config = Valid();
  SECTION("rope_parameters' theta wins over the top-level one") {
    config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}};
    REQUIRE(Parse(config).ok());
    CHECK(Parse(config)->rope_theta == 5e5);
  }
  SECTION("rope_parameters without a theta falls back to the top level") {
    config["rope_parameters"] = json::object();
    REQUIRE(Parse(config).ok());
    CHECK(Parse(config)->rope_theta == 1000000.0);
  }
  SECTION("rope_scaling of the default type") {
    config["rope_scaling"] = {{"type", "default"}};
    CHECK(Parse(config).ok());
    config["rope_scaling"] = {{"rope_type", "default"}, {"type", "yarn"}};
    CHECK(Parse(config).ok());  // rope_type is read before the legacy type
  }
}

TEST_CASE("qwen3 config: the saved dtype is informational", "[qwen3_config]") {
  json config = Valid();
  config["dtype"] = "float32";
  CHECK(Parse(config)->torch_dtype == "bfloat16");  // torch_dtype is read last
  config.erase("torch_dtype");
  CHECK(Parse(config)->torch_dtype == "float32");
  config["dtype"] = 16;
  CHECK(Parse(config)->torch_dtype.empty());  // not a string: ignored
}

TEST_CASE("qwen3 config: a config no machine holds saturates the count",
          "[qwen3_config]") {
  json config = Valid();
  config["vocab_size"] = std::numeric_limits<int64_t>::max();
  CHECK(Parse(config)->ParameterCount() == std::numeric_limits<int64_t>::max());
}

TEST_CASE("qwen3 config: not a JSON object", "[qwen3_config]") {
  const auto broken = Qwen3Config::FromJson("{", kSource);
  REQUIRE(absl::IsInvalidArgument(broken.status()));
  CHECK_THAT(std::string(broken.status().message()),
             Contains("c.json: not valid JSON"));
  const auto duplicate =
      Qwen3Config::FromJson("{\"vocab_size\": 1, \"vocab_size\": 2}", kSource);
  REQUIRE(absl::IsInvalidArgument(duplicate.status()));
  CHECK(std::string(duplicate.status().message()) ==
        "c.json: duplicate key 'vocab_size'");
  const auto array = Qwen3Config::FromJson("[]", kSource);
  REQUIRE(absl::IsInvalidArgument(array.status()));
  CHECK(std::string(array.status().message()) == "c.json: not a JSON object");
}

TEST_CASE("qwen3 config: only Qwen3ForCausalLM", "[qwen3_config]") {
  const std::string only =
      "c.json: architectures: only [\"Qwen3ForCausalLM\"] is supported, not ";
  CheckRefusals({
      {"architectures", nullptr, only + "none"},
      {"architectures", {"LlamaForCausalLM"}, only + "[\"LlamaForCausalLM\"]"},
      {"architectures", "Qwen3ForCausalLM", only + "\"Qwen3ForCausalLM\""},
      {"architectures",
       {"Qwen3ForCausalLM", "Qwen3ForCausalLM"},
       only + "[\"Qwen3ForCausalLM\",\"Qwen3ForCausalLM\"]"},
      {"architectures", json::array(), only + "[]"},
      {"model_type", "llama",
       "c.json: model_type: expected \"qwen3\", not \"llama\""},
  });
  json config = Valid();
  config["architectures"] = nullptr;
  CheckRefused(config, only + "none");
}

TEST_CASE("qwen3 config: sizes are positive integers", "[qwen3_config]") {
  CheckRefusals({
      {"vocab_size", nullptr, "c.json: vocab_size: missing"},
      {"hidden_size", nullptr, "c.json: hidden_size: missing"},
      {"intermediate_size", nullptr, "c.json: intermediate_size: missing"},
      {"num_hidden_layers", nullptr, "c.json: num_hidden_layers: missing"},
      {"num_attention_heads", nullptr, "c.json: num_attention_heads: missing"},
      {"hidden_size", 0,
       "c.json: hidden_size: must be a positive integer, not 0"},
      {"intermediate_size", -1,
       "c.json: intermediate_size: must be a positive integer, not -1"},
      {"num_hidden_layers", "2",
       "c.json: num_hidden_layers: must be a positive integer, not \"2\""},
      {"num_attention_heads", 4.0,
       "c.json: num_attention_heads: must be a positive integer, not 4.0"},
      {"vocab_size", std::numeric_limits<uint64_t>::max(),
       "c.json: vocab_size: must be a positive integer, not "
       "18446744073709551615"},
      {"num_key_value_heads", 0,
       "c.json: num_key_value_heads: must be a positive integer, not 0"},
      {"num_key_value_heads", 3,
       "c.json: num_key_value_heads: 3 does not divide num_attention_heads=4"},
      {"head_dim", -2, "c.json: head_dim: must be a positive integer, not -2"},
      {"head_dim", 15, "c.json: head_dim: must be even for rotary embeddings"},
  });
  // A present-but-null size is not "missing": it is the wrong type.
  json config = Valid();
  config["vocab_size"] = nullptr;
  CheckRefused(config,
               "c.json: vocab_size: must be a positive integer, not null");
  // head_dim derived from hidden / heads is checked too.
  config = Valid();
  config.erase("head_dim");
  config["hidden_size"] = 60;
  CheckRefused(config, "c.json: head_dim: must be even for rotary embeddings");
  // ... and a derived head_dim of 0 (fewer hidden units than heads) is not
  // a head.
  config["hidden_size"] = 3;
  CheckRefused(config,
               "c.json: head_dim: absent, and hidden_size 3 / "
               "num_attention_heads 4 is 0");
}

TEST_CASE("qwen3 config: norms and RoPE", "[qwen3_config]") {
  const std::string theta = "c.json: rope_theta: must be a positive number";
  CheckRefusals({
      {"rms_norm_eps", 0, "c.json: rms_norm_eps: must be a positive number"},
      {"rms_norm_eps", "1e-6",
       "c.json: rms_norm_eps: must be a positive number"},
      {"rope_parameters", json::array(),
       "c.json: rope_parameters: must be an object"},
      {"rope_parameters",
       {{"rope_type", "yarn"}, {"factor", 4.0}},
       "c.json: rope_parameters: RoPE scaling \"yarn\" is not supported "
       "(only default)"},
      {"rope_scaling",
       {{"type", "linear"}, {"factor", 2.0}},
       "c.json: rope_scaling: RoPE scaling \"linear\" is not supported "
       "(only default)"},
      {"rope_scaling",
       {{"rope_type", "dynamic"}, {"type", "default"}},
       "c.json: rope_scaling: RoPE scaling \"dynamic\" is not supported "
       "(only default)"},
      {"rope_scaling",
       {{"factor", 2.0}},
       "c.json: rope_scaling: RoPE scaling without a type is not supported"},
      {"rope_scaling", 5,
       "c.json: rope_scaling: RoPE scaling without a type is not supported"},
      {"rope_theta", 0, theta},
      {"rope_theta", "1e6", theta},
      {"rope_parameters", {{"rope_theta", -1.0}}, theta},
      {"rope_parameters", {{"rope_theta", nullptr}}, theta},
  });
}

TEST_CASE("qwen3 config: features this forward does not compute",
          "[qwen3_config]") {
  CheckRefusals({
      {"tie_word_embeddings", 1,
       "c.json: tie_word_embeddings: must be a boolean"},
      {"hidden_act", "gelu",
       "c.json: hidden_act: only \"silu\" is supported, not \"gelu\""},
      {"attention_bias", true,
       "c.json: attention_bias: attention biases are not supported"},
      {"attention_bias", 0,
       "c.json: attention_bias: attention biases are not supported"},
      {"use_sliding_window", true,
       "c.json: use_sliding_window: sliding-window attention is not "
       "supported"},
      {"layer_types",
       {"full_attention", "sliding_attention"},
       "c.json: layer_types: layer type \"sliding_attention\" is not "
       "supported"},
      {"layer_types", "sliding_attention",
       "c.json: layer_types: layer type \"sliding_attention\" is not "
       "supported"},
  });
}

// Every key broken at once, then repaired one at a time: each refusal names
// the next key, so the checks run in exactly this order.
TEST_CASE("qwen3 config: checks run in a fixed order", "[qwen3_config]") {
  const std::vector<std::pair<std::string, json>> broken = {
      {"architectures", {"X"}},
      {"model_type", "llama"},
      {"vocab_size", 0},
      {"hidden_size", 0},
      {"intermediate_size", 0},
      {"num_hidden_layers", 0},
      {"num_attention_heads", 0},
      {"num_key_value_heads", 3},
      {"head_dim", 15},
      {"rms_norm_eps", 0},
      {"rope_parameters", {{"rope_type", "yarn"}}},
      {"rope_scaling", {{"factor", 2.0}}},
      {"rope_theta", 0},
      {"tie_word_embeddings", 1},
      {"hidden_act", "gelu"},
      {"attention_bias", true},
      {"use_sliding_window", true},
      {"layer_types", {"sliding_attention"}},
  };
  const json valid = Valid();
  json config = valid;
  for (const auto& [key, value] : broken) {
    config[key] = value;
  }
  for (const auto& [key, value] : broken) {
    INFO("next: " << key);
    const auto parsed = Parse(config);
    REQUIRE_FALSE(parsed.ok());
    CHECK_THAT(std::string(parsed.status().message()),
               Catch::StartsWith("c.json: " + key + ": "));
    if (valid.contains(key)) {
      config[key] = valid[key];
    } else {
      config.erase(key);
    }
  }
  CHECK(Parse(config).ok());
}

}  // namespace
}  // namespace mesa_anyjev::model
