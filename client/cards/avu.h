// AVU construction (docs/annotate.md): mesa-mcp's contract for
// turning an ontology term and a value into an iRODS AVU, plus the value-kind
// rules and the unit table.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "client/cards/candidates.h"

namespace mesa_anyjev::cards {

struct Avu {
  std::string attribute;  // "<ontology id>.<snake label>"
  std::string value;
  std::string unit;  // the term's CURIE
  bool operator==(const Avu&) const = default;
};

// _label_to_snake: drop every character outside [a-zA-Z0-9] and Python
// whitespace, strip, each whitespace run becomes "_", lower-case.
std::string LabelToSnake(std::string_view label);

// build_avu: INVALID_ARGUMENT "label '<l>' does not snake-case to a key" or
// "could not build an AVU for <curie> with value '<v>'" (blank value).
absl::StatusOr<Avu> BuildAvu(const Candidate& candidate,
                             std::string_view value);

// pre_rule_value_kind: the value kind fixed by rule (site terms take the site
// code, units and dataset terms the term label), or nullopt when
// avu.value_kind must be asked.
std::optional<std::string> PreRuleValueKind(std::string_view aspect,
                                            std::string_view scope);

// value_for: the chosen kind's value when it is non-empty, else the term
// label; INVALID_ARGUMENT "unknown value kind '<k>'".
absl::StatusOr<std::string> ValueFor(std::string_view kind,
                                     std::string_view term_label,
                                     std::string_view column_name,
                                     std::string_view site_code,
                                     std::string_view top_value);

// top_profile_value: "2 distinct; top: SRER (9416), HARV (6068)" -> "SRER";
// nullopt without "top:" or when nothing is left.
std::optional<std::string> TopProfileValue(std::string_view profile);

// UNIT_TABLE: the uo candidate for a column's unit (stripped, lower-cased),
// first match in table order, with the reference's quirks (see avu.cc).
std::optional<Candidate> UnitCandidate(std::string_view unit);

}  // namespace mesa_anyjev::cards
