#include "common/config/config_loader.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/unit/temp_dir.h"

namespace mesa_anyjev::config {
namespace {

using Catch::Contains;
using ::mesa_anyjev::testing::TempDir;

Config LoadOk(const LoadOptions& options) {
  absl::StatusOr<Config> config = LoadConfig(options);
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  return *config;
}

// Every failure must be InvalidArgument starting "config: " (exit code 2).
std::string LoadError(const LoadOptions& options) {
  absl::StatusOr<Config> config = LoadConfig(options);
  REQUIRE_FALSE(config.ok());
  const std::string message(config.status().message());
  INFO(message);
  CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StartsWith(message, "config: "));
  return message;
}

LoadOptions WithFlag(const std::string& key, const std::string& value) {
  LoadOptions options;
  options.flags.push_back({key, value, "flag --" + key});
  return options;
}

std::string FlagError(const std::string& key, const std::string& value) {
  return LoadError(WithFlag(key, value));
}

void FlagOk(const std::string& key, const std::string& value) {
  INFO(key << " = " << value);
  LoadOk(WithFlag(key, value));
}

TEST_CASE("config: no sources gives the built-in defaults", "[config]") {
  const Config config = LoadOk({});
  const Config defaults;
  CHECK(ToYaml(config) == ToYaml(defaults));
  CHECK(config.server.listen == "127.0.0.1:50151");
  CHECK(config.server.queue_capacity == 64);
  CHECK(config.server.reflection);
  CHECK(config.model.path == "fake");
  CHECK(config.log.level == "info");
  CHECK(ValidateConfig(defaults).ok());
}

TEST_CASE("config: KnownKeys lists every section.field, sorted", "[config]") {
  const std::vector<std::string> keys = KnownKeys();
  CHECK(std::is_sorted(keys.begin(), keys.end()));
  CHECK(std::adjacent_find(keys.begin(), keys.end()) == keys.end());
  for (const char* key :
       {"server.listen", "server.queue_capacity", "server.tls_key",
        "model.fake_delay_s", "limits.max_top_k", "limits.max_text_bytes",
        "auth.token_file", "client.address", "client.tls_ca",
        "backend.gateway_base_url", "backend.gateway_api_key_env",
        "decider.level", "policy.max_avus", "artifacts.dir", "log.level"}) {
    INFO(key);
    CHECK(std::find(keys.begin(), keys.end(), key) != keys.end());
  }
  // Every key is settable by flag with the value ToYaml shows for it.
  const std::string yaml = ToYaml(Config{});
  for (const std::string& key : keys) {
    const std::string field = key.substr(key.find('.') + 1);
    INFO(key);
    CHECK(absl::StrContains(yaml, absl::StrCat("  ", field, ": ")));
  }
}

TEST_CASE("config: values come from the YAML file", "[config]") {
  TempDir dir;
  LoadOptions options;
  options.config_path = dir.Write("c.yaml", R"(# a comment
server:
  listen: "0.0.0.0:6000"
  queue_capacity: 7
  default_deadline_s: 2.5
  reflection: no
  max_receive_message_bytes: 1048576
model:
  path: /models/ckpt
  dtype: bfloat16
  device: cuda:1
  threads: 4
limits:
  max_top_k: 5
client:
  timeout_s: 3
log:
  level: debug
)");
  const Config config = LoadOk(options);
  CHECK(config.server.listen == "0.0.0.0:6000");
  CHECK(config.server.queue_capacity == 7);
  CHECK(config.server.default_deadline_s == 2.5);
  CHECK_FALSE(config.server.reflection);
  CHECK(config.server.max_receive_message_bytes == 1048576);
  CHECK(config.model.path == "/models/ckpt");
  CHECK(config.model.dtype == "bfloat16");
  CHECK(config.model.device == "cuda:1");
  CHECK(config.model.threads == 4);
  CHECK(config.limits.max_top_k == 5);
  CHECK(config.client.timeout_s == 3.0);
  CHECK(config.log.level == "debug");
  // Untouched keys keep their defaults.
  CHECK(config.server.max_deadline_s == 120.0);
  CHECK(config.limits.max_groups == 64);
}

TEST_CASE("config: precedence is flag > environment > file > default",
          "[config]") {
  TempDir dir;
  LoadOptions options;
  options.config_path = dir.Write("c.yaml",
                                  "server:\n"
                                  "  queue_capacity: 10\n"
                                  "  listen: 127.0.0.1:1000\n"
                                  "  port_file: /file/port\n");
  options.env = {{"MESA_ANYJEV_SERVER__QUEUE_CAPACITY", "20"},
                 {"MESA_ANYJEV_SERVER__LISTEN", "127.0.0.1:2000"}};
  options.flags = {{"server.listen", "127.0.0.1:3000", "flag --listen"}};

  const Config config = LoadOk(options);
  CHECK(config.server.port_file == "/file/port");   // file over default
  CHECK(config.server.queue_capacity == 20);        // env over file
  CHECK(config.server.listen == "127.0.0.1:3000");  // flag over env
  CHECK(config.server.max_deadline_s == 120.0);     // default

  SECTION("the last of repeated flags wins") {
    options.flags.push_back({"server.listen", "127.0.0.1:4000", "flag -l"});
    CHECK(LoadOk(options).server.listen == "127.0.0.1:4000");
  }
}

TEST_CASE("config: unknown keys are refused, named", "[config]") {
  TempDir dir;
  SECTION("unknown field in the file lists the section's fields") {
    LoadOptions options;
    options.config_path =
        dir.Write("c.yaml", "server:\n  queue_capacity: 3\n  lisen: x:1\n");
    const std::string message = LoadError(options);
    CHECK_THAT(message, Contains(absl::StrCat("config: ", options.config_path,
                                              ": unknown key 'server.lisen'")));
    CHECK_THAT(message, Contains("line 3"));
    CHECK_THAT(message, Contains("listen"));
    CHECK_THAT(message, Contains("queue_capacity"));
  }
  SECTION("unknown section in the file") {
    LoadOptions options;
    options.config_path = dir.Write("c.yaml", "planner:\n  kind: static\n");
    const std::string message = LoadError(options);
    CHECK_THAT(message, Contains(options.config_path));
    CHECK_THAT(message, Contains("unknown section 'planner'"));
    CHECK_THAT(
        message,
        Contains("server, model, engine, limits, decisions, auth, client, "
                 "backend, decider, policy, artifacts, compare, labels, log"));
  }
  SECTION("unknown field in the environment") {
    LoadOptions options;
    options.env = {{"MESA_ANYJEV_SERVER__LISEN", "x:1"}};
    const std::string message = LoadError(options);
    CHECK_THAT(message, Contains("environment MESA_ANYJEV_SERVER__LISEN"));
    CHECK_THAT(message, Contains("unknown key 'server.lisen'"));
  }
  SECTION("unknown section in the environment") {
    LoadOptions options;
    options.env = {{"MESA_ANYJEV_PLANNER__KIND", "static"}};
    const std::string message = LoadError(options);
    CHECK_THAT(message, Contains("environment MESA_ANYJEV_PLANNER__KIND"));
    CHECK_THAT(message, Contains("unknown section 'planner'"));
  }
  SECTION("unknown flag key names the flag") {
    const std::string message = FlagError("server.lisen", "x:1");
    CHECK_THAT(message, Contains("config: flag --server.lisen: unknown key "
                                 "'server.lisen'"));
  }
  SECTION("a flag key without a section") {
    CHECK_THAT(FlagError("listen", "x:1"), Contains("keys are section.field"));
  }
}

TEST_CASE("config: environment mapping", "[config]") {
  SECTION("names are case-insensitive") {
    LoadOptions options;
    options.env = {{"mesa_anyjev_Server__Queue_Capacity", "9"},
                   {"MESA_ANYJEV_LOG__LEVEL", "warn"}};
    const Config config = LoadOk(options);
    CHECK(config.server.queue_capacity == 9);
    CHECK(config.log.level == "warn");
  }
  SECTION("variables without __ are not configuration") {
    LoadOptions options;
    options.env = {{"MESA_ANYJEV_VENV", "/opt/venv"},
                   {"MESA_ANYJEV_E2E", "1"},
                   {"MESA_ANYJEV_TEST_PG_DSN", "x"},
                   {"HOME", "/root"},
                   {"SERVER__LISTEN", "nonsense"}};
    CHECK(ToYaml(LoadOk(options)) == ToYaml(Config{}));
  }
  SECTION("a bad value names the variable, the value and the reason") {
    LoadOptions options;
    options.env = {{"MESA_ANYJEV_SERVER__QUEUE_CAPACITY", "abc"}};
    CHECK_THAT(LoadError(options),
               Contains("config: environment "
                        "MESA_ANYJEV_SERVER__QUEUE_CAPACITY: 'abc' is not an "
                        "integer"));
  }
  SECTION("two spellings of one key are refused") {
    LoadOptions options;
    options.env = {{"MESA_ANYJEV_LOG__LEVEL", "warn"},
                   {"mesa_anyjev_log__level", "error"}};
    CHECK_THAT(LoadError(options), Contains("both set log.level"));
  }
  SECTION("ProcessEnvironment sees the process's variables") {
    REQUIRE(::setenv("MESA_ANYJEV_CFGTEST_PROBE", "a=b", 1) == 0);
    const auto env = ProcessEnvironment();
    ::unsetenv("MESA_ANYJEV_CFGTEST_PROBE");
    const auto it = env.find("MESA_ANYJEV_CFGTEST_PROBE");
    REQUIRE(it != env.end());
    CHECK(it->second == "a=b");
  }
}

TEST_CASE("config: values parse by declared type", "[config]") {
  SECTION("integers: whole string, in range") {
    CHECK_THAT(FlagError("server.queue_capacity", "12x"),
               Contains("'12x' is not an integer"));
    CHECK_THAT(FlagError("server.queue_capacity", ""),
               Contains("'' is not an integer"));
    CHECK_THAT(FlagError("server.queue_capacity", " 5"),
               Contains("is not an integer"));
    CHECK_THAT(FlagError("server.queue_capacity", "1.5"),
               Contains("is not an integer"));
    CHECK_THAT(FlagError("limits.max_groups", "2147483648"),
               Contains("'2147483648' is out of range [-2147483648, "
                        "2147483647]"));
    CHECK_THAT(FlagError("limits.max_text_bytes", "9223372036854775808"),
               Contains("is out of range"));
    const std::string message = FlagError("server.queue_capacity", "abc");
    CHECK_THAT(message, Contains("flag --server.queue_capacity"));
    CHECK_THAT(message, Contains("(server.queue_capacity)"));
    CHECK(LoadOk(WithFlag("limits.max_text_bytes", "4294967296"))
              .limits.max_text_bytes == 4294967296);
  }
  SECTION("doubles: finite numbers only") {
    CHECK_THAT(FlagError("client.timeout_s", "abc"),
               Contains("'abc' is not a number"));
    CHECK_THAT(FlagError("client.timeout_s", "inf"),
               Contains("is not a finite number"));
    CHECK_THAT(FlagError("client.timeout_s", "nan"),
               Contains("is not a finite number"));
    CHECK_THAT(FlagError("client.timeout_s", "1e999"), Contains("range"));
    CHECK_THAT(FlagError("client.timeout_s", "3s"),
               Contains("is not a number"));
    CHECK(LoadOk(WithFlag("client.timeout_s", "0.25")).client.timeout_s ==
          0.25);
    CHECK(LoadOk(WithFlag("client.timeout_s", "1e1")).client.timeout_s == 10.0);
  }
  SECTION("booleans: true/false/yes/no/1/0, any case") {
    for (const char* yes : {"true", "TRUE", "Yes", "1"}) {
      LoadOptions options = WithFlag("server.reflection", "false");
      options.flags.push_back({"server.reflection", yes, "flag"});
      CHECK(LoadOk(options).server.reflection);
    }
    for (const char* no : {"false", "False", "NO", "0"}) {
      CHECK_FALSE(LoadOk(WithFlag("server.reflection", no)).server.reflection);
    }
    CHECK_THAT(FlagError("server.reflection", "maybe"),
               Contains("'maybe' is not a boolean"));
    CHECK_THAT(FlagError("server.reflection", "on"),
               Contains("is not a boolean"));
  }
  SECTION("enums: one of the listed strings") {
    CHECK_THAT(FlagError("model.dtype", "float16"),
               Contains("'float16' is not one of float32, bfloat16"));
    CHECK_THAT(FlagError("log.level", "verbose"),
               Contains("'verbose' is not one of trace, debug, info, warn, "
                        "error"));
    CHECK_THAT(FlagError("log.level", "INFO"), Contains("is not one of"));
    for (const char* level : {"trace", "debug", "info", "warn", "error"}) {
      CHECK(LoadOk(WithFlag("log.level", level)).log.level == level);
    }
  }
  SECTION("file values name the file, the key and the line") {
    TempDir dir;
    LoadOptions options;
    options.config_path =
        dir.Write("c.yaml",
                  "server:\n  reflection: true\n  queue_capacity: "
                  "lots\n");
    const std::string message = LoadError(options);
    CHECK_THAT(message, Contains(absl::StrCat("config: ", options.config_path,
                                              ": 'lots' is not an integer")));
    CHECK_THAT(message, Contains("server.queue_capacity, line 3"));
  }
}

TEST_CASE("config: YAML 1.1 typing does not apply", "[config]") {
  TempDir dir;
  LoadOptions options;
  options.config_path = dir.Write("c.yaml",
                                  "model:\n"
                                  "  path: off\n"
                                  "server:\n"
                                  "  port_file: yes\n"
                                  "  metrics_port_file: 0123\n"
                                  "auth:\n"
                                  "  token_env: null\n"
                                  "client:\n"
                                  "  token_env: 'TRUE'\n");
  const Config config = LoadOk(options);
  CHECK(config.model.path == "off");
  CHECK(config.server.port_file == "yes");
  CHECK(config.server.metrics_port_file == "0123");
  CHECK(config.auth.token_env.empty());  // YAML null: the empty string
  CHECK(config.client.token_env == "TRUE");

  SECTION("a quoted number still parses for a numeric field") {
    options.config_path =
        dir.Write("d.yaml", "server:\n  queue_capacity: \"12\"\n");
    CHECK(LoadOk(options).server.queue_capacity == 12);
  }
  SECTION("null for a number is an error") {
    options.config_path = dir.Write("d.yaml", "server:\n  queue_capacity:\n");
    CHECK_THAT(LoadError(options), Contains("is not an integer"));
  }
}

TEST_CASE("config: file shape", "[config]") {
  TempDir dir;
  LoadOptions options;
  SECTION("empty, comment-only and bare-document files are {}") {
    for (const char* text : {"", "# nothing\n", "---\n", "\n\n"}) {
      options.config_path = dir.Write("c.yaml", text);
      CHECK(ToYaml(LoadOk(options)) == ToYaml(Config{}));
    }
  }
  SECTION("a section with no fields is fine") {
    options.config_path = dir.Write("c.yaml", "server:\nlog:\n  level: warn\n");
    CHECK(LoadOk(options).log.level == "warn");
  }
  SECTION("the top level must be a mapping") {
    for (const char* text : {"- a\n- b\n", "just text\n", "42\n"}) {
      options.config_path = dir.Write("c.yaml", text);
      CHECK(LoadError(options) ==
            absl::StrCat("config: ", options.config_path,
                         ": the configuration file must be a mapping"));
    }
  }
  SECTION("a section must be a mapping") {
    options.config_path = dir.Write("c.yaml", "server: 5\n");
    CHECK_THAT(LoadError(options),
               Contains("section 'server' must be a mapping"));
  }
  SECTION("a mapping or sequence where a value is expected") {
    options.config_path =
        dir.Write("c.yaml", "server:\n  listen:\n    host: a\n");
    CHECK_THAT(LoadError(options),
               Contains("server.listen must be a single value, not a mapping"));
    options.config_path = dir.Write("c.yaml", "server:\n  listen: [a, b]\n");
    CHECK_THAT(LoadError(options),
               Contains("server.listen must be a single value, not a "
                        "sequence"));
  }
  SECTION("duplicate keys are refused") {
    options.config_path =
        dir.Write("c.yaml", "log:\n  level: warn\n  level: error\n");
    CHECK_THAT(LoadError(options), Contains("duplicate key 'log.level'"));
    options.config_path =
        dir.Write("c.yaml", "log:\n  level: warn\nlog:\n  level: error\n");
    CHECK_THAT(LoadError(options), Contains("duplicate section 'log'"));
  }
  SECTION("more than one document is refused") {
    options.config_path =
        dir.Write("c.yaml", "log:\n  level: warn\n---\nlog:\n  level: info\n");
    CHECK_THAT(LoadError(options), Contains("2 or more YAML documents"));
  }
  SECTION("a YAML syntax error names the path and the line") {
    options.config_path =
        dir.Write("c.yaml", "server:\n  listen: x:1\n queue_capacity: 3\n");
    CHECK(LoadError(options) ==
          absl::StrCat("config: ", options.config_path,
                       ": YAML syntax error at line 3, column 2: end of map "
                       "not found"));
    options.config_path = dir.Write("c.yaml", "a: b: c\n");
    CHECK_THAT(LoadError(options), Contains("YAML syntax error at line 1"));
  }
  SECTION("a missing file is named") {
    options.config_path = dir.path() + "/nope.yaml";
    const std::string message = LoadError(options);
    CHECK_THAT(message, Contains(absl::StrCat("config: ", options.config_path,
                                              ": cannot read")));
    CHECK_THAT(message, Contains("does not exist"));
  }
  SECTION("a directory is not a configuration file") {
    options.config_path = dir.path();
    CHECK_THAT(LoadError(options), Contains("is not a regular file"));
  }
  SECTION("control bytes are refused before YAML sees them") {
    // yaml-cpp 0.7's LoadAll never returned on this (found by fuzzing).
    options.config_path =
        dir.Write("c.yaml", std::string(",imits:\n  max_gro~ps:\x01\0\0", 24));
    CHECK_THAT(LoadError(options),
               Contains("control byte 0x01 at byte offset 21"));
    // yaml-cpp 0.7's LoadAll never returned on a leading ','.
    options.config_path = dir.Write("d.yaml", ",a");
    CHECK_THAT(LoadError(options), Contains("config: "));
  }
  SECTION("an unreadable file is named") {
    options.config_path = dir.Write("locked.yaml", "log:\n  level: warn\n");
    REQUIRE(::chmod(options.config_path.c_str(), 0) == 0);
    if (::geteuid() != 0) {  // root reads it anyway
      CHECK_THAT(LoadError(options), Contains(options.config_path));
    }
  }
  SECTION("~/ expands to HOME from the environment snapshot") {
    dir.Write("home.yaml", "log:\n  level: error\n");
    options.config_path = "~/home.yaml";
    options.env = {{"HOME", dir.path()}};
    CHECK(LoadOk(options).log.level == "error");
  }
}

TEST_CASE("config: host:port validation", "[config]") {
  for (const char* good : {"127.0.0.1:50151", "0.0.0.0:0", "localhost:65535",
                           "[::1]:8080", "[::]:0", "my-host.example:443"}) {
    FlagOk("server.listen", good);
    FlagOk("server.metrics_listen", good);
  }
  FlagOk("server.metrics_listen", "");  // metrics off
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", ":50151", "host:65536",
                          "host:-1", "host:12ab", "::1:80", "[::1]80",
                          "[::1:80", "[]:80", "a b:80", "host:123456"}) {
    INFO(bad);
    const std::string message = FlagError("server.listen", bad);
    CHECK_THAT(message, Contains("server.listen: "));
    CHECK_THAT(message, Contains("is not host:port"));
  }
  CHECK_THAT(FlagError("server.metrics_listen", "9464"),
             Contains("server.metrics_listen: '9464' is not host:port"));
}

