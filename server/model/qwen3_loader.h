// Loads a Hugging Face Qwen3 checkpoint directory into a Qwen3Model: every
// tensor checked against config.json (nothing missing, nothing unexpected,
// shapes exact), converted once into the configured dtype and device. The
// checkpoint's files are unmapped when this returns, so resident memory is the
// weights themselves. Two steps, so that a caller can check what the weights
// will need (memory_fit.h) from config.json before the first one is read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/config/kernel_set.h"
#include "server/model/checkpoint.h"
#include "server/model/qwen3_config.h"
#include "server/model/qwen3_model.h"

namespace mesa_anyjev::model {

struct Qwen3LoadOptions {
  std::string dtype = "float32";    // float32 | bfloat16
  std::string device = "cpu";       // cpu | cuda | cuda:N
  CpuGemm gemm = CpuGemm::kOneDnn;  // CPU float32 only (packed_linear.h)
  // Stages run as our fused CUDA kernels, already resolved for the device
  // (kernels/resolve.h).
  config::KernelSet kernels;
};

// A checkpoint opened (its safetensors headers read and checked) with its
// config.json parsed; no weight read yet.
struct OpenedQwen3 {
  std::unique_ptr<Checkpoint> checkpoint;
  Qwen3Config config;
};

struct LoadedQwen3 {
  std::unique_ptr<Qwen3Model> model;
  std::string
      fingerprint;  // sha256 over config.json and the safetensors headers
  // Bytes of the converted weights, plus a packed copy of a tied lm_head.
  int64_t weight_bytes = 0;
};

// Refuses a dtype or device `options` do not name, then opens `dir`.
absl::StatusOr<OpenedQwen3> OpenQwen3(const std::string& dir,
                                      const Qwen3LoadOptions& options);
// Reads the weights of an opened checkpoint.
absl::StatusOr<LoadedQwen3> LoadQwen3(OpenedQwen3 opened,
                                      const Qwen3LoadOptions& options);

}  // namespace mesa_anyjev::model
