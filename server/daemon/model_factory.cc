#include "server/daemon/model_factory.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/fake_backend.h"
#include "common/status/status_macros.h"
#if MESA_ANYJEV_WITH_TORCH
#include "server/engine/qwen3_backend.h"
#endif

namespace mesa_anyjev::daemon {

absl::StatusOr<std::unique_ptr<Backend>> LoadModel(
    const config::ModelConfig& model, const config::EngineConfig& engine,
    engine::EngineObserver* observer, const absl::Notification& stop) {
  if (model.path == "fake") {
    // The fake "loads" for fake_load_s so tests can watch NOT_SERVING.
    if (stop.WaitForNotificationWithTimeout(absl::Seconds(model.fake_load_s))) {
      return absl::CancelledError("shutdown requested while loading");
    }
    FakeBackendOptions options;
    options.delay_s = model.fake_delay_s;
    return std::unique_ptr<Backend>(std::make_unique<FakeBackend>(options));
  }
  std::error_code error;
  if (!std::filesystem::is_directory(model.path, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.path: '", model.path,
                     "' is neither \"fake\" nor a checkpoint directory"));
  }
#if MESA_ANYJEV_WITH_TORCH
  ASSIGN_OR_RETURN(auto backend,
                   engine::Qwen3Backend::Load(model, engine, observer));
  return std::unique_ptr<Backend>(std::move(backend));
#else
  (void)engine;
  (void)observer;
  return absl::FailedPreconditionError(absl::StrCat(
      "model.path: '", model.path,
      "' is a checkpoint, but this daemon was built without libtorch "
      "(MESA_ANYJEV_WITH_TORCH=OFF); only \"fake\" is served"));
#endif
}

}  // namespace mesa_anyjev::daemon
