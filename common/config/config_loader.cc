#include "common/config/config_loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <span>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"
#include "yaml-cpp/yaml.h"

extern char** environ;

namespace mesa_anyjev::config {
namespace {

// ---------------------------------------------------------------------------
// Schema: one constexpr entry per field. The key is stringized from the member
// names themselves, so it can never drift from config.h.

enum class FieldType { kString, kInt32, kInt64, kDouble, kBool, kEnum };

template <typename T>
using Accessor = T& (*)(Config&);

using AnyAccessor =
    std::variant<Accessor<std::string>, Accessor<int32_t>, Accessor<int64_t>,
                 Accessor<double>, Accessor<bool>>;

// Debian's Abseil has its own absl::string_view (not std::string_view), and
// only std's is usable in constant expressions, hence both below.
struct Field {
  std::string_view key_text;  // "section.field"
  FieldType type;
  AnyAccessor access;
  std::span<const char* const> choices;  // kEnum only

  absl::string_view key() const { return {key_text.data(), key_text.size()}; }
  absl::string_view section() const { return key().substr(0, key().find('.')); }
  absl::string_view name() const { return key().substr(key().find('.') + 1); }
};

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
constexpr const char* kPriors[] = {"batch", "content_free", "none"};
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

    MESA_CONFIG_FIELD(model, path),
    MESA_CONFIG_FIELD(model, name),
    MESA_CONFIG_ENUM(model, dtype, kDtypes),
    MESA_CONFIG_FIELD(model, device),
    MESA_CONFIG_ENUM(model, attention, kAttentions),
    MESA_CONFIG_FIELD(model, threads),
    MESA_CONFIG_FIELD(model, fake_delay_s),
    MESA_CONFIG_FIELD(model, fake_load_s),

    MESA_CONFIG_FIELD(engine, batch_tokens),
    MESA_CONFIG_FIELD(engine, prefix_cache_bytes),

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

    MESA_CONFIG_FIELD(decisions, artifacts),
    MESA_CONFIG_FIELD(decisions, workers),
    MESA_CONFIG_ENUM(decisions, prior, kPriors),
    MESA_CONFIG_FIELD(decisions, canonical_order),
    MESA_CONFIG_FIELD(decisions, adaptive_shifts),
    MESA_CONFIG_FIELD(decisions, auto_routes_reworded),

    MESA_CONFIG_FIELD(auth, token_env),
    MESA_CONFIG_FIELD(auth, token_file),

    MESA_CONFIG_FIELD(client, address),
    MESA_CONFIG_FIELD(client, timeout_s),
    MESA_CONFIG_FIELD(client, token_env),
    MESA_CONFIG_FIELD(client, token_file),
    MESA_CONFIG_FIELD(client, tls_ca),

    MESA_CONFIG_FIELD(gateway, base_url),
    MESA_CONFIG_FIELD(gateway, served_model),
    MESA_CONFIG_FIELD(gateway, canonical_model),
    MESA_CONFIG_FIELD(gateway, tokenizer),
    MESA_CONFIG_FIELD(gateway, api_key_env),
    MESA_CONFIG_FIELD(gateway, api_key_file),
    MESA_CONFIG_FIELD(gateway, ca_file),
    MESA_CONFIG_FIELD(gateway, pinned_public_key),
    MESA_CONFIG_FIELD(gateway, logprobs),
    MESA_CONFIG_FIELD(gateway, max_choice_k),
    MESA_CONFIG_FIELD(gateway, workers),
    MESA_CONFIG_FIELD(gateway, timeout_s),

    MESA_CONFIG_ENUM(log, level, kLogLevels),
};

#undef MESA_CONFIG_FIELD
#undef MESA_CONFIG_ENUM

// ToYaml and the section listing rely on each section being one run.
constexpr bool SectionsContiguousAndKeysUnique() {
  const size_t n = std::size(kFields);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < i; ++j) {
      const std::string_view key = kFields[i].key_text;
      if (kFields[j].key_text == key) return false;
      // A section starting at i must not have appeared before.
      if (SectionOf(key) != SectionOf(kFields[i - 1].key_text) &&
          SectionOf(kFields[j].key_text) == SectionOf(key)) {
        return false;
      }
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

static_assert(MemberCount<Config>() == 9, "a new section needs kFields lines");
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
static_assert(MemberCount<GatewayConfig>() == FieldsIn("gateway"),
              "every GatewayConfig member needs a line in kFields");
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

template <typename Int>
absl::StatusOr<Int> ParseInt(absl::string_view text) {
  Int value{};
  const char* const end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range && ptr == end) {
    return absl::InvalidArgumentError(absl::StrCat(
        Quote(text), " is out of range [", std::numeric_limits<Int>::min(),
        ", ", std::numeric_limits<Int>::max(), "]"));
  }
  if (ec != std::errc() || ptr != end) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(text), " is not an integer"));
  }
  return value;
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

