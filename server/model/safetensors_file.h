// One .safetensors file, memory-mapped read-only and validated against every
// rule of the reference loader (huggingface/safetensors, tensor.rs), and the
// ones other loaders were fooled by, before any tensor is handed out:
//
//   - the file holds at least the 8-byte header length N (u64, little endian)
//   - N <= kMaxHeaderBytes and 8 + N <= file size, checked before anything
//     is parsed or allocated
//   - the header is UTF-8 JSON, an object (it starts with '{'), with no
//     duplicate key anywhere and no nesting deeper than a safetensors header
//     can need
//   - "__metadata__" (optional; null means absent, as in the reference) is
//     an object of string -> string
//   - every other entry is an object with exactly dtype, shape, data_offsets
//   - dtype is one of the DType names below; anything else is refused by name
//   - shape is a list of integers in [0, 2^63); its element count and byte
//     size are computed with checked 64-bit multiplication, left to right as
//     the reference does, so a product that wraps (2^32 x 2^32 -> 0) is an
//     error, never an empty tensor
//   - data_offsets is [begin, end] relative to the data section (the bytes
//     after the header), begin <= end <= data section size, and
//     end - begin == element count x element size
//   - sorted by offset, the tensors tile the data section exactly: the first
//     begins at 0, each begins where the previous ended (no gap, no overlap)
//     and the last ends at the end of the file (no trailing bytes)
//
// Every violation is INVALID_ARGUMENT (the file is malformed, not merely
// damaged in transit: the same bytes always fail the same way), with the
// path, the tensor and the rule in the message, e.g.
//   model.safetensors: tensor 'model.norm.weight': data_offsets [0, 12] hold
//   12 bytes but shape [4] x BF16 needs 8
// A file that cannot be opened gets the errno's code (NOT_FOUND, ...).
//
// Open copies no tensor data: a multi-GB shard costs address space, and
// resident memory only for the pages a caller reads. The mapping is private
// and read-only; if another process truncates the file while it is mapped,
// reading the lost pages raises SIGBUS, as for any mmap reader, so
// checkpoints must not be rewritten in place while a daemon serves them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace mesa_anyjev::model {

// The reference's closed dtype set (safetensors 0.4 names).
enum class DType : uint8_t {
  kBool,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
};

// The safetensors name: "BF16", "F8_E4M3", ...
std::string_view DTypeName(DType dtype);
// Bytes per element: 1, 2, 4 or 8.
size_t DTypeSize(DType dtype);
// The DType named `name` (case-sensitive, as the format), or nullopt.
std::optional<DType> DTypeFromName(std::string_view name);

// One tensor of a mapped file. `data` points into the mapping and lives as
// long as the SafetensorsFile. It is NOT aligned to the element size in
// general (the header length and offsets need not be multiples of anything),
// so read through memcpy or copy into an aligned buffer; never cast it to
// `const float*` and dereference.
struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // [] is a scalar; a 0 dimension is empty
  const std::byte* data;       // nbytes bytes, unaligned, read-only
  size_t nbytes;
};

class SafetensorsFile {
 public:
  // The reference's MAX_HEADER_SIZE.
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

  // Maps and validates `path` (all rules above). Errors name `path` as given.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(
      const std::string& path);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // nullptr when the file has no tensor of that name.
  const TensorView* Find(std::string_view name) const;
  // Every tensor, in file order (ascending data offset).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // The N header bytes exactly as stored, trailing padding included: what a
  // fingerprint of the file's structure hashes. Points into the mapping.
  std::string_view header() const { return header_; }
  // "__metadata__", empty when absent.
  const std::map<std::string, std::string>& metadata() const {
    return metadata_;
  }
  const std::string& path() const { return path_; }
  uint64_t file_size() const { return size_; }
  // Size of the data section; equals the sum of every tensor's nbytes.
  uint64_t data_bytes() const { return data_bytes_; }

 private:
  SafetensorsFile(std::string path, const std::byte* base, size_t size);
  // Validates the mapping. Messages state the broken rule; Open puts the
  // path in front.
  absl::Status Parse();

  const std::string path_;
  const std::byte* const base_;  // the whole file, mapped
  const size_t size_;
  std::string_view header_;
  uint64_t data_bytes_ = 0;
  std::vector<TensorView> tensors_;
  absl::flat_hash_map<std::string, size_t> index_;  // name -> tensors_ index
  std::map<std::string, std::string> metadata_;
};

}  // namespace mesa_anyjev::model
