// Bench results (see results.h).
#include "client/bench/results.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/decision/level.h"
#include "common/questions/question_lock.h"
#include "common/questions/question_set.h"
#include "common/text/json_numbers.h"
#include "common/util/build_info.h"
#include "common/util/files.h"

namespace mesa_anyjev::bench {
namespace {

using Json = nlohmann::ordered_json;

Json Platform() {
  struct utsname u;
  if (uname(&u) != 0) return nullptr;
  return absl::StrCat(u.sysname, "-", u.release, "-", u.machine);
}

Json Host() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return nullptr;
  return std::string(name.data());
}

// nvidia-smi's GPU name and driver, bounded at 5 s; null without one.
Json NvidiaSmi() {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(
      popen("timeout 5 nvidia-smi --query-gpu=name,driver_version "
            "--format=csv,noheader 2>/dev/null",
            "r"),
      pclose);
  if (!pipe) return nullptr;
  std::string out;
  std::array<char, 256> buf{};
  while (fgets(buf.data(), buf.size(), pipe.get()) != nullptr) {
    out += buf.data();
  }
  const int rc = pclose(pipe.release());
  const std::string text(absl::StripAsciiWhitespace(out));
  if (rc != 0 || text.empty()) return nullptr;
  return text;
}

std::string Fixed3(const Json& v) {
  return v.is_number() ? absl::StrFormat("%.3f", v.get<double>()) : "";
}

// Python's str() of a JSON scalar; "" when missing or null.
std::string Plain(const Json& cell, const char* key) {
  if (!cell.contains(key) || cell[key].is_null()) return "";
  const Json& v = cell[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    std::string text = v.dump();
    if (text.find_first_of(".eE") == std::string::npos) text += ".0";
    return text;
  }
  return v.dump();
}

}  // namespace

std::string ModelSlug(const std::string& model) {
  return absl::StrReplaceAll(model, {{"/", "__"}});
}

Json Environment(const ProviderInfo& info) {
  Json env;
  env["mesa_anyjev"] = util::kVersion;
  env["commit"] = util::kCommit;
  env["anyjev_commit"] = nullptr;
  env["questions_lock_sha"] =
      questions::LockSha(questions::QuestionSet::Reference());
  env["backend_kind"] = info.kind;
  env["model"] = info.model;
  env["served_model"] =
      info.served_model.empty() ? Json(nullptr) : Json(info.served_model);
  env["python"] = nullptr;
  env["compiler"] = __VERSION__;
  env["platform"] = Platform();
  env["host"] = Host();
  env["nvidia_smi"] = NvidiaSmi();
  return env;
}

Json PolicySuggestions(const Json& tasks) {
  Json out = Json::object();
  for (const auto& [name, result] : tasks.items()) {
    const std::string qid = result.value("question_id", std::string());
    for (const auto& [level, cell] : result.at("cells").items()) {
      if (!cell.value("loco", false) || cell.contains("error")) continue;
      const auto n_neg = text::JsonIntegerOr(cell, "n_neg", 0, 0, INT64_MAX);
      if (!n_neg.ok() || *n_neg < 30) continue;
      const Json cov5 = cell.value("cov@5%", Json(nullptr));
      if (!cov5.is_number() || cov5.get<double>() <= 0.0) continue;
      Json s;
      for (const char* key : {"cov@5%", "cov@10%", "ece", "n", "n_neg"}) {
        s[key] = cell.value(key, Json(nullptr));
      }
      s["cite"] = absl::StrCat(name, ".", level);
      out[qid].push_back(std::move(s));
    }
  }
  return out;
}