// ---------------------------------------------------------------------------
// Merging the sources.

struct State {
  Config config;
  // Where each key was last set ("" or absent = built-in default); named in
  // validation errors so the user knows which source to fix.
  std::map<std::string, std::string, std::less<>> origins;
};

// `where` is extra location text (", line 3" for the file) or "".
absl::Status Apply(const Field& field, absl::string_view text,
                   absl::string_view origin, absl::string_view where,
                   State* state) {
  const absl::Status status = SetField(field, text, &state->config);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: ", origin, ": ", status.message(), " (",
                     field.key(), where.empty() ? "" : ", ", where, ")"));
  }
  state->origins[std::string(field.key())] =
      where.empty() ? std::string(origin) : absl::StrCat(origin, ", ", where);
  return absl::OkStatus();
}

constexpr int64_t kMaxFileBytes = 16 << 20;  // guards --config /dev/zero

std::string ErrnoText(int error) {
  return std::error_code(error, std::generic_category()).message();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config: ", path,
        ": cannot open the configuration file: ", ErrnoText(errno)));
  }
  struct stat info {};
  if (::fstat(fd, &info) == 0 && S_ISDIR(info.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        "config: ", path, ": the configuration file is a directory"));
  }
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(
          "config: ", path,
          ": cannot read the configuration file: ", ErrnoText(error)));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (static_cast<int64_t>(text.size()) > kMaxFileBytes) {
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(
          "config: ", path, ": the configuration file is larger than ",
          kMaxFileBytes, " bytes"));
    }
  }
  ::close(fd);
  return text;
}

std::string LineOf(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? "" : absl::StrCat("line ", mark.line + 1);
}

const char* KindOf(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Undefined:
      break;
  }
  return "undefined";
}

// Applies one parsed document. yaml-cpp may throw; the caller catches.
absl::Status ApplyDocument(const std::string& path, const YAML::Node& root,
                           State* state) {
  if (root.IsNull()) return absl::OkStatus();  // "---" alone, "~": as empty
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config: ", path, ": the configuration file must be a mapping"));
  }
  std::vector<std::string> seen_sections;
  for (const auto& section_entry : root) {
    const YAML::Node& section_key = section_entry.first;
    const YAML::Node& section_node = section_entry.second;
    if (!section_key.IsScalar()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config: ", path, ": a section name is ", KindOf(section_key),
          ", not a name (", LineOf(section_key), ")"));
    }
    const std::string& section = section_key.Scalar();
    if (!IsSection(section)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config: ", path, ": unknown section ", Quote(section), " (",
          LineOf(section_key), "; known sections: ", KnownSections(), ")"));
    }
    if (std::find(seen_sections.begin(), seen_sections.end(), section) !=
        seen_sections.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config: ", path, ": duplicate section ", Quote(section),
                       " (", LineOf(section_key), ")"));
    }
    seen_sections.push_back(section);
    if (section_node.IsNull()) continue;  // every field commented out
    if (!section_node.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config: ", path, ": section ", Quote(section),
                       " must be a mapping, not ", KindOf(section_node), " (",
                       LineOf(section_key), ")"));
    }
    std::vector<std::string> seen_fields;
    for (const auto& field_entry : section_node) {
      const YAML::Node& field_key = field_entry.first;
      const YAML::Node& value = field_entry.second;
      if (!field_key.IsScalar()) {
        return absl::InvalidArgumentError(
            absl::StrCat("config: ", path, ": a field name in section ",
                         Quote(section), " is ", KindOf(field_key),
                         ", not a name (", LineOf(field_key), ")"));
      }
      const std::string key = absl::StrCat(section, ".", field_key.Scalar());
      const Field* field = FindField(key);
      if (field == nullptr) {
        return UnknownKeyError(path, key, LineOf(field_key));
      }
      if (std::find(seen_fields.begin(), seen_fields.end(), key) !=
          seen_fields.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("config: ", path, ": duplicate key ", Quote(key), " (",
                         LineOf(field_key), ")"));
      }
      seen_fields.push_back(key);
      if (value.IsMap() || value.IsSequence()) {
        return absl::InvalidArgumentError(
            absl::StrCat("config: ", path, ": ", field->key(),
                         " must be a single value, not ", KindOf(value), " (",
                         LineOf(field_key), ")"));
      }
      // A null value ("key:", "~") is the empty string: clears a string
      // field, and fails to parse for the other types.
      const std::string text = value.IsScalar() ? value.Scalar() : "";
      RETURN_IF_ERROR(Apply(*field, text, path, LineOf(field_key), state));
    }
  }
  return absl::OkStatus();
}

