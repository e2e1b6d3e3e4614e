#include "server/engine/fault_plan.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace mesa_anyjev::engine {
namespace {

constexpr char kGrammar[] =
    "give FAULT@PASS joined by commas, FAULT oom or lost, PASS from 1 "
    "(e.g. oom@3,lost@5)";

absl::string_view Name(InjectedFault fault) {
  return fault == InjectedFault::kOutOfMemory ? "out of memory" : "device lost";
}

}  // namespace

absl::StatusOr<FaultPlan> FaultPlan::Parse(absl::string_view spec) {
  FaultPlan plan;
  for (absl::string_view item : absl::StrSplit(spec, ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(item, '@');
    int64_t pass = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &pass) || pass < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--inject-faults: '", item, "' is not a fault; ", kGrammar));
    }
    if (parts[0] == "oom") {
      plan.planned_.push_back({pass, InjectedFault::kOutOfMemory});
    } else if (parts[0] == "lost") {
      plan.planned_.push_back({pass, InjectedFault::kDeviceLost});
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--inject-faults: '", parts[0],
                       "' is not a fault (oom or lost); ", kGrammar));
    }
  }
  return plan;
}

std::optional<InjectedFault> FaultPlan::NextPass() {
  ++passes_;
  for (const Planned& p : planned_) {
    if (p.pass == passes_) return p.fault;
  }
  return std::nullopt;
}

std::string FaultPlan::Describe() const {
  return absl::StrJoin(planned_, ", ", [](std::string* out, const Planned& p) {
    absl::StrAppend(out, Name(p.fault), " at pass ", p.pass);
  });
}

}  // namespace mesa_anyjev::engine