TEST_CASE("config: range limits", "[config]") {
  SECTION("server") {
    FlagOk("server.queue_capacity", "1");
    FlagOk("server.queue_capacity", "100000");
    CHECK_THAT(FlagError("server.queue_capacity", "0"),
               Contains("server.queue_capacity: 0 is out of range [1, "
                        "100000]"));
    CHECK_THAT(FlagError("server.queue_capacity", "100001"),
               Contains("server.queue_capacity: 100001 is out of range"));
    CHECK_THAT(FlagError("server.default_deadline_s", "0"),
               Contains("server.default_deadline_s: 0.0 must be > 0"));
    CHECK_THAT(FlagError("server.max_deadline_s", "-1"),
               Contains("server.max_deadline_s: -1.0 must be > 0"));
    CHECK_THAT(FlagError("server.default_deadline_s", "121"),
               Contains("must be <= server.max_deadline_s (120.0)"));
    FlagOk("server.default_deadline_s", "120");
    FlagOk("server.drain_deadline_s", "0");
    CHECK_THAT(FlagError("server.drain_deadline_s", "-0.5"),
               Contains("server.drain_deadline_s: -0.5 must be >= 0"));
    CHECK_THAT(FlagError("server.drain_grace_s", "-1"),
               Contains("server.drain_grace_s"));
    for (const char* key : {"server.max_receive_message_bytes",
                            "server.max_send_message_bytes"}) {
      FlagOk(key, "1024");
      FlagOk(key, "2147483647");
      CHECK_THAT(FlagError(key, "1023"),
                 Contains("is out of range [1024, 2147483647]"));
      CHECK_THAT(FlagError(key, "2147483648"),
                 Contains("is out of range [1024, 2147483647]"));
    }
    CHECK_THAT(FlagError("server.max_concurrent_streams", "0"),
               Contains("server.max_concurrent_streams: 0 is out of range"));
  }
  SECTION("model") {
    CHECK_THAT(FlagError("model.path", ""), Contains("model.path: is empty"));
    for (const char* good : {"cpu", "cuda", "cuda:0", "cuda:7"}) {
      FlagOk("model.device", good);
    }
    for (const char* bad :
         {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU", "cuda:99999999999"}) {
      INFO(bad);
      CHECK_THAT(FlagError("model.device", bad),
                 Contains("is not cpu, cuda or cuda:N"));
    }
    FlagOk("model.threads", "0");
    CHECK_THAT(FlagError("model.threads", "-1"),
               Contains("model.threads: -1 is out of range"));
    FlagOk("model.fake_delay_s", "3600");
    CHECK_THAT(FlagError("model.fake_delay_s", "3600.5"),
               Contains("model.fake_delay_s: 3600.5 is out of range [0, "
                        "3600]"));
    CHECK_THAT(FlagError("model.fake_delay_s", "-0.1"),
               Contains("is out of range [0, 3600]"));
    CHECK_THAT(FlagError("model.fake_load_s", "4000"),
               Contains("model.fake_load_s"));
  }
  SECTION("every limits.* is at least 1") {
    int count = 0;
    for (const std::string& key : KnownKeys()) {
      if (!absl::StartsWith(key, "limits.")) continue;
      ++count;
      INFO(key);
      FlagOk(key, "1");
      CHECK_THAT(FlagError(key, "0"),
                 Contains(absl::StrCat(key, ": 0 is out of range [1, ")));
    }
    CHECK(count == 14);
  }
  SECTION("decisions") {
    CHECK_THAT(FlagError("decisions.workers", "0"),
               Contains("decisions.workers: 0 is out of range [1, 256]"));
    CHECK_THAT(FlagError("decisions.prior", "uniform"),
               Contains("decisions.prior"));
    FlagOk("decisions.prior", "content_free");
    FlagOk("decisions.auto_routes_reworded", "false");
  }
  SECTION("client") {
    CHECK_THAT(FlagError("client.timeout_s", "0"),
               Contains("client.timeout_s: 0.0 must be > 0"));
    CHECK_THAT(FlagError("client.address", ""),
               Contains("client.address: is empty"));
  }
  SECTION("a validation error names where the value came from") {
    LoadOptions options;
    options.env = {{"MESA_ANYJEV_SERVER__QUEUE_CAPACITY", "0"}};
    CHECK_THAT(LoadError(options),
               Contains("(from environment "
                        "MESA_ANYJEV_SERVER__QUEUE_CAPACITY)"));
    TempDir dir;
    LoadOptions from_file;
    from_file.config_path =
        dir.Write("c.yaml", "log:\n  level: warn\nmodel:\n  threads: -2\n");
    CHECK_THAT(
        LoadError(from_file),
        Contains(absl::StrCat("(from ", from_file.config_path, ", line 4)")));
  }
  SECTION("all validation errors are reported, in schema order") {
    LoadOptions options;
    options.flags = {{"log.level", "warn", "flag"},
                     {"client.timeout_s", "0", "flag --timeout"},
                     {"server.queue_capacity", "0", "flag --queue"}};
    CHECK(LoadError(options) ==
          "config: server.queue_capacity: 0 is out of range [1, 100000] "
          "(from flag --queue); client.timeout_s: 0.0 must be > 0 (from "
          "flag --timeout)");
  }
}

TEST_CASE("config: tls_cert and tls_key go together", "[config]") {
  LoadOptions both;
  both.flags = {{"server.tls_cert", "/c.pem", "flag --tls-cert"},
                {"server.tls_key", "/k.pem", "flag --tls-key"}};
  const Config config = LoadOk(both);
  CHECK(config.server.tls_cert == "/c.pem");
  CHECK(config.server.tls_key == "/k.pem");

  CHECK_THAT(FlagError("server.tls_cert", "/c.pem"),
             Contains("server.tls_cert: is set but server.tls_key is empty"));
  CHECK_THAT(FlagError("server.tls_key", "/k.pem"),
             Contains("server.tls_key: is set but server.tls_cert is empty"));
}

TEST_CASE("config: ValidateConfig checks a Config built in code", "[config]") {
  Config config;
  config.server.queue_capacity = 0;
  config.log.level = "loud";
  const absl::Status status = ValidateConfig(config);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(status.message()) ==
        "config: server.queue_capacity: 0 is out of range [1, 100000]; "
        "log.level: 'loud' is not one of trace, debug, info, warn, error");
}

