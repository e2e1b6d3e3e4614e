// Validation follows the order of the data: length prefix (before anything is
// parsed), header text, each entry on its own, then the layout of all
// entries together. Offsets and sizes stay uint64_t with checked arithmetic
// until they are known to lie inside the mapping. Each step's message states
// the broken rule; its caller puts the tensor, then Open the path, in front.
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
  const char* name;  // a C string: absl::StrCat takes no std::string_view
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

// Where a tensor's bytes lie, relative to the data section: [begin, end).
struct Range {
  uint64_t begin;
  uint64_t end;
};

// An entry that passed its own checks, waiting for the layout check.
struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  Range range;  // as many bytes as the shape and dtype need
};

// What the header holds, each entry checked on its own.
struct HeaderContents {
  std::map<std::string, std::string> metadata;
  std::vector<Entry> entries;
};

template <typename... Parts>
absl::Status Invalid(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

// `status` with `prefix` (what the message is about) before its message.
absl::Status Prefixed(absl::string_view prefix, const absl::Status& status) {
  if (status.ok()) {
    return status;
  }
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string RangeText(const Range& range) {
  return absl::StrCat("[", range.begin, ", ", range.end, "]");
}

// `v` as an integer in [0, max]; the error says what `v` is instead, for the
// caller to prefix with what `v` was meant to be.
absl::StatusOr<uint64_t> NonNegativeInt(const json& v, uint64_t max) {
  if (v.is_number_integer() && !v.is_number_unsigned()) {
    // nlohmann parses every literal without a minus sign as unsigned, so
    // this one had a sign: negative, or "-0", which the reference (serde's
    // usize) refuses too.
    const auto value = v.get<int64_t>();
    return Invalid("is negative (", value == 0 ? "-0" : absl::StrCat(value),
                   ")");
  }
  if (!v.is_number_unsigned()) {
    return Invalid("is not an integer (", Printable(v.dump(), 64), ")");
  }
  const auto value = v.get<uint64_t>();
  if (value > max) {
    return Invalid("is ", value, ", above the limit ", max);
  }
  return value;
}

// The u64 little-endian header length N, checked against the cap and the
// file (at least 8 bytes) before anything is parsed or allocated.
absl::StatusOr<uint64_t> HeaderLength(const std::byte* file, uint64_t size) {
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) {
    header_len |= static_cast<uint64_t>(file[i]) << (8 * i);
  }
  if (header_len > SafetensorsFile::kMaxHeaderBytes) {
    return Invalid("header length ", header_len, " exceeds the cap of ",
                   SafetensorsFile::kMaxHeaderBytes, " bytes");
  }
  if (header_len > size - 8) {
    return Invalid("header length ", header_len,
                   " runs past the end of the file (", size, " bytes, 8 + ",
                   header_len, " needed)");
  }
  return header_len;
}

// The header text as JSON: UTF-8, an object, strict (no duplicate key,
// bounded nesting).
absl::StatusOr<json> ParseHeader(std::string_view header) {
  if (const int64_t bad = text::FirstInvalidUtf8(header); bad >= 0) {
    return Invalid("header is not valid UTF-8 (byte ", bad, ")");
  }
  if (header.empty() || header.front() != '{') {
    return Invalid("header is not a JSON object (it must start with '{')");
  }
  auto parsed = text::ParseStrictJson(
      header, {.max_bytes = header.size(),  // bounded by HeaderLength
               .max_bytes_name = "the header length",
               .max_depth = kMaxHeaderDepth});
  if (!parsed.ok()) {
    return Invalid("header: ", parsed.status().message());
  }
  if (!parsed->is_object()) {
    return Invalid("header is not a JSON object");
  }
  return *std::move(parsed);
}

// "__metadata__": an object of string -> string; null reads as "no
// metadata", as in the reference.
absl::StatusOr<std::map<std::string, std::string>> ParseMetadata(
    const json& value) {
  std::map<std::string, std::string> metadata;
  if (value.is_null()) {
    return metadata;
  }
  if (!value.is_object()) {
    return Invalid("__metadata__ is not an object of string -> string");
  }
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!it->is_string()) {
      return Invalid("__metadata__ entry '", Printable(it.key()),
                     "' is not a string");
    }
    metadata.emplace(it.key(), it->get<std::string>());
  }
  return metadata;
}

