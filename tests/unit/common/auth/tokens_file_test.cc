// The tokens file (common/auth/tokens_file.h): what it grants, and every
// kind of bad file refused by name, never echoing a digest.
#include "common/auth/tokens_file.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/auth/tenant_source.h"
#include "common/util/hash.h"
#include "tests/unit/temp_dir.h"

namespace mesa_anyjev::auth {
namespace {

using Catch::Contains;
using ::mesa_anyjev::testing::TempDir;

std::string Entry(const std::string& tenant, const std::string& token,
                  const std::string& role, const std::string& more = "") {
  return absl::StrCat("- tenant: ", tenant,
                      "\n  sha256: ", util::Sha256Hex(token),
                      "\n  role: ", role, "\n", more);
}

std::shared_ptr<const TenantSet> Parse(const std::string& text) {
  auto set = ParseTokensFile(text, "tokens.yaml");
  INFO(set.status().ToString());
  REQUIRE(set.ok());
  return *set;
}

std::string Refusal(const std::string& text) {
  auto set = ParseTokensFile(text, "tokens.yaml");
  REQUIRE_FALSE(set.ok());
  CHECK(set.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string message(set.status().message());
  CHECK_THAT(message, Catch::StartsWith("tokens.yaml: "));
  // One line, and never a digest (of any entry).
  CHECK(message.find('\n') == std::string::npos);
  CHECK(message.find(util::Sha256Hex("t1").substr(0, 16)) == std::string::npos);
  return message;
}

TEST_CASE("tokens file: tenants, roles, shares and the token's tenant",
          "[auth]") {
  const auto set =
      Parse("# a team\n" + Entry("ops", "t1", "admin") +
            Entry("pipe", "t2", "decide",
                  "  weight: 2.5\n  max_queued_calls: 16\n"
                  "  max_queued_tokens: 200000\n  priority: batch\n"
                  "  max_priority: batch\n  created: 2026-12-06T10:00:00Z\n") +
            Entry("pipe", "t3", "decide",
                  "  weight: 2.5\n  max_queued_calls: 16\n"
                  "  max_queued_tokens: 200000\n  priority: batch\n"
                  "  max_priority: batch\n") +
            Entry("curator", "t4", "learn"));
  REQUIRE(set->tenants().size() == 3);
  CHECK(set->token_count() == 4);
  const Tenant* pipe = set->Find("pipe");
  REQUIRE(pipe != nullptr);
  CHECK(pipe->role == Role::kDecide);
  CHECK(pipe->weight == 2.5);
  CHECK(pipe->max_queued_calls == 16);
  CHECK(pipe->max_queued_tokens == 200000);
  CHECK(pipe->priority == Priority::kBatch);
  CHECK(pipe->max_priority == Priority::kBatch);
  // Both of a rotated tenant's tokens name it; unknown tokens name none.
  CHECK(set->Match(DigestOf("t2")) == pipe);
  CHECK(set->Match(DigestOf("t3")) == pipe);
  CHECK(set->Match(DigestOf("t1"))->name == "ops");
  CHECK(set->Match(DigestOf("t5")) == nullptr);
  CHECK(set->Match(DigestOf("")) == nullptr);
  const Tenant* curator = set->Find("curator");
  CHECK(curator->weight == 1.0);
  CHECK(curator->max_queued_calls == 0);
  CHECK_FALSE(curator->priority.has_value());
  CHECK(curator->max_priority == Priority::kInteractive);
  CHECK(DescribeTenants(*set) ==
        "3 tenants, 4 tokens: ops (admin), pipe (decide, weight 2.5, batch "
        "only, max 16 calls, max 200000 tokens), curator (learn)");
}

TEST_CASE("tokens file: roles nest and classes resolve under the cap",
          "[auth]") {
  Tenant t;
  t.role = Role::kLearn;
  CHECK(t.MayDo(Role::kDecide));
  CHECK(t.MayDo(Role::kLearn));
  CHECK_FALSE(t.MayDo(Role::kAdmin));
  // Asked, else the tenant's default, else interactive.
  CHECK(t.Resolve(std::nullopt) == Priority::kInteractive);
  CHECK(t.Resolve(Priority::kBatch) == Priority::kBatch);
  t.priority = Priority::kBatch;
  CHECK(t.Resolve(std::nullopt) == Priority::kBatch);
  CHECK(t.Resolve(Priority::kInteractive) == Priority::kInteractive);
  CHECK_FALSE(t.Caps(Priority::kInteractive));
  // A tenant limited to batch is served as batch whatever it asks.
  t.max_priority = Priority::kBatch;
  CHECK(t.Resolve(Priority::kInteractive) == Priority::kBatch);
  CHECK(t.Caps(Priority::kInteractive));
  CHECK_FALSE(t.Caps(Priority::kBatch));
  CHECK_FALSE(t.Caps(std::nullopt));
}

TEST_CASE("tokens file: bad files are refused by entry, field and rule",
          "[auth]") {
  const std::string ok = Entry("ops", "t1", "admin");
  CHECK_THAT(Refusal("- tenant: [oops\n"),
             Contains("YAML syntax error at line"));
  CHECK_THAT(Refusal(""), Contains("lists no token"));
  CHECK_THAT(Refusal("# only a comment\n"), Contains("lists no token"));
  CHECK_THAT(Refusal("[]\n"), Contains("lists no token"));
  CHECK_THAT(Refusal("tenants: {}\n"),
             Contains("the top level must be a list of entries"));
  CHECK_THAT(Refusal(ok + "---\n" + ok), Contains("2 or more YAML documents"));
  CHECK_THAT(Refusal(ok + "- just text\n"),
             Contains("entry 2 (line 4): must be a mapping"));
  CHECK_THAT(Refusal(ok + Entry("pipe", "t1", "decide")),
             Contains("entry 2 (tenant 'pipe', line 4): sha256: the same "
                      "token as entry 1 (tenant 'ops')"));
  CHECK_THAT(Refusal(ok + Entry("pipe", "t2", "boss")),
             Contains("entry 2 (tenant 'pipe', line 4): role: 'boss' is not "
                      "decide, learn or admin"));
  CHECK_THAT(Refusal(ok + Entry("pipe", "t2", "decide", "  weight: 0\n")),
             Contains("entry 2 (tenant 'pipe', line 4): weight: 0 is not in "
                      "(0, 1000000]"));
  CHECK_THAT(Refusal(ok + Entry("pipe", "t2", "decide", "  weight: -1\n")),
             Contains("weight: -1 is not in (0, 1000000]"));
  CHECK_THAT(Refusal(ok + Entry("pipe", "t2", "decide", "  weight: .nan\n")),
             Contains("weight: '.nan' is not a number"));
  CHECK_THAT(Refusal(ok + Entry("pipe", "t2", "decide", "  weight: inf\n")),
             Contains("weight: inf is not in"));
  CHECK_THAT(
      Refusal(ok + Entry("pipe", "t2", "decide", "  max_queued_calls: -3\n")),
      Contains("max_queued_calls: -3 is not in [0, 1000000]"));
  CHECK_THAT(
      Refusal(ok + Entry("pipe", "t2", "decide", "  max_queued_tokens: x\n")),
      Contains("max_queued_tokens: 'x' is not an integer"));
  CHECK_THAT(Refusal(ok + Entry("pipe", "t2", "decide", "  priority: high\n")),
             Contains("priority: 'high' is not interactive or batch"));
  CHECK_THAT(Refusal(ok + Entry("pipe", "t2", "decide",
                                "  priority: interactive\n"
                                "  max_priority: batch\n")),
             Contains("priority: interactive is above max_priority batch"));
  CHECK_THAT(Refusal(ok + Entry("pipe", "t2", "decide", "  wieght: 2\n")),
             Contains("unknown field 'wieght' (did you mean 'weight'?)"));
  CHECK_THAT(Refusal(ok + Entry("pipe", "t2", "decide", "  role: admin\n")),
             Contains("field 'role' given twice"));
  CHECK_THAT(Refusal(ok + "- tenant: pipe\n  role: decide\n"),
             Contains("entry 2 (tenant 'pipe', line 4): sha256: missing"));
  CHECK_THAT(Refusal(ok + "- tenant: pipe\n  sha256: abc\n  role: decide\n"),
             Contains("sha256: must be 64 hex digits"));
  CHECK_THAT(Refusal(ok + Entry("pipe", "t2", "")),
             Contains("role: '' is not decide, learn or admin"));
  CHECK_THAT(Refusal(ok + Entry("-pipe", "t2", "decide")),
             Contains("tenant: '-pipe': a tenant name is 1..64"));
  CHECK_THAT(Refusal(ok + Entry("null", "t2", "decide")),
             Contains("tenant: must be a non-empty string"));
  CHECK_THAT(Refusal(ok + Entry("ops", "t2", "learn")),
             Contains("entry 2 (tenant 'ops', line 4): role differs from "
                      "entry 1 of the same tenant"));
  std::string many;
  for (size_t i = 0; i <= kMaxTokenEntries; ++i) {
    many += Entry(absl::StrCat("t", i), absl::StrCat("token", i), "decide");
  }
  CHECK_THAT(Refusal(many), Contains("1025 entries exceed the limit of 1024"));
}

TEST_CASE("tokens file: the file must be readable by its owner only",
          "[auth]") {
  TempDir dir;
  const std::string path =
      dir.Write("tokens.yaml", Entry("ops", "t1", "admin"));
  ::chmod(path.c_str(), 0644);
  auto loose = ReadTokensFile(path);
  REQUIRE_FALSE(loose.ok());
  CHECK_THAT(std::string(loose.status().message()),
             Contains("auth.tokens_file (" + path + "): mode 0644") &&
                 Contains("chmod 600"));
  ::chmod(path.c_str(), 0600);
  CHECK(ReadTokensFile(path).ok());
  auto missing = ReadTokensFile(dir.Path("none.yaml"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("tokens file: what tokens add appends parses back", "[auth]") {
  Tenant t;
  t.name = "null";  // quoted, so YAML keeps it a string
  t.role = Role::kLearn;
  t.weight = 0.5;
  t.max_queued_calls = 4;
  t.max_queued_tokens = 1000;
  t.priority = Priority::kBatch;
  t.max_priority = Priority::kBatch;
  const auto set = Parse(Entry("ops", "t1", "admin") +
                         EntryText(t, DigestOf("t9"), "2026-12-06T10:00:00Z"));
  const Tenant* back = set->Match(DigestOf("t9"));
  REQUIRE(back != nullptr);
  CHECK(back->name == "null");
  CHECK(back->role == Role::kLearn);
  CHECK(back->weight == 0.5);
  CHECK(back->max_queued_calls == 4);
  CHECK(back->max_queued_tokens == 1000);
  CHECK(back->priority == Priority::kBatch);
  CHECK(back->max_priority == Priority::kBatch);
}

TEST_CASE("tokens file: the single token is tenant default, role admin",
          "[auth]") {
  const auto set = SingleTokenSet("secret");
  REQUIRE(set->tenants().size() == 1);
  CHECK(set->Match(DigestOf("secret"))->name == "default");
  CHECK(set->Match(DigestOf("secret"))->role == Role::kAdmin);
  CHECK(set->Match(DigestOf("secreT")) == nullptr);
}

}  // namespace
}  // namespace mesa_anyjev::auth
