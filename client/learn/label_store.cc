// The label store (see label_store.h).
#include "client/learn/label_store.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <system_error>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/decision/py_json.h"
#include "common/status/status_macros.h"
#include "common/text/json_null.h"
#include "common/text/json_numbers.h"
#include "common/text/strict_json.h"
#include "common/util/files.h"

namespace mesa_anyjev::learn {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kFileName[] = "labels.jsonl";

std::string StringOrEmpty(const Json& json, const char* key) {
  const auto it = json.find(key);
  return it == json.end() || it->is_null() ? "" : it->get<std::string>();
}

std::tuple<std::string, std::string, std::string> UniqueKey(
    const LabelRow& row) {
  return {row.question_key, row.state_sha256, row.label_source};
}

}  // namespace

std::optional<double> SourceWeight(std::string_view source) {
  for (const LabelSource& s : kLabelSources) {
    if (s.name == source) return s.weight;
  }
  return std::nullopt;
}

std::string SourceNames() {
  return absl::StrJoin(kLabelSources, ", ",
                       [](std::string* out, const LabelSource& s) {
                         absl::StrAppend(out, std::string(s.name));
                       });
}

Json RowToJson(const LabelRow& row) {
  Json j;
  j["label_id"] = row.label_id;
  j["question_id"] = row.question_id;
  j["question_key"] = row.question_key;
  j["state_sha256"] = row.state_sha256;
  j["state_json"] = row.state.dump();
  j["label_index"] = row.label_index;
  j["label_source"] = row.label_source;
  j["weight"] = row.weight;
  j["source_ref"] = text::NullIfEmpty(row.source_ref);
  j["card"] = text::NullIfEmpty(row.card);
  j["decision_id"] = text::NullIfEmpty(row.decision_id);
  j["batch_id"] = text::NullIfEmpty(row.batch_id);
  j["consumed_in_bundle"] = row.consumed_in_bundle.has_value()
                                ? Json(*row.consumed_in_bundle)
                                : Json(nullptr);
  j["ts"] = row.ts;
  return j;
}

absl::StatusOr<LabelRow> RowFromJson(const Json& json) {
  try {
    LabelRow row;
    ASSIGN_OR_RETURN(row.label_id, text::JsonInteger(json.at("label_id"),
                                                     "label_id", 0, INT64_MAX));
    row.question_id = json.at("question_id").get<std::string>();
    row.question_key = json.at("question_key").get<std::string>();
    row.state_sha256 = json.at("state_sha256").get<std::string>();
    auto state = text::ParseStrictOrderedJson(
        json.at("state_json").get<std::string>(), {});
    if (!state.ok()) {
      return absl::DataLossError(
          absl::StrCat("state_json: ", state.status().message()));
    }
    row.state = *std::move(state);
    ASSIGN_OR_RETURN(
        row.label_index,
        text::JsonInteger(json.at("label_index"), "label_index", 0, INT32_MAX));
    row.label_source = json.at("label_source").get<std::string>();
    ASSIGN_OR_RETURN(row.weight, text::JsonFinite(json.at("weight"), "weight"));
    row.source_ref = StringOrEmpty(json, "source_ref");
    row.card = StringOrEmpty(json, "card");
    row.decision_id = StringOrEmpty(json, "decision_id");
    row.batch_id = StringOrEmpty(json, "batch_id");
    if (json.contains("consumed_in_bundle") &&
        !json["consumed_in_bundle"].is_null()) {
      ASSIGN_OR_RETURN(row.consumed_in_bundle,
                       text::JsonInteger(json["consumed_in_bundle"],
                                         "consumed_in_bundle", 0, INT64_MAX));
    }
    row.ts = json.at("ts").get<std::string>();
    return row;
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(e.what());
  }
}

std::string RenderState(const Json& state) {
  if (state.is_string()) return state.get<std::string>();
  return decision::PyJsonDumpsIndent2(state);
}

std::string ExpandUser(const std::string& path) {
  if (path != "~" && !path.starts_with("~/")) return path;
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') return path;
  return std::string(home) + path.substr(1);
}

absl::StatusOr<LabelStore> LabelStore::Open(const std::string& dir_in) {
  const std::string dir = ExpandUser(dir_in);
  LabelStore store(dir, (std::filesystem::path(dir) / kFileName).string());
  std::error_code ec;
  if (!std::filesystem::exists(store.path_, ec)) return store;
  absl::StatusOr<std::string> text = util::ReadFile(store.path_);
  if (!text.ok()) return text.status();
  int line_no = 0;
  for (absl::string_view piece : absl::StrSplit(*text, '\n')) {
    ++line_no;
    if (piece.empty()) continue;
    const auto json = text::ParseStrictOrderedJson(
        std::string_view(piece.data(), piece.size()), {});
    absl::StatusOr<LabelRow> row =
        json.ok() ? RowFromJson(*json)
                  : absl::DataLossError(json.status().message());
    if (!row.ok()) {
      return absl::DataLossError(absl::StrCat(store.path_, ":", line_no, ": ",
                                              row.status().message()));
    }
    store.rows_.push_back(*std::move(row));
  }
  return store;
}

bool LabelStore::Contains(const LabelRow& row) const {
  return std::any_of(rows_.begin(), rows_.end(), [&](const LabelRow& r) {
    return UniqueKey(r) == UniqueKey(row);
  });
}

absl::StatusOr<int> LabelStore::Insert(std::vector<LabelRow> rows) {
  std::map<std::tuple<std::string, std::string, std::string>, bool> seen;
  int64_t next_id = 1;
  for (const LabelRow& r : rows_) {
    seen[UniqueKey(r)] = true;
    next_id = std::max(next_id, r.label_id + 1);
  }
  std::vector<LabelRow> all = rows_;
  int inserted = 0;
  for (LabelRow& row : rows) {
    if (!seen.emplace(UniqueKey(row), true).second) continue;
    row.label_id = next_id++;
    all.push_back(std::move(row));
    ++inserted;
  }
  if (inserted == 0) return 0;
  std::string text;
  for (const LabelRow& r : all)
    absl::StrAppend(&text, RowToJson(r).dump(), "\n");
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("labels.dir: cannot create ", dir_, ": ", ec.message()));
  }
  if (absl::Status s = util::WriteFileAtomic(path_, text); !s.ok()) return s;
  rows_ = std::move(all);
  return inserted;
}

std::vector<LabelRow> LabelStore::LabelsFor(
    const std::string& question_key, double min_weight,
    const std::set<std::string>& exclude_cards) const {
  std::vector<LabelRow> out;
  for (const LabelRow& r : rows_) {
    if (r.question_key != question_key || r.weight < min_weight) continue;
    if (!r.card.empty() && exclude_cards.contains(r.card)) continue;
    out.push_back(r);
  }
  return out;
}

LabelledSet LabelledStates(const LabelStore& store,
                           const decision::Question& question,
                           double min_weight,
                           const std::set<std::string>& exclude_cards) {
  std::map<std::string, LabelRow> best;  // sorted by state_sha256
  for (LabelRow& row :
       store.LabelsFor(question.key(), min_weight, exclude_cards)) {
    auto it = best.find(row.state_sha256);
    if (it == best.end()) {
      best.emplace(row.state_sha256, std::move(row));
    } else if (row.weight > it->second.weight) {
      it->second = std::move(row);
    }
  }
  LabelledSet set;
  for (auto& [sha, row] : best) {
    set.states.push_back(std::move(row.state));
    set.labels.push_back(row.label_index);
    set.weights.push_back(row.weight);
    set.cards.push_back(row.card);
  }
  return set;
}

}  // namespace mesa_anyjev::learn