std::string ExpandHome(const std::string& path,
                       const std::map<std::string, std::string>& env) {
  if (path != "~" && !path.starts_with("~/")) return path;
  const auto home = env.find("HOME");
  if (home == env.end() || home->second.empty()) return path;
  return home->second + path.substr(1);
}

absl::Status ApplyFile(const std::string& path, State* state) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  // yaml-cpp reports everything by exception; none may escape LoadConfig.
  try {
    const std::vector<YAML::Node> documents = YAML::LoadAll(text);
    if (documents.empty()) return absl::OkStatus();  // empty file = {}
    if (documents.size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("config: ", path, ": the configuration file holds ",
                       documents.size(), " YAML documents, not one"));
    }
    return ApplyDocument(path, documents.front(), state);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config: ", path, ": YAML error: ", e.msg));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "config: ", path, ": YAML syntax error at line ", e.mark.line + 1,
        ", column ", e.mark.column + 1, ": ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: ", path, ": ", e.what()));
  }
}

constexpr absl::string_view kEnvPrefix = "MESA_ANYJEV_";

absl::Status ApplyEnvironment(const std::map<std::string, std::string>& env,
                              State* state) {
  // Two spellings of one key (case differs) would make the winner depend on
  // sort order, so that is refused.
  std::map<std::string, std::string> variable_of_key;
  for (const auto& [name, value] : env) {
    if (name.size() < kEnvPrefix.size() ||
        !absl::EqualsIgnoreCase(
            absl::string_view(name).substr(0, kEnvPrefix.size()), kEnvPrefix)) {
      continue;
    }
    const absl::string_view rest =
        absl::string_view(name).substr(kEnvPrefix.size());
    const size_t split = rest.find("__");
    if (split == absl::string_view::npos) continue;  // test gate, VENV, ...
    const std::string key =
        absl::StrCat(absl::AsciiStrToLower(rest.substr(0, split)), ".",
                     absl::AsciiStrToLower(rest.substr(split + 2)));
    const std::string origin = absl::StrCat("environment ", name);
    const Field* field = FindField(key);
    if (field == nullptr) return UnknownKeyError(origin, key, "");
    const auto [it, inserted] = variable_of_key.emplace(field->key(), name);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("config: environment ", it->second, " and ", name,
                       " both set ", field->key()));
    }
    RETURN_IF_ERROR(Apply(*field, value, origin, "", state));
  }
  return absl::OkStatus();
}

absl::Status ApplyFlags(const std::vector<Override>& flags, State* state) {
  for (const Override& flag : flags) {
    const std::string origin =
        flag.origin.empty() ? absl::StrCat("flag ", flag.key) : flag.origin;
    const Field* field = FindField(flag.key);
    if (field == nullptr) return UnknownKeyError(origin, flag.key, "");
    RETURN_IF_ERROR(Apply(*field, flag.value, origin, "", state));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Validation of the merged result.

// Why `text` is not host:port, or "" when it is.
std::string HostPortProblem(absl::string_view text) {
  if (text.empty()) return "is empty";
  absl::string_view host;
  absl::string_view port;
  if (text.front() == '[') {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) return "has '[' without ']'";
    host = text.substr(1, close - 1);
    const absl::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return "has no ':port' after ']'";
    port = rest.substr(1);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return "has no ':port'";
    host = text.substr(0, colon);
    if (host.find(':') != absl::string_view::npos) {
      return "has an IPv6 host without brackets; write [host]:port";
    }
    port = text.substr(colon + 1);
  }
  if (host.empty()) return "has an empty host";
  for (const char c : host) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= ' ' || u == 0x7f || c == '/' || c == '[' || c == ']') {
      return "has an invalid character in the host";
    }
  }
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != absl::string_view::npos) {
    return "has a port that is not a number in 0..65535";
  }
  int number = 0;
  std::from_chars(port.data(), port.data() + port.size(), number);
  if (number > 65535) return "has a port above 65535";
  return "";
}

