// A YAML configuration file, through the loader and the validator.
#include "common/config/config_loader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesa_anyjev;
  config::LoadOptions options;
  options.config_path = fuzz::WriteTemp(fuzz::AsText(data, size), ".yaml");
  auto loaded = config::LoadConfig(options);
  if (loaded.ok()) (void)config::ToYaml(*loaded);
  return 0;
}
