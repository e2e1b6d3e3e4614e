#include "common/config/config_schema.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"
#include "common/util/host_port.h"

namespace mesa_anyjev::config::schema {

// ---------------------------------------------------------------------------
// Schema: one constexpr entry per field. The key is stringized from the member
// names themselves, so it can never drift from config.h.

constexpr std::string_view SectionOf(std::string_view key) {
  return key.substr(0, key.find('.'));
}

template <auto kSection, auto kMember>
auto& MemberOf(Config& config) {
  return (config.*kSection).*kMember;
}

template <typename T>
constexpr FieldType TypeOf(bool has_choices) {
  if constexpr (std::is_same_v<T, std::string>) {
    return has_choices ? FieldType::kEnum : FieldType::kString;
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return FieldType::kInt32;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return FieldType::kInt64;
  } else if constexpr (std::is_same_v<T, double>) {
    return FieldType::kDouble;
  } else {
    static_assert(std::is_same_v<T, bool>, "unsupported config field type");
    return FieldType::kBool;
  }
}

template <auto kSection, auto kMember>
constexpr Field MakeField(std::string_view key,
                          std::span<const char* const> choices = {}) {
  using T = std::remove_reference_t<decltype(MemberOf<kSection, kMember>(
      std::declval<Config&>()))>;
  return Field{key, TypeOf<T>(!choices.empty()),
               AnyAccessor(std::in_place_type<Accessor<T>>,
                           &MemberOf<kSection, kMember>),
               choices};
}

// Macros only to stringize the member names into the key.
#define MESA_CONFIG_FIELD(section, name)                                 \
  MakeField<&Config::section, &decltype(Config::section)::name>(#section \
                                                                "." #name)
#define MESA_CONFIG_ENUM(section, name, choices)                 \
  MakeField<&Config::section, &decltype(Config::section)::name>( \
      #section "." #name, choices)

constexpr const char* kDtypes[] = {"float32", "bfloat16"};
constexpr const char* kAttentions[] = {"eager", "sdpa"};
constexpr const char* kCpuGemms[] = {"auto", "onednn", "aten"};
constexpr const char* kSchedulers[] = {"fair", "fifo"};
constexpr const char* kPriors[] = {"batch", "content_free", "none"};
constexpr const char* kLabelReadouts[] = {"auto", "token_ids", "top_k"};
constexpr const char* kClientPriors[] = {"run", "daemon"};
constexpr const char* kClientPriorities[] = {"default", "interactive", "batch"};
constexpr const char* kModelBackends[] = {"local", "composite"};
constexpr const char* kBackendKinds[] = {"fake", "gateway", "hf", "composite"};
constexpr const char* kLevels[] = {"raw", "L0", "L1", "L2", "auto"};
constexpr const char* kProfiles[] = {"prod", "dev"};
constexpr const char* kLogLevels[] = {"trace", "debug", "info", "warn",
                                      "error"};

// Sections and fields in struct order (ToYaml writes them in this order).
constexpr Field kFields[] = {
    MESA_CONFIG_FIELD(server, listen),
    MESA_CONFIG_FIELD(server, port_file),
    MESA_CONFIG_FIELD(server, metrics_listen),
    MESA_CONFIG_FIELD(server, metrics_port_file),
    MESA_CONFIG_FIELD(server, queue_capacity),
    MESA_CONFIG_FIELD(server, default_deadline_s),
    MESA_CONFIG_FIELD(server, max_deadline_s),
    MESA_CONFIG_FIELD(server, drain_deadline_s),
    MESA_CONFIG_FIELD(server, drain_grace_s),
    MESA_CONFIG_FIELD(server, max_receive_message_bytes),
    MESA_CONFIG_FIELD(server, max_send_message_bytes),
    MESA_CONFIG_FIELD(server, max_concurrent_streams),
    MESA_CONFIG_FIELD(server, reflection),
    MESA_CONFIG_FIELD(server, tls_cert),
    MESA_CONFIG_FIELD(server, tls_key),

    MESA_CONFIG_ENUM(model, backend, kModelBackends),
    MESA_CONFIG_FIELD(model, path),
    MESA_CONFIG_FIELD(model, name),
    MESA_CONFIG_ENUM(model, dtype, kDtypes),
    MESA_CONFIG_FIELD(model, device),
    MESA_CONFIG_ENUM(model, attention, kAttentions),
    MESA_CONFIG_FIELD(model, cascade_attention),
    MESA_CONFIG_ENUM(model, cpu_gemm, kCpuGemms),
    MESA_CONFIG_FIELD(model, kernels),
    MESA_CONFIG_FIELD(model, threads),
    MESA_CONFIG_FIELD(model, fake_delay_s),
    MESA_CONFIG_FIELD(model, fake_load_s),
    MESA_CONFIG_FIELD(model, fake_temperature),

    MESA_CONFIG_FIELD(engine, batch_tokens),
    MESA_CONFIG_FIELD(engine, interactive_pass_tokens),
    MESA_CONFIG_FIELD(engine, short_passes_after_interactive),
    MESA_CONFIG_FIELD(engine, kv_pool_bytes),
    MESA_CONFIG_FIELD(engine, kv_block_tokens),
    MESA_CONFIG_FIELD(engine, prefix_caching),
    MESA_CONFIG_FIELD(engine, host_cache_bytes),
    MESA_CONFIG_FIELD(engine, cuda_graph_tokens),
    MESA_CONFIG_FIELD(engine, memory_reserve_bytes),
    MESA_CONFIG_ENUM(engine, scheduler, kSchedulers),
    MESA_CONFIG_FIELD(engine, tenant_max_queued_calls),
    MESA_CONFIG_FIELD(engine, tenant_max_queued_tokens),
    MESA_CONFIG_FIELD(engine, pass_records),

    MESA_CONFIG_FIELD(limits, max_groups),
    MESA_CONFIG_FIELD(limits, max_suffixes),
    MESA_CONFIG_FIELD(limits, max_prompt_tokens),
    MESA_CONFIG_FIELD(limits, max_total_tokens),
    MESA_CONFIG_FIELD(limits, max_layers),
    MESA_CONFIG_FIELD(limits, max_top_k),
    MESA_CONFIG_FIELD(limits, max_label_ids),
    MESA_CONFIG_FIELD(limits, max_texts),
    MESA_CONFIG_FIELD(limits, max_text_bytes),
    MESA_CONFIG_FIELD(limits, max_decide_states),
    MESA_CONFIG_FIELD(limits, max_decide_questions),
    MESA_CONFIG_FIELD(limits, max_fit_states),
    MESA_CONFIG_FIELD(limits, max_decide_tokens),
    MESA_CONFIG_FIELD(limits, max_bundle_bytes),

    MESA_CONFIG_FIELD(decisions, artifacts),
    MESA_CONFIG_FIELD(decisions, workers),
    MESA_CONFIG_ENUM(decisions, prior, kPriors),
    MESA_CONFIG_FIELD(decisions, canonical_order),
    MESA_CONFIG_FIELD(decisions, adaptive_shifts),
    MESA_CONFIG_FIELD(decisions, auto_routes_reworded),
    MESA_CONFIG_FIELD(decisions, bundles_dir),

    MESA_CONFIG_FIELD(auth, token_env),
    MESA_CONFIG_FIELD(auth, token_file),
    MESA_CONFIG_FIELD(auth, tokens_file),

    MESA_CONFIG_FIELD(client, address),
    MESA_CONFIG_FIELD(client, timeout_s),
    MESA_CONFIG_FIELD(client, token_env),
    MESA_CONFIG_FIELD(client, token_file),
    MESA_CONFIG_FIELD(client, tls_ca),
    MESA_CONFIG_ENUM(client, priors, kClientPriors),
    MESA_CONFIG_ENUM(client, priority, kClientPriorities),
    MESA_CONFIG_FIELD(client, affinity_bytes),

    MESA_CONFIG_ENUM(backend, kind, kBackendKinds),
    MESA_CONFIG_FIELD(backend, gateway_base_url),
    MESA_CONFIG_FIELD(backend, served_model),
    MESA_CONFIG_FIELD(backend, canonical_model),
    MESA_CONFIG_FIELD(backend, tokenizer),
    MESA_CONFIG_FIELD(backend, hf_model),
    MESA_CONFIG_FIELD(backend, gateway_api_key_env),
    MESA_CONFIG_FIELD(backend, gateway_api_key_file),
    MESA_CONFIG_FIELD(backend, ca_file),
    MESA_CONFIG_FIELD(backend, pinned_public_key),
    MESA_CONFIG_FIELD(backend, logprobs),
    MESA_CONFIG_FIELD(backend, max_choice_k),
    MESA_CONFIG_ENUM(backend, label_readout, kLabelReadouts),
    MESA_CONFIG_FIELD(backend, health_path),
    MESA_CONFIG_FIELD(backend, workers),
    MESA_CONFIG_FIELD(backend, timeout),
    MESA_CONFIG_FIELD(backend, failover_to_daemon),

    MESA_CONFIG_ENUM(decider, level, kLevels),
    MESA_CONFIG_ENUM(decider, prior, kPriors),
    MESA_CONFIG_FIELD(decider, adaptive_shifts),
    MESA_CONFIG_FIELD(decider, max_permutations),

    MESA_CONFIG_ENUM(policy, profile, kProfiles),
    MESA_CONFIG_FIELD(policy, max_candidates),
    MESA_CONFIG_FIELD(policy, max_avus),
    MESA_CONFIG_FIELD(policy, proposal_size),
    MESA_CONFIG_FIELD(policy, specificity),
    MESA_CONFIG_FIELD(policy, specificity_delta),
    MESA_CONFIG_FIELD(policy, audit_planner),

    MESA_CONFIG_FIELD(artifacts, dir),
    MESA_CONFIG_FIELD(artifacts, strict),

    MESA_CONFIG_FIELD(compare, max_flip),
    MESA_CONFIG_FIELD(compare, max_acc_diff),
    MESA_CONFIG_FIELD(compare, resamples),
    MESA_CONFIG_FIELD(compare, seed),

    MESA_CONFIG_FIELD(labels, dir),

    MESA_CONFIG_ENUM(log, level, kLogLevels),
};

#undef MESA_CONFIG_FIELD
#undef MESA_CONFIG_ENUM

// ToYaml and the section listing rely on each section being one run. Linear
// in the fields but for one pass per section start: clang's constexpr step
// limit refused the all-pairs version once the table grew.
constexpr bool SectionsContiguousAndKeysUnique() {
  const size_t n = std::size(kFields);
  size_t start = 0;  // where the section of field i begins
  for (size_t i = 0; i < n; ++i) {
    const std::string_view section = SectionOf(kFields[i].key_text);
    if (i > 0 && section != SectionOf(kFields[i - 1].key_text)) {
      // A section starting at i must not have appeared before.
      for (size_t j = 0; j < i; ++j) {
        if (SectionOf(kFields[j].key_text) == section) return false;
      }
      start = i;
    }
    // Sections are runs, so a repeated key would repeat within this one.
    for (size_t j = start; j < i; ++j) {
      if (kFields[j].key_text == kFields[i].key_text) return false;
    }
  }
  return true;
}
static_assert(SectionsContiguousAndKeysUnique());

// A member added to config.h without its line above must not build: count an
// aggregate's members by how many initializers T{...} accepts.
struct AnyInitializer {
  template <typename T>
  operator T() const;  // never defined: unevaluated use only
};

template <typename T, typename... Args>
constexpr size_t MemberCount() {
  if constexpr (requires { T{std::declval<Args>()..., AnyInitializer{}}; }) {
    return MemberCount<T, Args..., AnyInitializer>();
  } else {
    return sizeof...(Args);
  }
}

constexpr size_t FieldsIn(std::string_view section) {
  size_t count = 0;
  for (const Field& field : kFields) {
    if (SectionOf(field.key_text) == section) ++count;
  }
  return count;
}

static_assert(MemberCount<Config>() == 14, "a new section needs kFields lines");
static_assert(MemberCount<DecisionsConfig>() == FieldsIn("decisions"),
              "every DecisionsConfig member needs a line in kFields");
static_assert(MemberCount<EngineConfig>() == FieldsIn("engine"),
              "every EngineConfig member needs a line in kFields");
static_assert(MemberCount<ServerConfig>() == FieldsIn("server"),
              "every ServerConfig member needs a line in kFields");
static_assert(MemberCount<ModelConfig>() == FieldsIn("model"),
              "every ModelConfig member needs a line in kFields");
static_assert(MemberCount<LimitsConfig>() == FieldsIn("limits"),
              "every LimitsConfig member needs a line in kFields");
static_assert(MemberCount<AuthConfig>() == FieldsIn("auth"),
              "every AuthConfig member needs a line in kFields");
static_assert(MemberCount<ClientConfig>() == FieldsIn("client"),
              "every ClientConfig member needs a line in kFields");
static_assert(MemberCount<BackendConfig>() == FieldsIn("backend"),
              "every BackendConfig member needs a line in kFields");
static_assert(MemberCount<DeciderConfig>() == FieldsIn("decider"),
              "every DeciderConfig member needs a line in kFields");
static_assert(MemberCount<PolicyConfig>() == FieldsIn("policy"),
              "every PolicyConfig member needs a line in kFields");
static_assert(MemberCount<ArtifactsConfig>() == FieldsIn("artifacts"),
              "every ArtifactsConfig member needs a line in kFields");
static_assert(MemberCount<CompareConfig>() == FieldsIn("compare"),
              "every CompareConfig member needs a line in kFields");
static_assert(MemberCount<LabelsConfig>() == FieldsIn("labels"),
              "every LabelsConfig member needs a line in kFields");
static_assert(MemberCount<LogConfig>() == FieldsIn("log"),
              "every LogConfig member needs a line in kFields");

const Field* FindField(absl::string_view key) {
  for (const Field& field : kFields) {
    if (field.key() == key) return &field;
  }
  return nullptr;
}

bool IsSection(absl::string_view section) {
  return std::any_of(std::begin(kFields), std::end(kFields),
                     [&](const Field& f) { return f.section() == section; });
}

// For error messages: single quotes, C escapes for anything unprintable.
std::string Quote(absl::string_view text) {
  return absl::StrCat("'", absl::CHexEscape(text), "'");
}

std::string KnownSections() {
  std::vector<absl::string_view> sections;
  for (const Field& field : kFields) {
    if (sections.empty() || sections.back() != field.section()) {
      sections.push_back(field.section());
    }
  }
  return absl::StrJoin(sections, ", ");
}

std::string KnownFieldsOf(absl::string_view section) {
  std::vector<absl::string_view> names;
  for (const Field& field : kFields) {
    if (field.section() == section) names.push_back(field.name());
  }
  std::sort(names.begin(), names.end());
  return absl::StrJoin(names, ", ");
}

// "(<where>; known fields of server: ...)", or the sections when the section
// is the unknown part.
std::string UnknownKeyHint(absl::string_view key, absl::string_view where) {
  const size_t dot = key.find('.');
  const absl::string_view section = key.substr(0, dot);
  const std::string prefix = where.empty() ? "" : absl::StrCat(where, "; ");
  if (dot == absl::string_view::npos) {
    return absl::StrCat(
        " (", prefix,
        "keys are section.field; known sections: ", KnownSections(), ")");
  }
  if (IsSection(section)) {
    return absl::StrCat(" (", prefix, "known fields of ", section, ": ",
                        KnownFieldsOf(section), ")");
  }
  return absl::StrCat(" (", prefix, "unknown section ", Quote(section),
                      "; known sections: ", KnownSections(), ")");
}

absl::Status UnknownKeyError(absl::string_view origin, absl::string_view key,
                             absl::string_view where) {
  if (key == "backend.gateway_api_key") {
    return absl::InvalidArgumentError(absl::StrCat(
        "config: ", origin,
        ": backend.gateway_api_key is a secret and is never read from a file "
        "or a flag; set MESA_ANYJEV_BACKEND__GATEWAY_API_KEY or "
        "MESA_LLM_API_KEY in the environment, or backend.gateway_api_key_file "
        "(mode 0600)"));
  }
  return absl::InvalidArgumentError(absl::StrCat("config: ", origin,
                                                 ": unknown key ", Quote(key),
                                                 UnknownKeyHint(key, where)));
}

// ---------------------------------------------------------------------------
// Value parsing, by declared type only.

// Shortest text that parses back to exactly `value`, with a ".0" on whole
// numbers so that it still reads as a double.
std::string FormatDouble(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

absl::StatusOr<double> ParseDouble(absl::string_view text) {
  double value = 0;
  const char* const end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range && ptr == end) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(text), " is out of the range of a double"));
  }
  if (ec != std::errc() || ptr != end) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(text), " is not a number"));
  }
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(text), " is not a finite number"));
  }
  return value;
}

