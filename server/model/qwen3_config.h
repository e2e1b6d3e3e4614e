// Qwen3ForCausalLM hyper-parameters, read from a Hugging Face config.json as
// transformers reads them. Anything this implementation does not compute
// exactly (other architectures, RoPE scaling, sliding windows, biases,
// activations other than SiLU) is refused by name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace mesa_anyjev::model {

struct Qwen3Config {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // explicit in Qwen3 files; hidden/heads when absent
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  std::string torch_dtype;  // as saved ("bfloat16", "float32"), informational

  // Weights of the model (the lm_head once when tied), saturating at
  // INT64_MAX for a config no machine holds.
  int64_t ParameterCount() const;

  // Parses config.json text; `source` names the file in errors.
  static absl::StatusOr<Qwen3Config> FromJson(std::string_view json,
                                              std::string_view source);
};

}  // namespace mesa_anyjev::model
