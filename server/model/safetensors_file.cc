// Validation follows the order of the data: length prefix (before anything is
// parsed), header text, each entry on its own, then the layout of all
// entries together. Offsets and sizes stay uint64_t with checked arithmetic
// until they are known to lie inside the mapping.
#include "server/model/safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"
#include "common/text/strict_json.h"
#include "common/text/utf8.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::model {
namespace {

using json = nlohmann::json;
using text::Printable;

// A safetensors header needs three levels (header, entry, shape); the slack
// lets a malformed entry get a specific message while a header of nested
// brackets still stops early.
constexpr int kMaxHeaderDepth = 16;

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 15> kDTypes = {{
    {DType::kBool, "BOOL", 1},
    {DType::kU8, "U8", 1},
    {DType::kI8, "I8", 1},
    {DType::kF8E5M2, "F8_E5M2", 1},
    {DType::kF8E4M3, "F8_E4M3", 1},
    {DType::kI16, "I16", 2},
    {DType::kU16, "U16", 2},
    {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},
    {DType::kI32, "I32", 4},
    {DType::kU32, "U32", 4},
    {DType::kF32, "F32", 4},
    {DType::kF64, "F64", 8},
    {DType::kI64, "I64", 8},
    {DType::kU64, "U64", 8},
}};

const DTypeInfo& Info(DType dtype) {
  return kDTypes[static_cast<size_t>(dtype)];
}

// An entry that passed its own checks, waiting for the layout check.
struct Entry {
  TensorView view;
  uint64_t begin;
  uint64_t end;
};

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string RangeText(uint64_t begin, uint64_t end) {
  return absl::StrCat("[", begin, ", ", end, "]");
}

// `v` as an integer in [0, max]; the error says what `v` is instead, for the
// caller to prefix with what `v` was meant to be.
absl::StatusOr<uint64_t> NonNegativeInt(const json& v, uint64_t max) {
  if (v.is_number_integer() && !v.is_number_unsigned()) {
    // nlohmann parses every literal without a minus sign as unsigned, so
    // this one had a sign: negative, or "-0", which the reference (serde's
    // usize) refuses too.
    const auto value = v.get<int64_t>();
    return absl::InvalidArgumentError(absl::StrCat(
        "is negative (", value == 0 ? "-0" : absl::StrCat(value), ")"));
  }
  if (!v.is_number_unsigned()) {
    return absl::InvalidArgumentError(
        absl::StrCat("is not an integer (", Printable(v.dump(), 64), ")"));
  }
  const auto value = v.get<uint64_t>();
  if (value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("is ", value, ", above the limit ", max));
  }
  return value;
}

}  // namespace

std::string_view DTypeName(DType dtype) { return Info(dtype).name; }

size_t DTypeSize(DType dtype) { return Info(dtype).size; }

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) {
      return info.dtype;
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path) {
  // O_NONBLOCK: opening a FIFO planted under a model's name must not hang
  // the daemon; it is refused below as not a regular file.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot open ", path));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("cannot stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file"));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": file is ", size,
                     " bytes, too short for the 8-byte header length"));
  }
  void* addr = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int mmap_errno = errno;
  close(fd);  // the mapping keeps the file referenced
  if (addr == MAP_FAILED) {
    return absl::ErrnoToStatus(mmap_errno, absl::StrCat("cannot map ", path));
  }
  // Owned from here on, so every early return below unmaps.
  std::unique_ptr<SafetensorsFile> file(
      new SafetensorsFile(path, static_cast<const std::byte*>(addr), size));
  RETURN_IF_ERROR(file->Parse());
  return file;
}

SafetensorsFile::SafetensorsFile(std::string path, const std::byte* base,
                                 size_t size)
    : path_(std::move(path)), base_(base), size_(size) {}

SafetensorsFile::~SafetensorsFile() {
  munmap(const_cast<std::byte*>(base_), size_);
}

