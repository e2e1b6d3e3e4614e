#include "server/engine/fault_plan.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace mesa_anyjev::engine {
namespace {

constexpr char kGrammar[] =
    "give FAULT@PASS joined by commas, FAULT oom, lost or hold "
    "(hold@PASS=FILE: "
    "the engine waits for FILE before planning the pass), PASS from 1 "
    "(e.g. oom@3,lost@5)";

}  // namespace

absl::StatusOr<FaultPlan> FaultPlan::Parse(absl::string_view spec) {
  FaultPlan plan;
  for (absl::string_view item : absl::StrSplit(spec, ',')) {
    const std::vector<absl::string_view> parts =
        absl::StrSplit(item, absl::MaxSplits('@', 1));
    int64_t pass = 0;
    std::vector<absl::string_view> at;
    if (parts.size() == 2)
      at = absl::StrSplit(parts[1], absl::MaxSplits('=', 1));
    if (parts.size() != 2 || !absl::SimpleAtoi(at[0], &pass) || pass < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--inject-faults: '", item, "' is not a fault; ", kGrammar));
    }
    const bool hold = parts[0] == "hold";
    if (hold != (at.size() == 2 && !at[1].empty())) {
      return absl::InvalidArgumentError(
          absl::StrCat("--inject-faults: '", item,
                       hold ? "' names no file to wait for; "
                            : "' has a file, which only hold takes; ",
                       kGrammar));
    }
    if (hold) {
      plan.planned_.push_back({pass, std::nullopt, std::string(at[1])});
    } else if (parts[0] == "oom") {
      plan.planned_.push_back({pass, InjectedFault::kOutOfMemory, ""});
    } else if (parts[0] == "lost") {
      plan.planned_.push_back({pass, InjectedFault::kDeviceLost, ""});
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--inject-faults: '", parts[0],
                       "' is not a fault (oom, lost or hold); ", kGrammar));
    }
  }
  return plan;
}

std::optional<std::string> FaultPlan::HoldBefore(int64_t pass) const {
  for (const Planned& p : planned_) {
    if (p.pass == pass && !p.fault.has_value()) return p.until;
  }
  return std::nullopt;
}

std::optional<InjectedFault> FaultPlan::NextPass() {
  ++passes_;
  for (const Planned& p : planned_) {
    if (p.pass == passes_ && p.fault.has_value()) return p.fault;
  }
  return std::nullopt;
}

std::string FaultPlan::Describe() const {
  return absl::StrJoin(planned_, ", ", [](std::string* out, const Planned& p) {
    if (!p.fault.has_value()) {
      absl::StrAppend(out, "hold before pass ", p.pass, " until ", p.until,
                      " exists");
    } else {
      absl::StrAppend(out,
                      *p.fault == InjectedFault::kOutOfMemory ? "out of memory"
                                                              : "device lost",
                      " at pass ", p.pass);
    }
  });
}

}  // namespace mesa_anyjev::engine
