#include "server/service/request_convert.h"

#include <bit>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace mesa_anyjev::service {
namespace {

static_assert(std::endian::native == std::endian::little,
              "tensors travel little-endian; add a byte swap for this host");

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// "<field>: <n> <what> exceed <limit_name>=<limit>" when n > limit.
absl::Status CheckAtMost(const std::string& field, int64_t n, const char* what,
                         const char* limit_name, int64_t limit) {
  if (n <= limit) return absl::OkStatus();
  return Invalid(
      field, absl::StrCat(n, " ", what, " exceed ", limit_name, "=", limit));
}

absl::Status Prefixed(const std::string& field, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(field, ": ", status.message()));
}

absl::StatusOr<std::vector<TokenId>> ParseSegment(
    const v1::Segment& segment, const std::string& field,
    const text::Tokenizer& tokenizer, const config::LimitsConfig& limits) {
  switch (segment.kind_case()) {
    case v1::Segment::kText: {
      const std::string& text = segment.text();
      RETURN_IF_ERROR(
          CheckAtMost(field + ".text", static_cast<int64_t>(text.size()),
                      "bytes", "limits.max_text_bytes", limits.max_text_bytes));
      auto ids = tokenizer.Encode(text);
      if (!ids.ok()) return Prefixed(field + ".text", ids.status());
      return ids;
    }
    case v1::Segment::kIds: {
      const auto& ids = segment.ids().ids();
      RETURN_IF_ERROR(CheckAtMost(field + ".ids", ids.size(), "ids",
                                  "limits.max_prompt_tokens",
                                  limits.max_prompt_tokens));
      for (int i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= tokenizer.vocab_size()) {
          return Invalid(absl::StrCat(field, ".ids[", i, "]"),
                         absl::StrCat("token id ", ids[i], " is outside [0, ",
                                      tokenizer.vocab_size(), ")"));
        }
      }
      return std::vector<TokenId>(ids.begin(), ids.end());
    }
    case v1::Segment::KIND_NOT_SET:
      break;
  }
  return std::vector<TokenId>{};  // an unset segment is empty
}

}  // namespace

absl::StatusOr<std::vector<std::vector<TokenId>>> ParseTokenizeRequest(
    const v1::TokenizeRequest& request, const text::Tokenizer& tokenizer,
    const config::LimitsConfig& limits) {
  if (request.texts_size() == 0)
    return Invalid("texts", "at least one text is required");
  RETURN_IF_ERROR(CheckAtMost("texts", request.texts_size(), "texts",
                              "limits.max_texts", limits.max_texts));
  std::vector<std::vector<TokenId>> out;
  out.reserve(request.texts_size());
  for (int i = 0; i < request.texts_size(); ++i) {
    const std::string field = absl::StrCat("texts[", i, "]");
    const std::string& text = request.texts(i);
    RETURN_IF_ERROR(CheckAtMost(field, static_cast<int64_t>(text.size()),
                                "bytes", "limits.max_text_bytes",
                                limits.max_text_bytes));
    auto ids = tokenizer.Encode(text);
    if (!ids.ok()) return Prefixed(field, ids.status());
    out.push_back(*std::move(ids));
  }
  return out;
}

