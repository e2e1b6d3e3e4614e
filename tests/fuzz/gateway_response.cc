// A /v1/completions answer from the gateway, as the backend reads it, then
// label lookups in whatever it yields.
#include "common/gateway/gateway_backend.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesa_anyjev;
  auto top = gateway::ParseTopLogprobs(fuzz::AsText(data, size));
  if (top.ok()) {
    (void)gateway::LookupLabel(*top, " A",
                               "\xC4\xA0"
                               "A");
    (void)gateway::LookupLabel(*top, "Yes", "Yes");
  }
  return 0;
}
