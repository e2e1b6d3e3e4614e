// The test-only fault plan (mesa-anyjevd --inject-faults): its grammar, the
// passes it strikes, and the device-lost mark the daemon reads.
#include "server/engine/fault_plan.h"

#include <catch2/catch.hpp>

#include "server/engine/device_fault.h"

namespace mesa_anyjev::engine {
namespace {

TEST_CASE("a fault plan strikes the passes it names, counted from 1",
          "[fault_plan]") {
  auto plan = FaultPlan::Parse("oom@2,lost@4");
  REQUIRE(plan.ok());
  CHECK(plan->Describe() == "out of memory at pass 2, device lost at pass 4");
  CHECK_FALSE(plan->NextPass().has_value());
  CHECK(plan->NextPass() == InjectedFault::kOutOfMemory);
  CHECK_FALSE(plan->NextPass().has_value());
  CHECK(plan->NextPass() == InjectedFault::kDeviceLost);
  CHECK_FALSE(plan->NextPass().has_value());
}

TEST_CASE("a fault plan refuses what is not FAULT@PASS", "[fault_plan]") {
  for (const char* spec :
       {"", "oom", "oom@", "oom@0", "oom@-1", "oom@2x", "lost@1@2", "oom@2,"}) {
    const auto plan = FaultPlan::Parse(spec);
    INFO(spec);
    REQUIRE(absl::IsInvalidArgument(plan.status()));
    CHECK_THAT(std::string(plan.status().message()),
               Catch::Contains("is not a fault; give FAULT@PASS"));
  }
  const auto unknown = FaultPlan::Parse("oom@1,melt@2");
  CHECK(unknown.status().message() ==
        "--inject-faults: 'melt' is not a fault (oom or lost); give "
        "FAULT@PASS joined by commas, FAULT oom or lost, PASS from 1 (e.g. "
        "oom@3,lost@5)");
}

TEST_CASE("the device-lost mark travels with the status, no other does",
          "[fault_plan]") {
  const absl::Status lost = DeviceLostError("gone");
  CHECK(absl::IsUnavailable(lost));
  CHECK(lost.message() == "gone");
  CHECK(IsDeviceLost(lost));
  CHECK_FALSE(IsDeviceLost(absl::UnavailableError("gone")));
  CHECK_FALSE(IsDeviceLost(absl::ResourceExhaustedError("memory")));
  CHECK_FALSE(IsDeviceLost(absl::OkStatus()));
}

}  // namespace
}  // namespace mesa_anyjev::engine