bool IsDevice(absl::string_view device) {
  if (device == "cpu" || device == "cuda") return true;
  if (!absl::StartsWith(device, "cuda:")) return false;
  const absl::string_view index = device.substr(5);
  return !index.empty() &&
         index.find_first_not_of("0123456789") == absl::string_view::npos &&
         ParseInt<int32_t>(index).ok();
}

class Validator {
 public:
  Validator(const Config& config,
            const std::map<std::string, std::string, std::less<>>& origins)
      : config_(config), origins_(origins) {}

  absl::Status Run() {
    const ServerConfig& s = config_.server;
    HostPort("server.listen", s.listen);
    if (!s.metrics_listen.empty()) {
      HostPort("server.metrics_listen", s.metrics_listen);
    }
    Range<int64_t>("server.queue_capacity", s.queue_capacity, 1, 100000);
    Positive("server.default_deadline_s", s.default_deadline_s);
    Positive("server.max_deadline_s", s.max_deadline_s);
    if (s.default_deadline_s > s.max_deadline_s) {
      Error("server.default_deadline_s",
            absl::StrCat(FormatDouble(s.default_deadline_s),
                         " must be <= server.max_deadline_s (",
                         FormatDouble(s.max_deadline_s), ")"));
    }
    NonNegative("server.drain_deadline_s", s.drain_deadline_s);
    NonNegative("server.drain_grace_s", s.drain_grace_s);
    constexpr int64_t kMaxMessage = (int64_t{2} << 30) - 1;  // gRPC: int
    Range<int64_t>("server.max_receive_message_bytes",
                   s.max_receive_message_bytes, 1024, kMaxMessage);
    Range<int64_t>("server.max_send_message_bytes", s.max_send_message_bytes,
                   1024, kMaxMessage);
    Range<int64_t>("server.max_concurrent_streams", s.max_concurrent_streams, 1,
                   std::numeric_limits<int32_t>::max());
    if (s.tls_cert.empty() != s.tls_key.empty()) {
      const bool cert = !s.tls_cert.empty();
      Error(cert ? "server.tls_cert" : "server.tls_key",
            absl::StrCat("is set but ",
                         cert ? "server.tls_key" : "server.tls_cert",
                         " is empty; TLS needs both or neither"));
    }

    const ModelConfig& m = config_.model;
    if (m.path.empty()) {
      Error("model.path", "is empty (a checkpoint directory or \"fake\")");
    }
    if (!IsDevice(m.device)) {
      Error("model.device",
            absl::StrCat(Quote(m.device), " is not cpu, cuda or cuda:N"));
    }
    Range<int64_t>("model.threads", m.threads, 0,
                   std::numeric_limits<int32_t>::max());
    SecondsUpToAnHour("model.fake_delay_s", m.fake_delay_s);
    SecondsUpToAnHour("model.fake_load_s", m.fake_load_s);
    Range<int64_t>("engine.batch_tokens", config_.engine.batch_tokens, 1,
                   int64_t{1} << 24);
    Range<int64_t>("engine.prefix_cache_bytes",
                   config_.engine.prefix_cache_bytes, 0, int64_t{1} << 40);
    Range<int64_t>("decisions.workers", config_.decisions.workers, 1, 256);

    Positive("client.timeout_s", config_.client.timeout_s);
    if (config_.client.address.empty()) Error("client.address", "is empty");
    Positive("gateway.timeout_s", config_.gateway.timeout_s);
    Range<int64_t>("gateway.workers", config_.gateway.workers, 1, 256);
    Range<int64_t>("gateway.logprobs", config_.gateway.logprobs, 1, 20);
    Range<int64_t>("gateway.max_choice_k", config_.gateway.max_choice_k, 2, 26);

    // Schema-wide rules: every limit is a positive count, every enum holds
    // one of its choices (a default edited in config.h is checked too).
    for (const Field& field : kFields) {
      if (field.section() == "limits") {
        std::visit(
            [&](auto access) {
              using T = std::remove_reference_t<decltype(access(config_))>;
              if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
                Range<int64_t>(field.key(), access(config_), 1,
                               std::numeric_limits<T>::max());
              }
            },
            field.access);
      }
      if (field.type == FieldType::kEnum) {
        const std::string& value =
            std::get<Accessor<std::string>>(field.access)(config_);
        if (std::find(field.choices.begin(), field.choices.end(), value) ==
            field.choices.end()) {
          Error(field.key(), absl::StrCat(Quote(value), " is not one of ",
                                          absl::StrJoin(field.choices, ", ")));
        }
      }
    }

