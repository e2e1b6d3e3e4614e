// The test-only fault plan (mesa-anyjevd --inject-faults): its grammar, the
// passes it strikes or holds, and the device-lost mark the daemon reads.
#include "server/engine/fault_plan.h"

#include <catch2/catch.hpp>

#include "server/model/device_fault.h"

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
        "--inject-faults: 'melt' is not a fault (oom, lost or hold); give "
        "FAULT@PASS joined by commas, FAULT oom, lost or hold (hold@PASS=FILE: "
        "the engine waits for FILE before planning the pass), PASS from 1 "
        "(e.g. oom@3,lost@5)");
  CHECK_THAT(std::string(FaultPlan::Parse("hold@2").status().message()),
             Catch::Contains("'hold@2' names no file to wait for"));
  CHECK_THAT(std::string(FaultPlan::Parse("oom@2=/tmp/x").status().message()),
             Catch::Contains("has a file, which only hold takes"));
}

TEST_CASE("a hold names its pass and file, and strikes no pass",
          "[fault_plan]") {
  auto plan = FaultPlan::Parse("hold@1=/tmp/go=now,lost@3");
  REQUIRE(plan.ok());
  CHECK(plan->Describe() ==
        "hold before pass 1 until /tmp/go=now exists, device lost at pass 3");
  CHECK(plan->HoldBefore(1) == std::optional<std::string>("/tmp/go=now"));
  CHECK_FALSE(plan->HoldBefore(2).has_value());
  CHECK_FALSE(plan->NextPass().has_value());  // pass 1: held, not struck
  CHECK_FALSE(plan->NextPass().has_value());
  CHECK(plan->NextPass() == InjectedFault::kDeviceLost);
}

TEST_CASE("the device-lost mark travels with the status, no other does",
          "[fault_plan]") {
  const absl::Status lost = model::DeviceLostError("gone");
  CHECK(absl::IsUnavailable(lost));
  CHECK(lost.message() == "gone");
  CHECK(model::IsDeviceLost(lost));
  CHECK_FALSE(model::IsDeviceLost(absl::UnavailableError("gone")));
  CHECK_FALSE(model::IsDeviceLost(absl::ResourceExhaustedError("memory")));
  CHECK_FALSE(model::IsDeviceLost(absl::OkStatus()));
}

}  // namespace
}  // namespace mesa_anyjev::engine
