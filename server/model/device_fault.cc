#include "server/model/device_fault.h"

#include "absl/strings/cord.h"

namespace mesa_anyjev::model {
namespace {

constexpr char kDeviceLostPayload[] = "mesa-anyjev/device-lost";

}  // namespace

absl::Status DeviceLostError(absl::string_view message) {
  absl::Status status = absl::UnavailableError(message);
  status.SetPayload(kDeviceLostPayload, absl::Cord("1"));
  return status;
}

bool IsDeviceLost(const absl::Status& status) {
  return status.GetPayload(kDeviceLostPayload).has_value();
}

}  // namespace mesa_anyjev::model
