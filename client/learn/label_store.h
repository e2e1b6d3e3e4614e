// The label store (docs/learning.md): label rows, each carrying the
// exact state a question is asked on, kept as JSON lines in
// <labels.dir>/labels.jsonl. Rows are unique on (question_key,
// state_sha256, label_source); inserts are insert-or-ignore and rewrite the
// file atomically, so a reader sees the old rows or the new, never half.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/decision/question.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::learn {

// label_source and its default weight.
struct LabelSource {
  std::string_view name;
  double weight;
};
inline constexpr std::array<LabelSource, 9> kLabelSources = {{
    {"curator", 1.0},
    {"curator_implicit", 0.7},
    {"accepted_avu", 0.8},
    {"consensus_all", 0.8},
    {"consensus_majority", 0.6},
    {"consensus_negative", 0.5},
    {"teacher", 0.5},
    {"hosted_jev", 0.5},
    {"gold", 1.0},
}};
// The weight of a known source; nullopt for any other name.
std::optional<double> SourceWeight(std::string_view source);
// "curator, curator_implicit, ..., gold" for messages.
std::string SourceNames();

struct LabelRow {
  int64_t label_id = 0;
  std::string question_id;
  std::string question_key;
  std::string state_sha256;
  nlohmann::ordered_json state;  // key order kept: it is how it renders
  int label_index = 0;           // Yes = 0
  std::string label_source;
  double weight = 1.0;
  std::string source_ref;   // "" = null
  std::string card;         // "" = null
  std::string decision_id;  // "" = null
  std::string batch_id;     // "" = null
  std::optional<int64_t> consumed_in_bundle;
  std::string ts;  // ISO 8601 UTC
};

// The stored form: the reference's row fields, state as "state_json" text.
nlohmann::ordered_json RowToJson(const LabelRow& row);
absl::StatusOr<LabelRow> RowFromJson(const nlohmann::ordered_json& json);

// The text a state is decided on: a string verbatim, anything else as the
// reference renders dict states (json.dumps(indent=2, ensure_ascii=False)).
std::string RenderState(const nlohmann::ordered_json& state);

class LabelStore {
 public:
  // Reads <dir>/labels.jsonl; a missing file is an empty store. A row that
  // does not parse is DATA_LOSS naming the file and line.
  static absl::StatusOr<LabelStore> Open(const std::string& dir);

  // Insert-or-ignore; assigns label_id. Returns the count inserted and
  // writes the file (creating the directory) only when that is > 0.
  absl::StatusOr<int> Insert(std::vector<LabelRow> rows);

  // labels_for: rows of `question_key` with weight >= min_weight whose card
  // is "" or not excluded, in insertion (= ts) order.
  std::vector<LabelRow> LabelsFor(
      const std::string& question_key, double min_weight,
      const std::set<std::string>& exclude_cards = {}) const;

  const std::vector<LabelRow>& rows() const { return rows_; }
  const std::string& path() const { return path_; }
  bool Contains(const LabelRow& row) const;

 private:
  LabelStore(std::string dir, std::string path)
      : dir_(std::move(dir)), path_(std::move(path)) {}

  std::string dir_;
  std::string path_;
  std::vector<LabelRow> rows_;
};

// labelled_states: per state_sha256 the row of highest weight (a strictly
// greater weight replaces), sorted by state_sha256; "" for a null card.
struct LabelledSet {
  std::vector<nlohmann::ordered_json> states;
  std::vector<int> labels;
  std::vector<double> weights;
  std::vector<std::string> cards;
  size_t size() const { return labels.size(); }
};
LabelledSet LabelledStates(const LabelStore& store,
                           const decision::Question& question,
                           double min_weight = 0.0,
                           const std::set<std::string>& exclude_cards = {});

// "~/..." against $HOME.
std::string ExpandUser(const std::string& path);

}  // namespace mesa_anyjev::learn