absl::StatusOr<ParsedGroups> ParseGroups(
    const google::protobuf::RepeatedPtrField<v1::PromptGroup>& groups,
    const text::Tokenizer& tokenizer, const config::LimitsConfig& limits,
    int32_t label_vocab) {
  if (groups.empty())
    return Invalid("groups", "at least one prompt group is required");
  RETURN_IF_ERROR(CheckAtMost("groups", groups.size(), "groups",
                              "limits.max_groups", limits.max_groups));
  ParsedGroups parsed;
  parsed.groups.reserve(groups.size());
  for (int g = 0; g < groups.size(); ++g) {
    const v1::PromptGroup& in = groups[g];
    const std::string field = absl::StrCat("groups[", g, "]");
    if (in.suffixes_size() == 0) {
      return Invalid(field + ".suffixes",
                     "at least one suffix is required (an empty one makes the "
                     "prefix a prompt of its own)");
    }
    RETURN_IF_ERROR(CheckAtMost(field + ".suffixes", in.suffixes_size(),
                                "suffixes", "limits.max_suffixes",
                                limits.max_suffixes));
    PromptGroup group;
    ASSIGN_OR_RETURN(group.prefix, ParseSegment(in.prefix(), field + ".prefix",
                                                tokenizer, limits));
    parsed.n_tokens += static_cast<int64_t>(group.prefix.size());
    for (int s = 0; s < in.suffixes_size(); ++s) {
      const std::string sfield = absl::StrCat(field, ".suffixes[", s, "]");
      ASSIGN_OR_RETURN(auto suffix,
                       ParseSegment(in.suffixes(s), sfield, tokenizer, limits));
      const int64_t prompt_tokens =
          static_cast<int64_t>(group.prefix.size() + suffix.size());
      if (prompt_tokens == 0) {
        return Invalid(sfield, "the prompt (prefix + suffix) is empty");
      }
      if (prompt_tokens > limits.max_prompt_tokens) {
        return Invalid(sfield,
                       absl::StrCat("prompt of ", prompt_tokens,
                                    " tokens exceeds limits.max_prompt_tokens=",
                                    limits.max_prompt_tokens));
      }
      parsed.n_tokens += static_cast<int64_t>(suffix.size());
      group.suffixes.push_back(std::move(suffix));
    }
    if (parsed.n_tokens > limits.max_total_tokens) {
      return Invalid("groups",
                     absl::StrCat("the request's ", parsed.n_tokens,
                                  "+ tokens exceed limits.max_total_tokens=",
                                  limits.max_total_tokens));
    }
    if (label_vocab > 0) {
      RETURN_IF_ERROR(CheckAtMost(field + ".label_ids", in.label_ids_size(),
                                  "ids", "limits.max_label_ids",
                                  limits.max_label_ids));
      for (int i = 0; i < in.label_ids_size(); ++i) {
        const int32_t id = in.label_ids(i);
        if (id < 0 || id >= label_vocab) {
          return Invalid(absl::StrCat(field, ".label_ids[", i, "]"),
                         absl::StrCat("token id ", id, " is outside [0, ",
                                      label_vocab, ")"));
        }
      }
      group.label_ids.assign(in.label_ids().begin(), in.label_ids().end());
    }
    parsed.n_prompts += in.suffixes_size();
    parsed.groups.push_back(std::move(group));
  }
  return parsed;
}

