// A safetensors file: header length, header JSON, dtypes, shapes, offsets
// and every tensor view the reader hands out.
#include "server/model/safetensors_file.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesa_anyjev;
  const std::string path =
      fuzz::WriteTemp(fuzz::AsText(data, size), ".safetensors");
  auto file = model::SafetensorsFile::Open(path);
  if (!file.ok()) return 0;
  for (const model::TensorView& view : (*file)->tensors()) {
    if ((*file)->Find(view.name) != &view || view.nbytes == 0) continue;
    // Touch the first and last byte: views must lie inside the mapping.
    volatile std::byte sink = view.data[0] ^ view.data[view.nbytes - 1];
    (void)sink;
  }
  return 0;
}