TEST_CASE("config: ToYaml round-trips through LoadConfig", "[config]") {
  TempDir dir;
  SECTION("defaults") {
    const std::string yaml = ToYaml(Config{});
    CHECK(absl::StartsWith(yaml, "# "));
    CHECK(yaml.find("server:\n") < yaml.find("model:\n"));
    CHECK(yaml.find("model:\n") < yaml.find("limits:\n"));
    CHECK(yaml.find("limits:\n") < yaml.find("auth:\n"));
    CHECK(yaml.find("auth:\n") < yaml.find("client:\n"));
    CHECK(yaml.find("client:\n") < yaml.find("log:\n"));
    LoadOptions options;
    options.config_path = dir.Write("d.yaml", yaml);
    CHECK(ToYaml(LoadOk(options)) == yaml);
  }
  SECTION("every field changed, with awkward strings") {
    Config config;
    config.server.listen = "[::1]:0";
    config.server.port_file = "off";
    config.server.metrics_listen = "";
    config.server.metrics_port_file = "with \"quotes\", \\ and 'single'";
    config.server.queue_capacity = 100000;
    config.server.default_deadline_s = 0.1;
    config.server.max_deadline_s = 1e-3 + 1e6;
    config.server.drain_deadline_s = 0;
    config.server.drain_grace_s = 1.0 / 3.0;
    config.server.max_receive_message_bytes = 2147483647;
    config.server.max_send_message_bytes = 1024;
    config.server.max_concurrent_streams = 1;
    config.server.reflection = false;
    config.server.tls_cert = "line1\nline2\ttab\r\x01\x7f";
    config.server.tls_key = "  leading and trailing  ";
    config.model.path = "~";
    config.model.dtype = "bfloat16";
    config.model.device = "cuda:3";
    config.model.threads = 2147483647;
    config.model.fake_delay_s = 3600;
    config.model.fake_load_s = 5e-324;  // the smallest denormal
    config.limits.max_groups = 1;
    config.limits.max_suffixes = 2;
    config.limits.max_prompt_tokens = 3;
    config.limits.max_total_tokens = 4;
    config.limits.max_layers = 5;
    config.limits.max_top_k = 6;
    config.limits.max_label_ids = 7;
    config.limits.max_texts = 8;
    config.limits.max_text_bytes = 9223372036854775807;
    config.auth.token_env = "123";
    config.auth.token_file = "# not a comment";
    config.client.address = "dns:///svc:1";
    config.client.timeout_s = 12345.678901234567;
    config.client.token_env = "null";
    config.client.token_file = "a: b";
    config.client.tls_ca = "caf\xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x98\x80";
    config.log.level = "trace";
    REQUIRE(ValidateConfig(config).ok());

    const std::string yaml = ToYaml(config);
    INFO(yaml);
    LoadOptions options;
    options.config_path = dir.Write("c.yaml", yaml);
    const Config loaded = LoadOk(options);
    CHECK(ToYaml(loaded) == yaml);
    CHECK(loaded.server.port_file == "off");
    CHECK(loaded.server.metrics_port_file == config.server.metrics_port_file);
    CHECK(loaded.server.tls_cert == config.server.tls_cert);
    CHECK(loaded.server.tls_key == config.server.tls_key);
    CHECK(loaded.server.default_deadline_s == 0.1);
    CHECK(loaded.server.drain_grace_s == config.server.drain_grace_s);
    CHECK(loaded.model.fake_load_s == config.model.fake_load_s);
    CHECK(loaded.client.timeout_s == config.client.timeout_s);
    CHECK(loaded.client.token_env == "null");
    CHECK(loaded.client.tls_ca == config.client.tls_ca);
    CHECK(loaded.limits.max_text_bytes == 9223372036854775807);
    CHECK_FALSE(loaded.server.reflection);
  }
}