// A tensor entry is an object with exactly dtype, shape and data_offsets.
absl::Status CheckFields(const json& value) {
  if (!value.is_object()) {
    return Invalid("entry is not an object");
  }
  for (auto field = value.begin(); field != value.end(); ++field) {
    if (field.key() != "dtype" && field.key() != "shape" &&
        field.key() != "data_offsets") {
      return Invalid("unexpected field '", Printable(field.key()),
                     "' (only dtype, shape and data_offsets)");
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(field)) {
      return Invalid("missing '", field, "'");
    }
  }
  return absl::OkStatus();
}

// One of the closed set of dtype names, refused by name otherwise.
absl::StatusOr<DType> ParseDType(const json& dtype_json) {
  if (!dtype_json.is_string()) {
    return Invalid("dtype is not a string (", Printable(dtype_json.dump(), 64),
                   ")");
  }
  const auto& name = dtype_json.get_ref<const std::string&>();
  const std::optional<DType> dtype = DTypeFromName(name);
  if (!dtype.has_value()) {
    return Invalid("unknown dtype '", Printable(name), "'");
  }
  return *dtype;
}

// A list of dimensions in [0, 2^63): int64 because that is what tensor
// libraries index with.
absl::StatusOr<std::vector<int64_t>> ParseShape(const json& shape_json) {
  if (!shape_json.is_array()) {
    return Invalid("shape is not a list (", Printable(shape_json.dump(), 64),
                   ")");
  }
  std::vector<int64_t> shape;
  shape.reserve(shape_json.size());
  for (size_t d = 0; d < shape_json.size(); ++d) {
    const auto dim = NonNegativeInt(
        shape_json[d],
        static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
    if (!dim.ok()) {
      return Prefixed(absl::StrCat("shape dimension ", d, " "), dim.status());
    }
    shape.push_back(static_cast<int64_t>(*dim));
  }
  return shape;
}

// Bytes the shape holds in `dtype`, multiplied left to right with a check
// at every step, as the reference: a product that would wrap is refused
// even if a later dimension is 0.
absl::StatusOr<uint64_t> ByteSize(const std::vector<int64_t>& shape,
                                  DType dtype) {
  uint64_t numel = 1;
  for (const int64_t dim : shape) {
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dim), &numel)) {
      return Invalid("shape ", ShapeText(shape),
                     " has more elements than fit in 64 bits");
    }
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, DTypeSize(dtype), &nbytes)) {
    return Invalid("shape ", ShapeText(shape), " x ", Info(dtype).name,
                   " is more bytes than fit in 64 bits");
  }
  return nbytes;
}

// data_offsets: a list [begin, end] of non-negative integers, begin <= end.
absl::StatusOr<Range> ParseOffsets(const json& offsets_json) {
  if (!offsets_json.is_array() || offsets_json.size() != 2) {
    return Invalid("data_offsets is not a list [begin, end] (",
                   Printable(offsets_json.dump(), 64), ")");
  }
  constexpr uint64_t kAny = std::numeric_limits<uint64_t>::max();
  const auto begin = NonNegativeInt(offsets_json[0], kAny);
  if (!begin.ok()) {
    return Prefixed("data_offsets begin ", begin.status());
  }
  const auto end = NonNegativeInt(offsets_json[1], kAny);
  if (!end.ok()) {
    return Prefixed("data_offsets end ", end.status());
  }
  const Range range{.begin = *begin, .end = *end};
  if (range.begin > range.end) {
    return Invalid("data_offsets ", RangeText(range), ": begin is after end");
  }
  return range;
}

// One tensor entry on its own: its fields, its dtype, shape and offsets, and
// a range inside the data section exactly as long as the shape needs.
absl::StatusOr<Entry> ParseEntry(const std::string& name, const json& value,
                                 uint64_t data_bytes) {
  RETURN_IF_ERROR(CheckFields(value));
  ASSIGN_OR_RETURN(const DType dtype, ParseDType(value["dtype"]));
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, ParseShape(value["shape"]));
  ASSIGN_OR_RETURN(const uint64_t nbytes, ByteSize(shape, dtype));
  ASSIGN_OR_RETURN(const Range range, ParseOffsets(value["data_offsets"]));
  if (range.end > data_bytes) {
    return Invalid("data_offsets ", RangeText(range),
                   " run past the end of the data section (", data_bytes,
                   " bytes)");
  }
  if (range.end - range.begin != nbytes) {
    return Invalid("data_offsets ", RangeText(range), " hold ",
                   range.end - range.begin, " bytes but shape ",
                   ShapeText(shape), " x ", Info(dtype).name, " needs ",
                   nbytes);
  }
  return Entry{
      .name = name, .dtype = dtype, .shape = std::move(shape), .range = range};
}

