// AVU construction, value kinds and the unit table (see avu.h).
#include "client/cards/avu.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "client/cards/registry.h"
#include "common/text/py_text.h"
#include "common/text/utf8.h"

namespace mesa_anyjev::cards {
namespace {

bool IsAsciiAlnum(char32_t cp) {
  return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
         (cp >= '0' && cp <= '9');
}

struct UnitRow {
  std::string_view name;
  std::string_view label;
  std::string_view curie;
};

// UNIT_TABLE in the reference's order. Kept as it is, quirks included:
// matching is first-match by suffix, so "centimeter",
// "millimeter" and "kilometer" all reach "meter" (UO:0000008), "kilogram"
// and "milligram" reach "gram", "kilometer per hour" reaches "hour", and
// kilogram's own row repeats kilometer's UO:0000009. The resulting CURIEs
// are AVU units, and AVUs are in existing labels and bundles' training
// rows, so a corrected table would change what a replayed run proposes.
constexpr std::array<UnitRow, 19> kUnitTable = {{
    {"meter", "meter", "UO:0000008"},
    {"centimeter", "centimeter", "UO:0000015"},
    {"millimeter", "millimeter", "UO:0000016"},
    {"kilometer", "kilometer", "UO:0000009"},
    {"gram", "gram", "UO:0000021"},
    {"kilogram", "kilogram", "UO:0000009"},
    {"milligram", "milligram", "UO:0000022"},
    {"second", "second", "UO:0000010"},
    {"minute", "minute", "UO:0000031"},
    {"hour", "hour", "UO:0000032"},
    {"day", "day", "UO:0000033"},
    {"celsius", "degree Celsius", "UO:0000027"},
    {"percent", "percent", "UO:0000187"},
    {"kilometer per hour", "kilometer per hour", "UO:0010008"},
    {"number", "count unit", "UO:0000189"},
    {"count", "count unit", "UO:0000189"},
    {"degree", "degree", "UO:0000185"},
    {"milliliter", "milliliter", "UO:0000098"},
    {"liter", "liter", "UO:0000099"},
}};

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

std::string LabelToSnake(std::string_view label) {
  // Keep [a-zA-Z0-9] and whitespace, then strip and join the words with
  // "_": only ASCII survives, so ASCII lower-casing is Python's lower().
  std::string kept;
  size_t pos = 0;
  while (pos < label.size()) {
    const size_t at = pos;
    const char32_t cp = text::NextCodePoint(label, &pos);
    if (IsAsciiAlnum(cp) || text::PyIsSpace(cp))
      kept.append(label.substr(at, pos - at));
  }
  std::string snake;
  for (const std::string_view word : text::PySplitWhitespace(kept)) {
    if (!snake.empty()) snake.push_back('_');
    for (const char c : word) {
      snake.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c);
    }
  }
  return snake;
}

absl::StatusOr<Avu> BuildAvu(const Candidate& candidate,
                             std::string_view value) {
  const std::string key = LabelToSnake(candidate.label);
  if (key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label '", candidate.label, "' does not snake-case to a key"));
  }
  // ontology_annotations_to_avus: blank keys or values build nothing.
  const std::string_view stripped = text::PyStrip(value);
  if (stripped.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("could not build an AVU for ", candidate.curie,
                     " with value '", std::string(value), "'"));
  }
  return Avu{absl::StrCat(text::PyLower(candidate.ontology_id), ".", key),
             std::string(stripped), candidate.curie};
}

std::optional<std::string> PreRuleValueKind(std::string_view aspect,
                                            std::string_view scope) {
  if (scope == "site" || ((aspect == "environment" || aspect == "location") &&
                          scope != "column")) {
    return std::string(kSiteCode);
  }
  if (aspect == "unit" || scope == "dataset") return std::string(kTermLabel);
  return std::nullopt;
}

absl::StatusOr<std::string> ValueFor(std::string_view kind,
                                     std::string_view term_label,
                                     std::string_view column_name,
                                     std::string_view site_code,
                                     std::string_view top_value) {
  std::string_view chosen;
  if (kind == kSiteCode) {
    chosen = site_code;
  } else if (kind == kColumnName) {
    chosen = column_name;
  } else if (kind == kTopValue) {
    chosen = top_value;
  } else if (kind != kTermLabel) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown value kind '", std::string(kind), "'"));
  }
  return std::string(chosen.empty() ? term_label : chosen);
}

std::optional<std::string> TopProfileValue(std::string_view profile) {
  const size_t top = profile.find("top:");
  if (top == std::string_view::npos) return std::nullopt;
  std::string_view first = profile.substr(top + 4);
  first = text::PyStrip(first.substr(0, first.find(',')));
  if (const size_t paren = first.rfind(" ("); paren != std::string_view::npos) {
    first = first.substr(0, paren);
  }
  if (first.empty()) return std::nullopt;
  return std::string(first);
}

std::optional<Candidate> UnitCandidate(std::string_view unit) {
  const std::string name = text::PyLower(text::PyStrip(unit));
  if (name.empty()) return std::nullopt;
  for (const UnitRow& row : kUnitTable) {
    const bool match =
        name == row.name || EndsWith(name, row.name) ||
        (row.name == "celsius" && name.find("celsius") != std::string::npos);
    if (!match) continue;
    Candidate candidate;
    candidate.label = std::string(row.label);
    candidate.curie = std::string(row.curie);
    candidate.iri = IriFor(row.curie);
    candidate.ontology_id = "uo";
    return candidate;
  }
  return std::nullopt;
}

}  // namespace mesa_anyjev::cards
