#include "server/model/qwen3_loader.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"
#include "server/model/checkpoint.h"
#include "server/model/device_probe.h"

namespace mesa_anyjev::model {
namespace {

absl::StatusOr<at::ScalarType> TargetDtype(const std::string& name) {
  if (name == "float32") return at::kFloat;
  if (name == "bfloat16") return at::kBFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("model.dtype: '", name, "' is not float32 or bfloat16"));
}

// Copies checkpoint tensors into the model's dtype and device, once each,
// and keeps track of what was used so leftovers can be refused.
class WeightReader {
 public:
  WeightReader(const Checkpoint& checkpoint, at::ScalarType dtype,
               at::Device device)
      : checkpoint_(checkpoint), dtype_(dtype), device_(device) {}

  absl::StatusOr<at::Tensor> Take(const std::string& name,
                                  std::vector<int64_t> shape) {
    const TensorView* view = checkpoint_.Find(name);
    if (view == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint: tensor '", name, "' is missing"));
    }
    if (view->shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint: tensor '", name, "' has shape [",
          absl::StrJoin(view->shape, ", "), "] but config.json implies [",
          absl::StrJoin(shape, ", "), "]"));
    }
    at::ScalarType source;
    switch (view->dtype) {
      case DType::kF32:
        source = at::kFloat;
        break;
      case DType::kBF16:
        source = at::kBFloat16;
        break;
      case DType::kF16:
        source = at::kHalf;
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint: tensor '", name, "' has dtype ",
                         std::string(DTypeName(view->dtype)),
                         "; weights must be F32, BF16 or F16"));
    }
    // The mapped bytes may be unaligned: copy them once into a tensor of the
    // file's dtype, then convert (a no-op when dtype and device match).
    at::Tensor host = at::empty(shape, at::TensorOptions().dtype(source));
    std::memcpy(host.data_ptr(), view->data, view->nbytes);
    used_.insert(name);
    at::Tensor out = host.to(device_, dtype_);
    bytes_ += out.numel() * static_cast<int64_t>(out.element_size());
    return out;
  }

  absl::Status CheckNothingLeft() const {
    std::vector<std::string> extra;
    for (const std::string& name : checkpoint_.names()) {
      if (!used_.count(name)) extra.push_back(name);
    }
    if (extra.empty()) return absl::OkStatus();
    if (extra.size() > 5) {
      extra.resize(5);
      extra.push_back("...");
    }
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint: unexpected tensors for this config: ",
                     absl::StrJoin(extra, ", ")));
  }

  int64_t bytes() const { return bytes_; }

 private:
  const Checkpoint& checkpoint_;
  const at::ScalarType dtype_;
  const at::Device device_;
  std::set<std::string> used_;
  int64_t bytes_ = 0;
};

// Layer `l`'s tensors, each checked against the config's shapes.
absl::StatusOr<Qwen3LayerWeights> ReadLayer(WeightReader& reader,
                                            const Qwen3Config& config,
                                            int64_t l) {
  const int64_t h = config.hidden_size, d = config.head_dim;
  const int64_t i = config.intermediate_size;
  const int64_t q = config.num_attention_heads * d;
  const int64_t kv = config.num_key_value_heads * d;
  const std::string p = absl::StrCat("model.layers.", l, ".");
  Qwen3LayerWeights layer;
  ASSIGN_OR_RETURN(layer.input_layernorm,
                   reader.Take(p + "input_layernorm.weight", {h}));
  ASSIGN_OR_RETURN(layer.q_proj,
                   reader.Take(p + "self_attn.q_proj.weight", {q, h}));
  ASSIGN_OR_RETURN(layer.k_proj,
                   reader.Take(p + "self_attn.k_proj.weight", {kv, h}));
  ASSIGN_OR_RETURN(layer.v_proj,
                   reader.Take(p + "self_attn.v_proj.weight", {kv, h}));
  ASSIGN_OR_RETURN(layer.o_proj,
                   reader.Take(p + "self_attn.o_proj.weight", {h, q}));
  ASSIGN_OR_RETURN(layer.q_norm,
                   reader.Take(p + "self_attn.q_norm.weight", {d}));
  ASSIGN_OR_RETURN(layer.k_norm,
                   reader.Take(p + "self_attn.k_norm.weight", {d}));
  ASSIGN_OR_RETURN(layer.post_attention_layernorm,
                   reader.Take(p + "post_attention_layernorm.weight", {h}));
  ASSIGN_OR_RETURN(layer.gate_proj,
                   reader.Take(p + "mlp.gate_proj.weight", {i, h}));
  ASSIGN_OR_RETURN(layer.up_proj,
                   reader.Take(p + "mlp.up_proj.weight", {i, h}));
  ASSIGN_OR_RETURN(layer.down_proj,
                   reader.Take(p + "mlp.down_proj.weight", {h, i}));
  return layer;
}

}  // namespace

absl::StatusOr<OpenedQwen3> OpenQwen3(const std::string& dir,
                                      const Qwen3LoadOptions& options) {
  RETURN_IF_ERROR(TargetDtype(options.dtype).status());
  RETURN_IF_ERROR(ParseDevice(options.device).status());
  OpenedQwen3 opened;
  ASSIGN_OR_RETURN(opened.checkpoint, Checkpoint::Open(dir));
  ASSIGN_OR_RETURN(opened.config,
                   Qwen3Config::FromJson(opened.checkpoint->config_json(),
                                         absl::StrCat(dir, "/config.json")));
  return opened;
}

absl::StatusOr<LoadedQwen3> LoadQwen3(OpenedQwen3 opened,
                                      const Qwen3LoadOptions& options) {
  ASSIGN_OR_RETURN(const at::ScalarType dtype, TargetDtype(options.dtype));
  ASSIGN_OR_RETURN(const at::Device device, ParseDevice(options.device));
  const std::unique_ptr<Checkpoint> checkpoint = std::move(opened.checkpoint);
  Qwen3Config config = std::move(opened.config);
  c10::InferenceMode guard;
  WeightReader reader(*checkpoint, dtype, device);
  const int64_t v = config.vocab_size, h = config.hidden_size;
  Qwen3Weights w;
  ASSIGN_OR_RETURN(w.embed_tokens,
                   reader.Take("model.embed_tokens.weight", {v, h}));
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    ASSIGN_OR_RETURN(Qwen3LayerWeights layer, ReadLayer(reader, config, l));
    w.layers.push_back(std::move(layer));
  }
  ASSIGN_OR_RETURN(w.norm, reader.Take("model.norm.weight", {h}));
  if (config.tie_word_embeddings) {
    w.lm_head = w.embed_tokens;
  } else {
    ASSIGN_OR_RETURN(w.lm_head, reader.Take("lm_head.weight", {v, h}));
  }
  RETURN_IF_ERROR(reader.CheckNothingLeft());

  LoadedQwen3 loaded;
  loaded.fingerprint = checkpoint->Fingerprint();
  loaded.model = std::make_unique<Qwen3Model>(std::move(config), std::move(w),
                                              options.gemm, options.kernels);
  loaded.weight_bytes = reader.bytes() + loaded.model->extra_weight_bytes();
  return loaded;  // the checkpoint's mappings go with it
}

}  // namespace mesa_anyjev::model