absl::Status CheckTopK(int32_t top_k, int32_t vocab_size,
                       const config::LimitsConfig& limits) {
  const int32_t cap = std::min(limits.max_top_k, vocab_size);
  if (top_k < 0 || top_k > cap) {
    return Invalid("top_k",
                   absl::StrCat(top_k, " is outside [0, ", cap,
                                "] (limits.max_top_k=", limits.max_top_k,
                                ", vocab_size=", vocab_size, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> ParseLayers(
    const google::protobuf::RepeatedField<int32_t>& layers,
    const Capabilities& capabilities, const config::LimitsConfig& limits,
    int64_t n_prompts, int64_t max_send_bytes) {
  if (layers.empty())
    return Invalid("layers", "at least one layer is required");
  RETURN_IF_ERROR(CheckAtMost("layers", layers.size(), "layers",
                              "limits.max_layers", limits.max_layers));
  std::vector<int32_t> resolved;
  for (int i = 0; i < layers.size(); ++i) {
    auto layer = ResolveLayer(layers[i], capabilities.n_layers);
    if (!layer.ok()) {
      return Invalid(absl::StrCat("layers[", i, "]"),
                     std::string(layer.status().message()));
    }
    resolved.push_back(*layer);
  }
  const int64_t bytes = n_prompts * static_cast<int64_t>(resolved.size()) *
                        capabilities.hidden_size * 4;
  if (bytes > max_send_bytes - 4096) {
    return Invalid("layers",
                   absl::StrCat(n_prompts, " prompts x ", resolved.size(),
                                " layers x hidden ", capabilities.hidden_size,
                                " x 4 bytes = ", bytes,
                                " bytes exceed server.max_send_message_bytes=",
                                max_send_bytes, "; split the request"));
  }
  return resolved;
}

void FillLogprobs(const std::vector<std::vector<PromptLogprobs>>& result,
                  v1::LogprobsResponse* response) {
  for (const auto& group : result) {
    v1::GroupLogprobs* out_group = response->add_groups();
    for (const PromptLogprobs& prompt : group) {
      v1::PromptLogprobs* out = out_group->add_prompts();
      out->mutable_label_logprobs()->Add(prompt.label_logprobs.begin(),
                                         prompt.label_logprobs.end());
      for (const TopToken& top : prompt.top) {
        v1::TopToken* t = out->add_top();
        t->set_id(top.id);
        t->set_logprob(top.logprob);
      }
      out->set_n_tokens(prompt.n_tokens);
    }
  }
}

void FillHiddenStates(const HiddenStatesResult& result,
                      v1::HiddenStatesResponse* response) {
  response->mutable_layers()->Add(result.layers.begin(), result.layers.end());
  v1::Tensor* tensor = response->mutable_hidden();
  tensor->set_dtype("float32");
  tensor->add_shape(result.n_prompts);
  tensor->add_shape(static_cast<int64_t>(result.layers.size()));
  tensor->add_shape(result.hidden_size);
  std::string* data = tensor->mutable_data();
  data->resize(result.values.size() * sizeof(float));
  std::memcpy(data->data(), result.values.data(), data->size());
}

void FillModelInfo(const ModelIdentity& identity,
                   const Capabilities& capabilities,
                   const config::LimitsConfig& limits, v1::ModelInfo* info) {
  info->set_name(identity.name);
  info->set_identity(identity.identity);
  info->set_n_layers(capabilities.n_layers);
  info->set_hidden_size(capabilities.hidden_size);
  info->set_vocab_size(capabilities.vocab_size);
  info->set_max_choice_k(capabilities.max_choice_k);
  info->set_hidden_states(capabilities.hidden_states);
  info->set_early_stop(capabilities.early_stop);
  info->set_dtype(identity.dtype);
  info->set_device(identity.device);
  info->set_attention(identity.attention);
  v1::Limits* out = info->mutable_limits();
  out->set_max_groups(limits.max_groups);
  out->set_max_suffixes(limits.max_suffixes);
  out->set_max_prompt_tokens(limits.max_prompt_tokens);
  out->set_max_total_tokens(limits.max_total_tokens);
  out->set_max_layers(limits.max_layers);
  out->set_max_top_k(limits.max_top_k);
  out->set_max_label_ids(limits.max_label_ids);
  out->set_max_texts(limits.max_texts);
  out->set_max_text_bytes(limits.max_text_bytes);
  out->set_max_decide_states(limits.max_decide_states);
  out->set_max_decide_questions(limits.max_decide_questions);
  out->set_max_fit_states(limits.max_fit_states);
  out->set_max_decide_tokens(limits.max_decide_tokens);
}

void FillDeviceInfo(const std::optional<DeviceInfo>& device,
                    const absl::StatusOr<int64_t>& mem_available,
                    v1::ModelInfo* info) {
  if (device.has_value()) {
    v1::DeviceInfo* out = info->mutable_device_info();
    out->set_name(device->name);
    out->set_compute_capability(device->compute_capability);
    out->set_shared_memory(device->shared_memory);
    out->set_driver_cuda(device->driver_cuda);
    out->set_runtime_cuda(device->runtime_cuda);
  }
  if (mem_available.ok()) {
    info->set_system_memory_available_bytes(*mem_available);
  }
}

void FillCallerInfo(bool auth, const auth::Tenant* tenant, Priority priority,
                    v1::ModelInfo* info) {
  v1::CallerInfo* out = info->mutable_caller();
  out->set_auth(auth);
  out->set_priority(PriorityName(priority));
  // Auth off: an anonymous caller that may do everything.
  auth::Tenant anyone;
  anyone.role = auth::Role::kAdmin;
  const auth::Tenant& t = tenant != nullptr ? *tenant : anyone;
  out->set_tenant(t.name);
  out->set_role(auth::RoleName(t.role));
  out->set_default_priority(PriorityName(t.Resolve(std::nullopt)));
  out->set_max_priority(PriorityName(t.max_priority));
  out->set_weight(t.weight);
  out->set_max_queued_calls(t.max_queued_calls);
  out->set_max_queued_tokens(t.max_queued_tokens);
}

}  // namespace mesa_anyjev::service
