#include "client/annotate/proposal.h"

#include "common/text/json_null.h"

namespace mesa_anyjev::annotate {
namespace {

using text::OrNull;

nlohmann::ordered_json AvuJson(const std::optional<cards::Avu>& avu) {
  if (!avu.has_value()) return nullptr;
  return {{"attribute", avu->attribute},
          {"value", avu->value},
          {"unit", avu->unit}};
}

}  // namespace

nlohmann::ordered_json Proposal::ToJson() const {
  return {{"link_id", link_id},
          {"group_id", group_id},
          {"decision_id", decision_id},
          {"scope", scope},
          {"column_name", OrNull(column_name)},
          {"site_code", OrNull(site_code)},
          {"aspect", aspect},
          {"ontology_id", ontology_id},
          {"term", candidate.AsState()},
          {"iri", candidate.iri},
          {"p", p},
          {"level", level},
          {"outcome", policy::OutcomeName(outcome)},
          {"rationale", rationale},
          {"value_kind", value_kind},
          {"avu", AvuJson(avu)},
          {"keep_p", OrNull(keep_p)},
          {"keep_decision_id", OrNull(keep_decision_id)},
          {"duplicate_of", OrNull(duplicate_of)}};
}

Link Link::For(const Proposal& proposal, const std::string& run_id, bool kept) {
  Link link;
  link.link_id = proposal.link_id;
  link.run_id = run_id;
  link.group_id = proposal.group_id;
  link.decision_id = proposal.decision_id;
  link.avu = proposal.avu;
  link.term_curie = proposal.candidate.curie;
  link.term_iri = proposal.candidate.iri;
  link.term_label = proposal.candidate.label;
  link.ontology_id = proposal.ontology_id;
  link.aspect = proposal.aspect;
  link.column_name = proposal.column_name;
  link.site_code = proposal.site_code;
  link.value_kind = proposal.value_kind;
  link.write_status = kept ? "proposed" : "rejected";
  link.duplicate_of = proposal.duplicate_of;
  return link;
}

nlohmann::ordered_json Link::ToJson() const {
  const nlohmann::ordered_json avu_json = AvuJson(avu);
  auto field = [&](const char* key) -> nlohmann::ordered_json {
    return avu_json.is_null() ? nlohmann::ordered_json(nullptr) : avu_json[key];
  };
  return {{"link_id", link_id},
          {"run_id", run_id},
          {"group_id", group_id},
          {"decision_id", decision_id},
          {"attribute", field("attribute")},
          {"value", field("value")},
          {"unit", field("unit")},
          {"term_curie", term_curie},
          {"term_iri", term_iri},
          {"term_label", term_label},
          {"ontology_id", ontology_id},
          {"aspect", aspect},
          {"column_name", OrNull(column_name)},
          {"site_code", OrNull(site_code)},
          {"value_kind", value_kind},
          {"write_status", write_status},
          {"duplicate_of", OrNull(duplicate_of)}};
}

}  // namespace mesa_anyjev::annotate