const TensorView* SafetensorsFile::Find(std::string_view name) const {
  const auto it = index_.find(absl::string_view(name.data(), name.size()));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

absl::Status SafetensorsFile::Parse() {
  auto file_error = [this](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", parts...));
  };

  // 1. Length prefix, checked against the cap and the file before use.
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) {
    header_len |= static_cast<uint64_t>(base_[i]) << (8 * i);
  }
  if (header_len > kMaxHeaderBytes) {
    return file_error("header length ", header_len, " exceeds the cap of ",
                      kMaxHeaderBytes, " bytes");
  }
  if (header_len > size_ - 8) {
    return file_error("header length ", header_len,
                      " runs past the end of the file (", size_, " bytes, 8 + ",
                      header_len, " needed)");
  }
  header_ =
      std::string_view(reinterpret_cast<const char*>(base_ + 8), header_len);
  const std::byte* data = base_ + 8 + header_len;
  data_bytes_ = size_ - 8 - header_len;

  // 2. Header text: UTF-8, an object, strict JSON.
  if (const int64_t bad = text::FirstInvalidUtf8(header_); bad >= 0) {
    return file_error("header is not valid UTF-8 (byte ", bad, ")");
  }
  if (header_.empty() || header_.front() != '{') {
    return file_error("header is not a JSON object (it must start with '{')");
  }
  auto parsed = text::ParseStrictJson(
      header_, {.max_bytes = header_.size(),  // bounded above
                .max_bytes_name = "the header length",
                .max_depth = kMaxHeaderDepth});
  if (!parsed.ok()) {
    return file_error("header: ", parsed.status().message());
  }
  const json& root = *parsed;
  if (!root.is_object()) {
    return file_error("header is not a JSON object");
  }

  // 3. Each entry on its own.
  std::vector<Entry> entries;
  entries.reserve(root.size());
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const json& value = it.value();
    if (name == "__metadata__") {
      if (value.is_null()) {
        continue;  // the reference reads null as "no metadata"
      }
      if (!value.is_object()) {
        return file_error("__metadata__ is not an object of string -> string");
      }
      for (auto m = value.begin(); m != value.end(); ++m) {
        if (!m->is_string()) {
          return file_error("__metadata__ entry '", Printable(m.key()),
                            "' is not a string");
        }
        metadata_.emplace(m.key(), m->get<std::string>());
      }
      continue;
    }
    auto tensor_error = [&](auto&&... parts) {
      return file_error("tensor '", Printable(name), "': ", parts...);
    };
    if (!value.is_object()) {
      return tensor_error("entry is not an object");
    }
    for (auto field = value.begin(); field != value.end(); ++field) {
      if (field.key() != "dtype" && field.key() != "shape" &&
          field.key() != "data_offsets") {
        return tensor_error("unexpected field '", Printable(field.key()),
                            "' (only dtype, shape and data_offsets)");
      }
    }
    for (const char* field : {"dtype", "shape", "data_offsets"}) {
      if (!value.contains(field)) {
        return tensor_error("missing '", field, "'");
      }
    }

    const json& dtype_json = value["dtype"];
    if (!dtype_json.is_string()) {
      return tensor_error("dtype is not a string (",
                          Printable(dtype_json.dump(), 64), ")");
    }
    const auto& dtype_name = dtype_json.get_ref<const std::string&>();
    const std::optional<DType> dtype = DTypeFromName(dtype_name);
    if (!dtype.has_value()) {
      return tensor_error("unknown dtype '", Printable(dtype_name), "'");
    }

    const json& shape_json = value["shape"];
    if (!shape_json.is_array()) {
      return tensor_error("shape is not a list (",
                          Printable(shape_json.dump(), 64), ")");
    }
    std::vector<int64_t> shape;
    shape.reserve(shape_json.size());
    for (size_t d = 0; d < shape_json.size(); ++d) {
      // int64 because that is what tensor libraries index with.
      const auto dim = NonNegativeInt(
          shape_json[d],
          static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
      if (!dim.ok()) {
        return tensor_error("shape dimension ", d, " ", dim.status().message());
      }
      shape.push_back(static_cast<int64_t>(*dim));
    }
    // Left to right with a check at every step, as the reference: a product
    // that would wrap is refused even if a later dimension is 0.
    uint64_t numel = 1;
    for (const int64_t dim : shape) {
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dim), &numel)) {
        return tensor_error("shape ", ShapeText(shape),
                            " has more elements than fit in 64 bits");
      }
    }
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, DTypeSize(*dtype), &nbytes)) {
      return tensor_error("shape ", ShapeText(shape), " x ", dtype_name,
                          " is more bytes than fit in 64 bits");
    }

    const json& offsets_json = value["data_offsets"];
    if (!offsets_json.is_array() || offsets_json.size() != 2) {
      return tensor_error("data_offsets is not a list [begin, end] (",
                          Printable(offsets_json.dump(), 64), ")");
    }
    const auto begin =
        NonNegativeInt(offsets_json[0], std::numeric_limits<uint64_t>::max());
    if (!begin.ok()) {
      return tensor_error("data_offsets begin ", begin.status().message());
    }
    const auto end =
        NonNegativeInt(offsets_json[1], std::numeric_limits<uint64_t>::max());
    if (!end.ok()) {
      return tensor_error("data_offsets end ", end.status().message());
    }
    const std::string range = RangeText(*begin, *end);
    if (*begin > *end) {
      return tensor_error("data_offsets ", range, ": begin is after end");
    }
    if (*end > data_bytes_) {
      return tensor_error("data_offsets ", range,
                          " run past the end of the data section (",
                          data_bytes_, " bytes)");
    }
    if (*end - *begin != nbytes) {
      return tensor_error("data_offsets ", range, " hold ", *end - *begin,
                          " bytes but shape ", ShapeText(shape), " x ",
                          dtype_name, " needs ", nbytes);
    }
    entries.push_back(
        Entry{.view = TensorView{.name = name,
                                 .dtype = *dtype,
                                 .shape = std::move(shape),
                                 .data = data + *begin,
                                 .nbytes = static_cast<size_t>(nbytes)},
              .begin = *begin,
              .end = *end});
  }

  // 4. Layout: sorted by offset, the ranges tile [0, data_bytes_) exactly.
  std::stable_sort(
      entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
      });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& entry : entries) {
    const std::string range = RangeText(entry.begin, entry.end);
    if (entry.begin < covered) {
      return file_error("tensor '", Printable(entry.view.name),
                        "': data_offsets ", range, " overlap tensor '",
                        Printable(previous->view.name), "' at ",
                        RangeText(previous->begin, previous->end));
    }
    if (entry.begin > covered) {
      if (previous == nullptr) {
        return file_error("tensor '", Printable(entry.view.name),
                          "': data_offsets ", range, " leave a gap of ",
                          entry.begin,
                          " bytes at the start of the data section");
      }
      return file_error("tensor '", Printable(entry.view.name),
                        "': data_offsets ", range, " leave a gap of ",
                        entry.begin - covered, " bytes after tensor '",
                        Printable(previous->view.name), "' at ",
                        RangeText(previous->begin, previous->end));
    }
    covered = entry.end;
    previous = &entry;
  }
  if (covered != data_bytes_) {
    return file_error("data section is ", data_bytes_,
                      " bytes but the tensors end at ", covered, ": ",
                      data_bytes_ - covered, " trailing bytes");
  }

  tensors_.reserve(entries.size());
  for (Entry& entry : entries) {
    index_.emplace(entry.view.name, tensors_.size());
    tensors_.push_back(std::move(entry.view));
  }
  return absl::OkStatus();
}

}  // namespace mesa_anyjev::model