Json TableRows(const Json& payload) {
  Json rows = Json::array();
  if (!payload.contains("tasks")) return rows;
  // Tasks by name and levels raw, L0, L1, L2, whatever order the payload
  // holds them in (a run keeps --levels' order; its file sorts keys), so
  // `bench run` and `bench table` print the same rows.
  std::map<std::string, const Json*> tasks;
  for (const auto& [name, result] : payload["tasks"].items()) {
    tasks[name] = &result;
  }
  auto rank = [](const std::string& level) {
    const auto parsed = decision::ParseLevel(level);
    return parsed.ok() ? decision::LevelRank(*parsed) : 99;
  };
  for (const auto& [name, result] : tasks) {
    std::vector<std::pair<std::string, const Json*>> cells;
    for (const auto& [level, cell] : result->at("cells").items()) {
      cells.emplace_back(level, &cell);
    }
    std::stable_sort(cells.begin(), cells.end(),
                     [&](const auto& a, const auto& b) {
                       return rank(a.first) < rank(b.first);
                     });
    for (const auto& [level, cell] : cells) {
      Json row;
      row["task"] = name;
      row["n"] = result->value("n_items", Json(nullptr));
      row["level"] = level;
      if (cell->contains("not_applicable") || cell->contains("error")) {
        row["status"] = cell->contains("error") ? "error" : "n/a";
        rows.push_back(std::move(row));
        continue;
      }
      row["status"] = "ok";
      row["loco"] = cell->value("loco", false);
      for (const char* key : {"acc", "ece", "brier", "cov@5%", "cov@10%",
                              "flip", "n_neg", "prompts", "ms_per_decision"}) {
        row[key] = cell->value(key, Json(nullptr));
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::string MarkdownTable(const Json& payload) {
  const std::string date = payload.value("date", std::string());
  const std::string backend = payload.value("backend", std::string());
  const std::string model =
      payload.contains("environment")
          ? payload["environment"].value("model", std::string())
          : std::string();
  std::string md = absl::StrCat("# bench ", date, " \xC2\xB7 ", backend,
                                " \xC2\xB7 ", model, "\n\n");
  // The reference's line names `<slug>` literally; kept, so the file matches.
  absl::StrAppend(&md, "Every number below names `", date, "/<slug>.", backend,
                  ".json`. Fake-backend rows are synthetic.\n\n");
  absl::StrAppend(&md,
                  "| task | n | level | acc | ece | brier | cov@5% | cov@10% | "
                  "flip | n_neg | prompts | ms/dec |\n");
  absl::StrAppend(&md, "|");
  for (int i = 0; i < 12; ++i) absl::StrAppend(&md, "---|");
  absl::StrAppend(&md, "\n");
  for (const Json& row : TableRows(payload)) {
    const std::string name = row["task"].get<std::string>();
    const std::string n = Plain(row, "n");
    const std::string level = row["level"].get<std::string>();
    if (row["status"] != "ok") {
      absl::StrAppend(&md, "| ", name, " | ", n, " | ", level, " | ",
                      row["status"].get<std::string>(), " |");
      for (int i = 0; i < 8; ++i) absl::StrAppend(&md, " |");
      absl::StrAppend(&md, "\n");
      continue;
    }
    const std::string tag =
        row["loco"].get<bool>() ? absl::StrCat(level, " (LOCO)") : level;
    absl::StrAppend(&md, "| ", name, " | ", n, " | ", tag, " | ",
                    Fixed3(row["acc"]), " | ", Fixed3(row["ece"]), " | ",
                    Fixed3(row["brier"]), " | ", Fixed3(row["cov@5%"]), " | ",
                    Fixed3(row["cov@10%"]), " | ", Fixed3(row["flip"]), " | ",
                    Plain(row, "n_neg"), " | ", Plain(row, "prompts"), " | ",
                    Plain(row, "ms_per_decision"), " |\n");
  }
  return md;
}

absl::StatusOr<std::string> WriteResults(const Json& payload,
                                         const std::string& out_dir,
                                         const std::string& slug,
                                         const std::string& kind,
                                         const std::string& date) {
  const std::filesystem::path dir = std::filesystem::path(out_dir) / date;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat(
        "--out: cannot create ", dir.string(), ": ", ec.message()));
  }
  const std::string base = (dir / absl::StrCat(slug, ".", kind)).string();
  // nlohmann::json keeps keys sorted: Python's sort_keys=True.
  const nlohmann::json sorted = payload;
  const std::string json_path = base + ".json";
  if (absl::Status s = util::WriteFileAtomic(json_path, sorted.dump(1) + "\n");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          util::WriteFileAtomic(base + ".md", MarkdownTable(payload));
      !s.ok()) {
    return s;
  }
  return json_path;
}

}  // namespace mesa_anyjev::bench