absl::StatusOr<bool> ParseBool(absl::string_view text) {
  for (const absl::string_view yes : {"true", "yes", "1"}) {
    if (absl::EqualsIgnoreCase(text, yes)) return true;
  }
  for (const absl::string_view no : {"false", "no", "0"}) {
    if (absl::EqualsIgnoreCase(text, no)) return false;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(Quote(text), " is not a boolean (true/false, yes/no, 1/0)"));
}

// Parses `text` by the field's type into `config`; the error is the reason
// alone, the caller adds where the value came from.
absl::Status SetField(const Field& field, absl::string_view text,
                      Config* config) {
  return std::visit(
      [&](auto access) -> absl::Status {
        auto& member = access(*config);
        using T = std::remove_reference_t<decltype(member)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (field.type == FieldType::kEnum &&
              std::find(field.choices.begin(), field.choices.end(), text) ==
                  field.choices.end()) {
            return absl::InvalidArgumentError(
                absl::StrCat(Quote(text), " is not one of ",
                             absl::StrJoin(field.choices, ", ")));
          }
          member.assign(text.data(), text.size());
        } else if constexpr (std::is_same_v<T, bool>) {
          ASSIGN_OR_RETURN(member, ParseBool(text));
        } else if constexpr (std::is_same_v<T, double>) {
          ASSIGN_OR_RETURN(member, ParseDouble(text));
        } else {
          ASSIGN_OR_RETURN(member, ParseInt<T>(text));
        }
        return absl::OkStatus();
      },
      field.access);
}

// A YAML double-quoted scalar: always a string whatever it looks like
// ("off", "12", ""), and exact for any valid UTF-8. Bytes >= 0x80 pass
// through because YAML's \xNN means a code point, not a byte.
std::string YamlQuote(absl::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default: {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) {
          constexpr char kHex[] = "0123456789abcdef";
          out += "\\x";
          out += kHex[u >> 4];
          out += kHex[u & 0xf];
        } else {
          out += c;
        }
      }
    }
  }
  out += '"';
  return out;
}

std::string FormatValue(const Field& field, Config* config) {
  return std::visit(
      [&](auto access) -> std::string {
        const auto& member = access(*config);
        using T = std::remove_cvref_t<decltype(member)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return YamlQuote(member);
        } else if constexpr (std::is_same_v<T, bool>) {
          return member ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          return FormatDouble(member);
        } else {
          return absl::StrCat(member);
        }
      },
      field.access);
}

std::span<const Field> Fields() { return kFields; }

}  // namespace mesa_anyjev::config::schema
