// A dataset card (neon-avu-eval's make_cards.py format) and its parser: the
// reference's cards.py, rule for rule (docs/annotate.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace mesa_anyjev::cards {

struct SiteInfo {
  std::string code;
  std::string name;
  std::string state;
  std::string domain;
  std::string domain_name;
  std::string habitat;
};

struct ColumnInfo {
  std::string name;
  std::string description;
  std::string dtype;
  std::string unit;  // "" where the card says "-"
  std::string profile;
};

struct DatasetCard {
  std::string product_code;
  std::string table;
  std::string product_title;
  std::string product_description;
  std::string source;
  std::vector<SiteInfo> sites;
  long long rows = 0;
  std::string months_from;
  std::string months_to;
  std::vector<ColumnInfo> columns;
  std::string sha256;  // hex SHA-256 of the full card text (UTF-8)

  // "<product_code>.<table>".
  std::string name() const;
  // The first column called `name`; NOT_FOUND when there is none.
  absl::StatusOr<const ColumnInfo*> Column(std::string_view name) const;
};

// Parses a card. Lines are split as str.splitlines() does and stripped;
// blank lines are skipped; the first matching rule of 6.4 wins per line and
// a later line of the same kind overwrites an earlier one (sites and columns
// accumulate). INVALID_ARGUMENT for text that is not UTF-8, a rows count
// beyond int64, or a missing header (the reference's message).
absl::StatusOr<DatasetCard> ParseCard(std::string_view text);

// Reads a card file as Python's Path.read_text() does (UTF-8, universal
// newlines: "\r\n" and "\r" become "\n" before parsing and hashing) and
// parses it; errors name the path.
absl::StatusOr<DatasetCard> ReadCard(const std::string& path);

// The deterministic identifier pre-filter: identifiers are decided by
// rule, never by the model.
bool IsIdentifier(const ColumnInfo& column);

}  // namespace mesa_anyjev::cards
