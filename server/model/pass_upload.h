// A pass's plan reaches the device in one host-to-device copy: the index
// arrays of a pass (tokens, positions, KV slots, output rows, attention's
// gathers and sequence lengths) are staged side by side in one host buffer
// (pinned on CUDA, so the copy is asynchronous and the host never waits for
// the device inside a pass), copied once, and read as views of the copy.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace mesa_anyjev::model {

class PassUpload {
 public:
  // Where a staged array will be, for View.
  struct Handle {
    int64_t offset = 0, size = 0;
  };

  // Copies `values` into the staging buffer.
  Handle Stage(const std::vector<int64_t>& values);
  // One copy of everything staged to `device` (none on the CPU: the views
  // are of the host buffer itself).
  void Upload(at::Device device);
  // [size] int64 on the device; only after Upload.
  at::Tensor View(Handle handle) const;

 private:
  std::vector<int64_t> staged_;
  at::Tensor device_;
};

}  // namespace mesa_anyjev::model
