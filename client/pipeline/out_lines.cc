// Pipeline output lines and --resume (see out_lines.h).
#include "client/pipeline/out_lines.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/text/strict_json.h"
#include "common/util/hash.h"

namespace mesa_anyjev::client::pipeline {
namespace {

absl::Status Differs(const std::string& out_name, int64_t n,
                     const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("--resume: ", out_name, " line ", n + 1, " ", what));
}

std::string Quoted(const std::vector<std::string>& ids) {
  return absl::StrCat("[", absl::StrJoin(ids, ", "), "]");
}

}  // namespace

std::string QuestionsSha256(const std::vector<std::string>& keys) {
  return util::Sha256Hex(absl::StrJoin(keys, "\n"));
}

std::string InputSha256(const std::string& line) {
  return util::Sha256Hex(line);
}

nlohmann::ordered_json LineHead(int64_t index, const nlohmann::ordered_json& id,
                                const RunKey& key,
                                const std::string& input_sha256) {
  nlohmann::ordered_json out = {{"index", index}};
  if (!id.is_null()) out["id"] = id;
  out["backend"] = key.backend;
  out["model"] = key.model;
  out["level"] = key.level;
  out["span"] = key.span;
  out["questions"] = key.questions;
  out["questions_sha256"] = key.questions_sha256;
  out["input_sha256"] = input_sha256;
  return out;
}

absl::StatusOr<int64_t> DropTornLine(const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error) {
    if (!std::filesystem::exists(path)) return 0;
    return absl::InvalidArgumentError(
        absl::StrCat("--out: cannot read ", path, ": ", error.message()));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out: cannot read ", path));
  }
  // Backwards in blocks to the last newline: OUT may be gigabytes.
  constexpr int64_t kBlock = 64 << 10;
  int64_t keep = 0;
  std::string block;
  for (int64_t end = static_cast<int64_t>(size); end > 0;) {
    const int64_t begin = std::max<int64_t>(0, end - kBlock);
    block.resize(static_cast<size_t>(end - begin));
    in.seekg(begin);
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    if (!in) {
      return absl::InvalidArgumentError(
          absl::StrCat("--out: cannot read ", path));
    }
    const size_t newline = block.rfind('\n');
    if (newline != std::string::npos) {
      keep = begin + static_cast<int64_t>(newline) + 1;
      break;
    }
    end = begin;
  }
  in.close();
  const int64_t dropped = static_cast<int64_t>(size) - keep;
  if (dropped > 0) {
    std::filesystem::resize_file(path, static_cast<uintmax_t>(keep), error);
    if (error) {
      return absl::InvalidArgumentError(
          absl::StrCat("--out: cannot cut the torn last line of ", path, ": ",
                       error.message()));
    }
  }
  return dropped;
}

absl::StatusOr<std::string> CheckKeptLine(const std::string& line, int64_t n,
                                          const RunKey& key,
                                          const std::string& out_name) {
  const auto parsed = text::ParseStrictOrderedJson(line, {});
  const bool object = parsed.ok() && parsed->is_object();
  const auto field = [&](const char* name) -> const nlohmann::ordered_json* {
    if (!object || !parsed->contains(name)) return nullptr;
    return &(*parsed)[name];
  };
  const auto* index = field("index");
  const auto* input = field("input_sha256");
  const auto* questions = field("questions");
  if (index == nullptr || !index->is_number_integer() || input == nullptr ||
      !input->is_string() || questions == nullptr || !questions->is_array() ||
      (field("decisions") == nullptr && field("error") == nullptr)) {
    return Differs(out_name, n,
                   "is not a line of decide --out (index, input_sha256, "
                   "questions, decisions or error); is it another file?");
  }
  if (index->get<int64_t>() != n) {
    return Differs(
        out_name, n,
        absl::StrCat("holds state ", index->get<int64_t>(), " where state ", n,
                     " belongs: OUT is not in "
                     "input order, was it edited?"));
  }
  const auto text_of = [&](const char* name) {
    const auto* value = field(name);
    return value != nullptr && value->is_string() ? value->get<std::string>()
                                                  : std::string("?");
  };
  std::vector<std::string> ids;
  for (const auto& id : *questions) {
    ids.push_back(id.is_string() ? id.get<std::string>() : id.dump());
  }
  if (ids != key.questions ||
      text_of("questions_sha256") != key.questions_sha256) {
    return Differs(
        out_name, n,
        ids != key.questions
            ? absl::StrCat("was written for questions ", Quoted(ids),
                           "; this run asks ", Quoted(key.questions))
            : absl::StrCat("was written for other wordings of ", Quoted(ids),
                           " (questions_sha256 "
                           "differs)"));
  }
  if (text_of("level") != key.level) {
    return Differs(out_name, n,
                   absl::StrCat("was written at --level ", text_of("level"),
                                "; this run asks ", key.level));
  }
  const auto* span = field("span");
  if (span == nullptr || !span->is_number_integer() ||
      span->get<int64_t>() != key.span) {
    return Differs(
        out_name, n,
        absl::StrCat("was written with --span ",
                     span != nullptr ? span->dump() : "?", "; this run has ",
                     key.span, " (resumed spans would differ)"));
  }
  if (text_of("backend") != key.backend || text_of("model") != key.model) {
    return Differs(out_name, n,
                   absl::StrCat("was written by backend ", text_of("backend"),
                                " model ", text_of("model"), "; this run has ",
                                key.backend, " model ", key.model));
  }
  return input->get<std::string>();
}

}  // namespace mesa_anyjev::client::pipeline
