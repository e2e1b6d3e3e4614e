// safetensors_dump: the C++ reader's view of a .safetensors file or a Hugging
// Face model directory, for the end-to-end tests to compare with what the
// Python safetensors package wrote. One JSON line per tensor
//   {"name": ..., "dtype": "BF16", "shape": [..], "sha256": <of the bytes>}
// in file order (a file) or name order (a directory); with --fingerprint a
// directory adds {"fingerprint": ..., "total_bytes": ...} last. A file or
// directory the reader refuses prints the error on stderr and exits 1;
// usage errors exit 2.
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>

#include "common/util/hash.h"
#include "nlohmann/json.hpp"
#include "server/model/checkpoint.h"
#include "server/model/safetensors_file.h"

namespace {

using mesa_anyjev::model::Checkpoint;
using mesa_anyjev::model::SafetensorsFile;
using mesa_anyjev::model::TensorView;

void PrintTensor(const TensorView& view) {
  const std::string_view bytes(reinterpret_cast<const char*>(view.data),
                               view.nbytes);
  nlohmann::json line = {
      {"name", view.name},
      {"dtype", std::string(mesa_anyjev::model::DTypeName(view.dtype))},
      {"shape", view.shape},
      {"sha256", mesa_anyjev::util::Sha256Hex(bytes)}};
  std::cout << line.dump() << "\n";
}

int Usage() {
  std::cerr << "usage: safetensors_dump [--fingerprint] FILE.safetensors|DIR\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool fingerprint = false;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--fingerprint") == 0) {
      fingerprint = true;
    } else if (path.empty() && argv[i][0] != '-') {
      path = argv[i];
    } else {
      return Usage();
    }
  }
  if (path.empty()) {
    return Usage();
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    auto checkpoint = Checkpoint::Open(path);
    if (!checkpoint.ok()) {
      std::cerr << checkpoint.status().ToString() << "\n";
      return 1;
    }
    for (const std::string& name : (*checkpoint)->names()) {
      PrintTensor(*(*checkpoint)->Find(name));
    }
    if (fingerprint) {
      nlohmann::json line = {{"fingerprint", (*checkpoint)->Fingerprint()},
                             {"total_bytes", (*checkpoint)->total_bytes()}};
      std::cout << line.dump() << "\n";
    }
    return 0;
  }
  if (fingerprint) {
    return Usage();  // a fingerprint belongs to a directory
  }
  auto file = SafetensorsFile::Open(path);
  if (!file.ok()) {
    std::cerr << file.status().ToString() << "\n";
    return 1;
  }
  for (const TensorView& view : (*file)->tensors()) {
    PrintTensor(view);
  }
  return 0;
}
