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
#include <optional>
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
#include "absl/strings/strip.h"
#include "common/config/config_schema.h"
#include "common/config/config_validator.h"
#include "common/config/yaml_document.h"
#include "common/status/status_macros.h"
#include "common/text/utf8.h"
#include "common/util/files.h"
#include "common/util/host_port.h"
#include "yaml-cpp/yaml.h"

extern char** environ;

namespace mesa_anyjev::config {

using schema::Field;
using schema::Fields;
using schema::FindField;
using schema::FormatValue;
using schema::IsSection;
using schema::KnownSections;
using schema::Quote;
using schema::SetField;
using schema::UnknownKeyError;

namespace {

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

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  auto text = util::ReadFile(
      path, {.max_bytes = 1 << 20, .limit_name = "the 1 MiB config cap"});
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config: ", path,
        ": cannot read the configuration file: ", text.status().message()));
  }
  // YAML streams hold printable characters only: control bytes are refused
  // before yaml-cpp sees them.
  if (const int64_t bad = text::FirstInvalidUtf8(*text); bad >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: ", path, ": invalid UTF-8 at byte offset ", bad));
  }
  for (size_t i = 0; i < text->size(); ++i) {
    const auto c = static_cast<unsigned char>((*text)[i]);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config: ", path, ": control byte 0x", absl::Hex(c, absl::kZeroPad2),
          " at byte offset ", i, " (YAML holds printable characters only)"));
    }
  }
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
  ASSIGN_OR_RETURN(const std::optional<YAML::Node> document,
                   ParseOneYamlDocument(text, absl::StrCat("config: ", path)));
  if (!document.has_value()) return absl::OkStatus();  // empty file = {}
  // yaml-cpp reports everything by exception; none may escape LoadConfig.
  try {
    return ApplyDocument(path, *document, state);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: ", path, ": ", e.what()));
  }
}

constexpr absl::string_view kEnvPrefix = "MESA_ANYJEV_";
constexpr absl::string_view kGatewayApiKeyKey = "backend.gateway_api_key";

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
    // A secret, read by the gateway backend itself; never a config value.
    if (key == kGatewayApiKeyKey) continue;
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
  // mesa-mcp's variable, used only when the native one is absent, as the
  // reference reads it: a trailing "/" and then "/v1" are stripped.
  const auto llm = env.find("MESA_LLM_BASE_URL");
  if (llm != env.end() &&
      !variable_of_key.contains("backend.gateway_base_url")) {
    absl::string_view url = llm->second;
    absl::ConsumeSuffix(&url, "/");
    absl::ConsumeSuffix(&url, "/v1");
    RETURN_IF_ERROR(Apply(*FindField("backend.gateway_base_url"),
                          std::string(url), "environment MESA_LLM_BASE_URL", "",
                          state));
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
  RETURN_IF_ERROR(ValidateMerged(state.config, state.origins));
  return state.config;
}

absl::StatusOr<Config> WithOverrides(const Config& base,
                                     const std::vector<Override>& flags) {
  State state;
  state.config = base;
  RETURN_IF_ERROR(ApplyFlags(flags, &state));
  RETURN_IF_ERROR(ValidateMerged(state.config, state.origins));
  return state.config;
}

absl::Status ValidateConfig(const Config& config) {
  const std::map<std::string, std::string, std::less<>> no_origins;
  return ValidateMerged(config, no_origins);
}

std::vector<std::string> KnownKeys() {
  std::vector<std::string> keys;
  for (const Field& field : Fields()) keys.emplace_back(field.key());
  std::sort(keys.begin(), keys.end());
  return keys;
}

nlohmann::ordered_json ToJson(const Config& config) {
  Config copy = config;  // the schema accessors take a mutable Config
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const Field& field : Fields()) {
    nlohmann::ordered_json& section = out[std::string(field.section())];
    std::visit(
        [&](auto access) { section[std::string(field.name())] = access(copy); },
        field.access);
  }
  return out;
}

std::string ToYaml(const Config& config) {
  Config copy = config;  // the schema accessors take a mutable Config
  std::string out = "# mesa-anyjev effective configuration\n";
  absl::string_view section;
  for (const Field& field : Fields()) {
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