// Every entry of the header, in key order: the metadata, and each tensor
// checked on its own (its errors name it).
absl::StatusOr<HeaderContents> ParseEntries(const json& root,
                                            uint64_t data_bytes) {
  HeaderContents contents;
  contents.entries.reserve(root.size());
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      ASSIGN_OR_RETURN(contents.metadata, ParseMetadata(it.value()));
      continue;
    }
    auto entry = ParseEntry(it.key(), it.value(), data_bytes);
    if (!entry.ok()) {
      return Prefixed(absl::StrCat("tensor '", Printable(it.key()), "': "),
                      entry.status());
    }
    contents.entries.push_back(*std::move(entry));
  }
  return contents;
}

// File order: by data offset (then end, so a zero-byte tensor comes first).
bool ByOffset(const Entry& a, const Entry& b) {
  return std::pair(a.range.begin, a.range.end) <
         std::pair(b.range.begin, b.range.end);
}

// Sorted by offset, the tensors must tile the data section exactly: the
// first begins at 0, each where the previous ended (no gap, no overlap), and
// the last ends where the file does (no trailing bytes).
absl::Status CheckTiling(const std::vector<Entry>& sorted,
                         uint64_t data_bytes) {
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& entry : sorted) {
    const std::string range = RangeText(entry.range);
    if (entry.range.begin < covered) {
      return Invalid("tensor '", Printable(entry.name), "': data_offsets ",
                     range, " overlap tensor '", Printable(previous->name),
                     "' at ", RangeText(previous->range));
    }
    if (entry.range.begin > covered) {
      if (previous == nullptr) {
        return Invalid("tensor '", Printable(entry.name), "': data_offsets ",
                       range, " leave a gap of ", entry.range.begin,
                       " bytes at the start of the data section");
      }
      return Invalid("tensor '", Printable(entry.name), "': data_offsets ",
                     range, " leave a gap of ", entry.range.begin - covered,
                     " bytes after tensor '", Printable(previous->name),
                     "' at ", RangeText(previous->range));
    }
    covered = entry.range.end;
    previous = &entry;
  }
  if (covered != data_bytes) {
    return Invalid("data section is ", data_bytes,
                   " bytes but the tensors end at ", covered, ": ",
                   data_bytes - covered, " trailing bytes");
  }
  return absl::OkStatus();
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
  RETURN_IF_ERROR(Prefixed(absl::StrCat(path, ": "), file->Parse()));
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
  ASSIGN_OR_RETURN(const uint64_t header_len, HeaderLength(base_, size_));
  header_ =
      std::string_view(reinterpret_cast<const char*>(base_ + 8), header_len);
  data_bytes_ = size_ - 8 - header_len;
  ASSIGN_OR_RETURN(const json root, ParseHeader(header_));
  ASSIGN_OR_RETURN(HeaderContents contents, ParseEntries(root, data_bytes_));
  std::stable_sort(contents.entries.begin(), contents.entries.end(), ByOffset);
  RETURN_IF_ERROR(CheckTiling(contents.entries, data_bytes_));

  // Valid: hand out views of the data section, in file order.
  metadata_ = std::move(contents.metadata);
  const std::byte* data = base_ + 8 + header_len;
  tensors_.reserve(contents.entries.size());
  for (Entry& entry : contents.entries) {
    index_.emplace(entry.name, tensors_.size());
    tensors_.push_back(TensorView{
        .name = std::move(entry.name),
        .dtype = entry.dtype,
        .shape = std::move(entry.shape),
        .data = data + entry.range.begin,
        .nbytes = static_cast<size_t>(entry.range.end - entry.range.begin)});
  }
  return absl::OkStatus();
}

}  // namespace mesa_anyjev::model