TEST_CASE("config: the reference's backend keys and their environment",
          "[config]") {
  TempDir dir;
  SECTION("MESA_ANYJEV_BACKEND__KIND sets backend.kind") {
    LoadOptions options;
    options.env = {{"MESA_ANYJEV_BACKEND__KIND", "gateway"},
                   {"MESA_ANYJEV_DECIDER__LEVEL", "L0"}};
    auto config = LoadConfig(options);
    REQUIRE(config.ok());
    CHECK(config->backend.kind == "gateway");
    CHECK(config->decider.level == "L0");
  }
  SECTION("a backend kind outside the four is refused, naming them") {
    LoadOptions options;
    options.env = {{"MESA_ANYJEV_BACKEND__KIND", "vllm"}};
    const std::string message = LoadError(options);
    CHECK_THAT(message, Contains("backend.kind"));
    CHECK_THAT(message, Contains("fake, gateway, hf, composite"));
  }
  SECTION("the API key variable is a secret, not a config value") {
    LoadOptions options;
    options.env = {{"MESA_ANYJEV_BACKEND__GATEWAY_API_KEY", "sk-123"}};
    auto config = LoadConfig(options);
    REQUIRE(config.ok());
    CHECK_FALSE(absl::StrContains(ToYaml(*config), "sk-123"));
  }
  SECTION("an API key in the file is refused without echoing it") {
    LoadOptions options;
    options.config_path =
        dir.Write("c.yaml", "backend:\n  gateway_api_key: sk-123\n");
    const std::string message = LoadError(options);
    CHECK_THAT(message, Contains("is a secret"));
    CHECK_THAT(message, Contains("MESA_LLM_API_KEY"));
    CHECK_FALSE(absl::StrContains(message, "sk-123"));
  }
  SECTION("MESA_LLM_BASE_URL applies without the native variable") {
    LoadOptions options;
    options.env = {{"MESA_LLM_BASE_URL", "http://127.0.0.1:18000/v1/"}};
    auto config = LoadConfig(options);
    REQUIRE(config.ok());
    CHECK(config->backend.gateway_base_url == "http://127.0.0.1:18000");
    options.env["MESA_ANYJEV_BACKEND__GATEWAY_BASE_URL"] =
        "http://localhost:8000";
    config = LoadConfig(options);
    REQUIRE(config.ok());
    CHECK(config->backend.gateway_base_url == "http://localhost:8000");
  }
  SECTION("policy and decider ranges name the field and the limit") {
    CHECK_THAT(FlagError("policy.specificity_delta", "1.5"),
               Contains("policy.specificity_delta"));
    CHECK_THAT(FlagError("decider.max_permutations", "27"),
               Contains("decider.max_permutations"));
    CHECK_THAT(FlagError("decider.level", "L3"),
               Contains("raw, L0, L1, L2, auto"));
  }
}

}  // namespace
}  // namespace mesa_anyjev::config
