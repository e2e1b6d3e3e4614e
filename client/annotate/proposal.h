// A proposal (a ranked term that may become an AVU) and the AVU link each
// kept or rejected proposal gets (docs/annotate.md).
#pragma once

#include <optional>
#include <string>

#include "client/cards/avu.h"
#include "client/cards/candidates.h"
#include "client/cards/registry.h"
#include "client/policy/policy.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::annotate {

struct Proposal {
  cards::Candidate candidate;
  std::string scope;  // column | site | dataset
  std::optional<std::string> column_name;
  std::optional<std::string> site_code;
  std::string aspect;
  std::string ontology_id;
  double p = 0.0;     // the term.fits p_true
  std::string level;  // the level that decision was served at
  policy::Outcome outcome = policy::Outcome::kAbstain;
  std::string rationale;  // "p(fits)=0.62 L0", plus what happened later
  std::string value_kind = std::string(cards::kTermLabel);
  int group_id = 0;
  int decision_id = 0;  // the term.fits decision
  int link_id = 0;
  std::optional<cards::Avu> avu;        // once assembled (Q7)
  std::optional<double> keep_p;         // avu.keep's p_true (Q8)
  std::optional<int> duplicate_of;      // the link it repeats
  std::optional<int> keep_decision_id;  // the avu.keep decision

  nlohmann::ordered_json ToJson() const;
};

struct Link {
  int link_id = 0;
  std::string run_id;
  int group_id = 0;
  int decision_id = 0;
  std::optional<cards::Avu> avu;  // none when the term never became an AVU
  std::string term_curie;
  std::string term_iri;
  std::string term_label;
  std::string ontology_id;
  std::string aspect;
  std::optional<std::string> column_name;
  std::optional<std::string> site_code;
  std::string value_kind;
  std::string write_status;  // proposed (kept) | rejected
  std::optional<int> duplicate_of;

  static Link For(const Proposal& proposal, const std::string& run_id,
                  bool kept);
  nlohmann::ordered_json ToJson() const;
};

}  // namespace mesa_anyjev::annotate
