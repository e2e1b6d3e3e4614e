#include "client/commands/level_advice.h"

#include "absl/strings/str_cat.h"

namespace mesa_anyjev::client {

std::string LevelRemedy(const std::string& question_id, decision::Level level,
                        const std::string& kind,
                        const std::string& replay_flags) {
  const std::string flags = replay_flags.empty() ? "" : " " + replay_flags;
  if (level == decision::Level::kL2 && kind == "gateway") {
    return "L2 reads a hidden state, which a gateway does not serve: use "
           "--backend hf (the daemon) or composite";
  }
  if (level != decision::Level::kL1 && level != decision::Level::kL2) {
    return "";
  }
  const std::string name = decision::LevelName(level);
  return absl::StrCat(
      "to serve ", question_id, " at ", name, ", fit and promote ",
      level == decision::Level::kL1 ? "a calibration" : "a head", ":\n",
      "  mesa-anyjev learn fit --question ", question_id, " --level ", name,
      flags, "\n", "  mesa-anyjev learn promote --question ", question_id,
      " --version <N printed by the fit>", flags, "\n",
      "or ask --level auto (the best level promoted for each question)");
}

std::optional<std::string> ServedBelow(const policy::DecisionRecord& record,
                                       decision::Level asked) {
  if (asked == decision::Level::kAuto || record.level == asked) {
    return std::nullopt;
  }
  const auto& d = record.diagnostics;
  std::string why = absl::StrCat(record.question_id, ": asked for ",
                                 decision::LevelName(asked), ", served at ",
                                 policy::RecordLevelName(record.level));
  if (d.value("l1_prior_missing", false)) {
    absl::StrAppend(&why,
                    ": the L1 calibration froze a prior over every shift, "
                    "but this decision read adaptive shifts "
                    "(decider.adaptive_shifts); set "
                    "--set decider.adaptive_shifts=false to serve L1");
  } else if (d.value("routed_refused", false)) {
    const auto from = d.find("routed_from");
    absl::StrAppend(&why, ": the only head was fit on another question (",
                    from != d.end() && from->is_string()
                        ? from->get<std::string>()
                        : std::string("?"),
                    "); fit one for this question");
  }
  return why;
}

}  // namespace mesa_anyjev::client