    if (errors_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("config: ", absl::StrJoin(errors_, "; ")));
  }

 private:
  void Error(absl::string_view key, absl::string_view message) {
    const auto origin = origins_.find(key);
    errors_.push_back(
        absl::StrCat(key, ": ", message,
                     origin == origins_.end()
                         ? ""
                         : absl::StrCat(" (from ", origin->second, ")")));
  }

  template <typename T>
  void Range(absl::string_view key, T value, T lo, T hi) {
    if (value < lo || value > hi) {
      Error(key, absl::StrCat(value, " is out of range [", lo, ", ", hi, "]"));
    }
  }

  void Positive(absl::string_view key, double value) {
    if (!(value > 0)) {
      Error(key, absl::StrCat(FormatDouble(value), " must be > 0"));
    }
  }

  void NonNegative(absl::string_view key, double value) {
    if (value < 0) {
      Error(key, absl::StrCat(FormatDouble(value), " must be >= 0"));
    }
  }

  void SecondsUpToAnHour(absl::string_view key, double value) {
    if (!(value >= 0 && value <= 3600)) {
      Error(key,
            absl::StrCat(FormatDouble(value), " is out of range [0, 3600]"));
    }
  }

  void HostPort(absl::string_view key, const std::string& value) {
    const std::string problem = HostPortProblem(value);
    if (!problem.empty()) {
      Error(key,
            absl::StrCat(Quote(value), " is not host:port (", problem, ")"));
    }
  }

  Config config_;  // a copy: the schema accessors take a mutable Config
  const std::map<std::string, std::string, std::less<>>& origins_;
  std::vector<std::string> errors_;
};

}  // namespace

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const absl::string_view text(*entry);
    const size_t equals = text.find('=');
    if (equals == absl::string_view::npos) continue;
    // emplace keeps the first of duplicate names, as getenv() does.
    env.emplace(text.substr(0, equals), text.substr(equals + 1));
  }
  return env;
}

absl::StatusOr<Config> LoadConfig(const LoadOptions& options) {
  State state;
  if (!options.config_path.empty()) {
    RETURN_IF_ERROR(
        ApplyFile(ExpandHome(options.config_path, options.env), &state));
  }
  RETURN_IF_ERROR(ApplyEnvironment(options.env, &state));
  RETURN_IF_ERROR(ApplyFlags(options.flags, &state));
  RETURN_IF_ERROR(Validator(state.config, state.origins).Run());
  return state.config;
}

absl::Status ValidateConfig(const Config& config) {
  const std::map<std::string, std::string, std::less<>> no_origins;
  return Validator(config, no_origins).Run();
}

std::vector<std::string> KnownKeys() {
  std::vector<std::string> keys;
  for (const Field& field : kFields) keys.emplace_back(field.key());
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::string ToYaml(const Config& config) {
  Config copy = config;  // the schema accessors take a mutable Config
  std::string out = "# mesa-anyjev effective configuration\n";
  absl::string_view section;
  for (const Field& field : kFields) {
    if (field.section() != section) {
      section = field.section();
      absl::StrAppend(&out, section, ":\n");
    }
    absl::StrAppend(&out, "  ", field.name(), ": ", FormatValue(field, &copy),
                    "\n");
  }
  return out;
}

}  // namespace mesa_anyjev::config
