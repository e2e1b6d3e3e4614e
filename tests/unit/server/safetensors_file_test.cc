// SafetensorsFile against crafted files: every rule of the reference loader
// and every bug other loaders have had is a refused file with
// its own message; a control file loads with its exact bytes; a 1 GiB file
// is mapped, not read.
#include "server/model/safetensors_file.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tests/unit/server/safetensors_writer.h"

namespace mesa_anyjev::model {
namespace {

using Catch::Contains;
using testing::Entry;
using testing::F32Bytes;
using testing::SafetensorsBytes;
using testing::TempDir;
using testing::U64Le;

struct RefusalCase {
  std::string what;
  std::string bytes;
  std::string expected;  // a substring of the error message
};

// Each case as its own file: refused with INVALID_ARGUMENT, its message
// naming the file and containing the expected text.
void CheckRefusals(const std::vector<RefusalCase>& cases) {
  TempDir dir;
  int n = 0;
  for (const RefusalCase& c : cases) {
    INFO(c.what);
    const std::string path =
        dir.Write(absl::StrCat("case", n++, ".safetensors"), c.bytes);
    const auto file = SafetensorsFile::Open(path);
    REQUIRE_FALSE(file.ok());
    CHECK(absl::IsInvalidArgument(file.status()));
    const std::string message(file.status().message());
    CHECK_THAT(message, Contains(path + ": "));
    CHECK_THAT(message, Contains(c.expected));
  }
}

// A header of the given entries, in braces.
std::string Header(const std::string& entries) {
  return absl::StrCat("{", entries, "}");
}

TEST_CASE("safetensors: length prefix checked before anything is parsed",
          "[safetensors]") {
  CheckRefusals({
      {"empty file", "", "file is 0 bytes, too short"},
      {"7 bytes", std::string(7, '\0'), "file is 7 bytes, too short"},
      {"N above the 100 MB cap", U64Le(100'000'001) + "{}      ",
       "header length 100000001 exceeds the cap of 100000000 bytes"},
      {"N = 2^64-1", U64Le(std::numeric_limits<uint64_t>::max()) + "{}",
       "header length 18446744073709551615 exceeds the cap"},
      {"N beyond the file", U64Le(64) + "{}      ",
       "header length 64 runs past the end of the file (16 bytes"},
      {"N one byte beyond the file", U64Le(9) + "{}      ",
       "header length 9 runs past the end of the file"},
  });
}

TEST_CASE("safetensors: header must be a UTF-8 JSON object without duplicates",
          "[safetensors]") {
  std::string deep = "{\"__metadata__\":";
  for (int i = 0; i < 1000; ++i) {
    deep += "[";
  }
  CheckRefusals({
      {"N = 0", SafetensorsBytes("", "", false),
       "header is not a JSON object (it must start with '{')"},
      {"invalid byte 0xFF", SafetensorsBytes("{\"\xFF\":1}", ""),
       "header is not valid UTF-8 (byte 2)"},
      {"overlong '/'", SafetensorsBytes("{\"\xC0\xAF\":1}", ""),
       "header is not valid UTF-8 (byte 2)"},
      {"UTF-16 surrogate", SafetensorsBytes("{\"\xED\xA0\x80\":1}", ""),
       "header is not valid UTF-8"},
      {"truncated sequence", SafetensorsBytes("{}\xE2\x82", "", false),
       "header is not valid UTF-8 (byte 2)"},
      {"JSON array", SafetensorsBytes("[]", ""), "header is not a JSON object"},
      {"JSON string", SafetensorsBytes("\"x\"", ""),
       "header is not a JSON object"},
      {"leading whitespace", SafetensorsBytes(" {}", ""),
       "it must start with '{'"},
      {"syntax error", SafetensorsBytes("{\"a\": ", ""),
       "header: not valid JSON"},
      {"garbage after the object", SafetensorsBytes("{} x", ""),
       "header: not valid JSON"},
      {"duplicate tensor",
       SafetensorsBytes(Header(Entry("w", "F32", {1}, 0, 4) + "," +
                               Entry("w", "F32", {2}, 0, 8)),
                        F32Bytes(2)),
       "header: duplicate key 'w'"},
      {"duplicate field in an entry",
       SafetensorsBytes("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"I32\","
                        "\"shape\":[1],\"data_offsets\":[0,4]}}",
                        F32Bytes(1)),
       "header: duplicate key 'dtype'"},
      {"duplicate metadata key",
       SafetensorsBytes("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", ""),
       "header: duplicate key 'k'"},
      {"1000 nested arrays", SafetensorsBytes(deep, ""),
       "header: nested deeper than 16 levels"},
  });
}

TEST_CASE("safetensors: each entry has exactly dtype, shape, data_offsets",
          "[safetensors]") {
  const std::string four = F32Bytes(1);
  CheckRefusals({
      {"entry not an object", SafetensorsBytes("{\"w\":5}", ""),
       "tensor 'w': entry is not an object"},
      {"missing data_offsets",
       SafetensorsBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", four),
       "tensor 'w': missing 'data_offsets'"},
      {"missing dtype",
       SafetensorsBytes("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", four),
       "tensor 'w': missing 'dtype'"},
      {"missing shape",
       SafetensorsBytes("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}",
                        four),
       "tensor 'w': missing 'shape'"},
      {"extra field",
       SafetensorsBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
                        "\"data_offsets\":[0,4],\"extra\":1}}",
                        four),
       "tensor 'w': unexpected field 'extra'"},
      {"dtype not a string",
       SafetensorsBytes(
           "{\"w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", four),
       "tensor 'w': dtype is not a string (4)"},
      {"unknown dtype",
       SafetensorsBytes(Header(Entry("w", "F128", {1}, 0, 4)), four),
       "tensor 'w': unknown dtype 'F128'"},
      {"dtype in lower case",
       SafetensorsBytes(Header(Entry("w", "f32", {1}, 0, 4)), four),
       "tensor 'w': unknown dtype 'f32'"},
      {"control characters in names are escaped in messages",
       SafetensorsBytes(Header(Entry("w\\n", "F\\u0000", {1}, 0, 4)), four),
       "tensor 'w\\x0a': unknown dtype 'F\\x00'"},
      {"a 100 kB name is cut short in messages",
       SafetensorsBytes(
           Header(Entry(std::string(100'000, 'n'), "F0", {1}, 0, 4)), four),
       "tensor '" + std::string(256, 'n') + "...': unknown dtype 'F0'"},
      // kekzl/imp#1603: an unknown dtype skipped the offset checks.
      {"unknown dtype with offsets out of range",
       SafetensorsBytes(Header(Entry("w", "Q4_K", {1}, 0, 1 << 30)), four),
       "tensor 'w': unknown dtype 'Q4_K'"},
  });
}

TEST_CASE("safetensors: shapes are non-negative with checked products",
          "[safetensors]") {
  const std::string empty;
  CheckRefusals({
      {"shape not a list",
       SafetensorsBytes(
           "{\"w\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}",
           F32Bytes(4)),
       "tensor 'w': shape is not a list (4)"},
      // leejet/stable-diffusion.cpp#1876: negative dims were accepted.
      {"negative dimension",
       SafetensorsBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-1],"
                        "\"data_offsets\":[0,0]}}",
                        empty),
       "tensor 'w': shape dimension 1 is negative (-1)"},
      {"minus zero dimension",
       SafetensorsBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[-0],"
                        "\"data_offsets\":[0,0]}}",
                        empty),
       "tensor 'w': shape dimension 0 is negative (-0)"},
      {"fractional dimension",
       SafetensorsBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],"
                        "\"data_offsets\":[0,4]}}",
                        F32Bytes(1)),
       "tensor 'w': shape dimension 0 is not an integer (1.5)"},
      {"dimension above int64",
       SafetensorsBytes(Header(Entry("w", "U8", {uint64_t{1} << 63}, 0, 0)),
                        empty),
       "tensor 'w': shape dimension 0 is 9223372036854775808, above the "
       "limit"},
      // leejet/stable-diffusion.cpp#1876: 2^32 x 2^32 wrapped to 0.
      {"2^32 x 2^32",
       SafetensorsBytes(
           Header(
               Entry("w", "F32", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0)),
           empty),
       "tensor 'w': shape [4294967296, 4294967296] has more elements than "
       "fit in 64 bits"},
      // google-ai-edge/LiteRT#9254: a product wrapping to exactly 0 was
      // taken for an empty tensor and skipped the offset checks.
      {"2^16 x 2^16 x 2^32 wraps to 0",
       SafetensorsBytes(
           Header(Entry("w", "F32", {65536, 65536, uint64_t{1} << 32}, 0, 0)),
           empty),
       "has more elements than fit in 64 bits"},
      {"overflow before a zero dimension (reference order)",
       SafetensorsBytes(
           Header(Entry("w", "U8", {uint64_t{1} << 32, uint64_t{1} << 32, 0}, 0,
                        0)),
           empty),
       "has more elements than fit in 64 bits"},
      {"byte size 2^62 x 4 wraps to 0",
       SafetensorsBytes(Header(Entry("w", "F32", {uint64_t{1} << 62}, 0, 0)),
                        empty),
       "tensor 'w': shape [4611686018427387904] x F32 is more bytes than fit "
       "in 64 bits"},
      {"2^64-1 elements, no overflow, far too big",
       SafetensorsBytes(
           Header(Entry("w", "U8", {4294967297, 4294967295}, 0, 8)),
           F32Bytes(2)),
       "hold 8 bytes but shape [4294967297, 4294967295] x U8 needs "
       "18446744073709551615"},
  });
}

TEST_CASE("safetensors: offsets in range, sized, contiguous, complete",
          "[safetensors]") {
  CheckRefusals({
      {"data_offsets not a list",
       SafetensorsBytes(
           "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":0}}",
           F32Bytes(1)),
       "tensor 'w': data_offsets is not a list [begin, end] (0)"},
      {"three offsets",
       SafetensorsBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
                        "\"data_offsets\":[0,4,8]}}",
                        F32Bytes(1)),
       "tensor 'w': data_offsets is not a list [begin, end]"},
      {"negative begin",
       SafetensorsBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
                        "\"data_offsets\":[-4,0]}}",
                        F32Bytes(1)),
       "tensor 'w': data_offsets begin is negative (-4)"},
      {"end not an integer",
       SafetensorsBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
                        "\"data_offsets\":[0,\"4\"]}}",
                        F32Bytes(1)),
       "tensor 'w': data_offsets end is not an integer"},
      {"begin > end",
       SafetensorsBytes(Header(Entry("w", "F32", {1}, 8, 4)), F32Bytes(2)),
       "tensor 'w': data_offsets [8, 4]: begin is after end"},
      // gomlx/go-huggingface#57: only end - begin was checked.
      {"right size, out of range",
       SafetensorsBytes(Header(Entry("w", "F32", {2}, 100, 108)), F32Bytes(2)),
       "tensor 'w': data_offsets [100, 108] run past the end of the data "
       "section (8 bytes)"},
      {"end = 2^64-1",
       SafetensorsBytes(Header(Entry("w", "U8", {8}, 0,
                                     std::numeric_limits<uint64_t>::max())),
                        F32Bytes(2)),
       "run past the end of the data section"},
      {"overlap",
       SafetensorsBytes(Header(Entry("a", "F32", {2}, 0, 8) + "," +
                               Entry("b", "F32", {2}, 4, 12)),
                        F32Bytes(3)),
       "tensor 'b': data_offsets [4, 12] overlap tensor 'a' at [0, 8]"},
      {"two tensors on the same bytes",
       SafetensorsBytes(Header(Entry("a", "F32", {2}, 0, 8) + "," +
                               Entry("b", "F32", {2}, 0, 8)),
                        F32Bytes(2)),
       "tensor 'b': data_offsets [0, 8] overlap tensor 'a' at [0, 8]"},
      {"gap between tensors",
       SafetensorsBytes(Header(Entry("a", "F32", {2}, 0, 8) + "," +
                               Entry("b", "F32", {2}, 12, 20)),
                        F32Bytes(5)),
       "tensor 'b': data_offsets [12, 20] leave a gap of 4 bytes after "
       "tensor 'a' at [0, 8]"},
      {"gap at the start",
       SafetensorsBytes(Header(Entry("a", "F32", {2}, 4, 12)), F32Bytes(3)),
       "tensor 'a': data_offsets [4, 12] leave a gap of 4 bytes at the start "
       "of the data section"},
      {"trailing bytes",
       SafetensorsBytes(Header(Entry("a", "F32", {2}, 0, 8)), F32Bytes(3)),
       "data section is 12 bytes but the tensors end at 8: 4 trailing bytes"},
      {"no tensors, some data", SafetensorsBytes("{}", F32Bytes(1)),
       "data section is 4 bytes but the tensors end at 0: 4 trailing bytes"},
  });
}

TEST_CASE("safetensors: size must equal shape x dtype, message names all",
          "[safetensors]") {
  TempDir dir;
  const std::string path = dir.Write(
      "model.safetensors",
      SafetensorsBytes(Header(Entry("model.norm.weight", "BF16", {4}, 0, 12)),
                       std::string(12, '\x01')));
  const auto file = SafetensorsFile::Open(path);
  REQUIRE(absl::IsInvalidArgument(file.status()));
  CHECK(std::string(file.status().message()) ==
        path +
            ": tensor 'model.norm.weight': data_offsets [0, 12] hold 12 bytes "
            "but shape [4] x BF16 needs 8");
}

TEST_CASE("safetensors: __metadata__ is string -> string", "[safetensors]") {
  CheckRefusals({
      {"metadata a list", SafetensorsBytes("{\"__metadata__\":[]}", ""),
       "__metadata__ is not an object of string -> string"},
      {"metadata a string", SafetensorsBytes("{\"__metadata__\":\"pt\"}", ""),
       "__metadata__ is not an object of string -> string"},
      {"metadata value a number",
       SafetensorsBytes("{\"__metadata__\":{\"n\":1}}", ""),
       "__metadata__ entry 'n' is not a string"},
      {"metadata value an object",
       SafetensorsBytes("{\"__metadata__\":{\"o\":{\"a\":\"b\"}}}", ""),
       "__metadata__ entry 'o' is not a string"},
  });
}

TEST_CASE("safetensors: files that are not there or not files",
          "[safetensors]") {
  TempDir dir;
  const auto missing = SafetensorsFile::Open(dir.Path("nope.safetensors"));
  CHECK(absl::IsNotFound(missing.status()));
  CHECK_THAT(std::string(missing.status().message()),
             Contains("nope.safetensors"));
  const auto directory = SafetensorsFile::Open(dir.path());
  CHECK(absl::IsInvalidArgument(directory.status()));
  CHECK_THAT(std::string(directory.status().message()),
             Contains("not a regular file"));
}

TEST_CASE("safetensors: a valid control file loads with its exact bytes",
          "[safetensors]") {
  TempDir dir;
  // Header order differs from data order on purpose: tensors() follows the
  // data. Scalar, empty and unpadded cases ride along.
  std::string data = F32Bytes(6, 1.0f);        // a: F32 [2, 3]
  data += std::string("\x80\x3f\x00\x40", 4);  // b: BF16 [2] = 1, 2
  const int64_t seven = 7;
  data.append(reinterpret_cast<const char*>(&seven), 8);  // c: I64 []
  const std::string header = Header(
      "\"__metadata__\":{\"format\":\"pt\",\"note\":\"caf\xC3\xA9\"}," +
      Entry("c", "I64", {}, 28, 36) + "," + Entry("a", "F32", {2, 3}, 0, 24) +
      "," + Entry("e", "U8", {0, 5}, 24, 24) + "," +
      Entry("b", "BF16", {2}, 24, 28));
  for (const bool pad : {true, false}) {
    INFO("padded header: " << pad);
    const std::string bytes = SafetensorsBytes(header, data, pad);
    const std::string path = dir.Write(
        absl::StrCat("control", pad ? "_padded" : "", ".safetensors"), bytes);
    auto opened = SafetensorsFile::Open(path);
    REQUIRE(opened.ok());
    const SafetensorsFile& file = **opened;
    CHECK(file.file_size() == bytes.size());
    CHECK(file.data_bytes() == data.size());
    CHECK(file.header() ==
          std::string_view(bytes).substr(8, bytes.size() - 8 - data.size()));
    CHECK(file.metadata() == std::map<std::string, std::string>{
                                 {"format", "pt"}, {"note", "caf\xC3\xA9"}});
    REQUIRE(file.tensors().size() == 4);
    std::vector<std::string> order;
    for (const TensorView& t : file.tensors()) {
      order.push_back(t.name);
    }
    CHECK(order == std::vector<std::string>{"a", "e", "b", "c"});

    const TensorView* a = file.Find("a");
    REQUIRE(a != nullptr);
    CHECK(a->dtype == DType::kF32);
    CHECK(a->shape == std::vector<int64_t>{2, 3});
    REQUIRE(a->nbytes == 24);
    CHECK(std::memcmp(a->data, data.data(), 24) == 0);
    float a5 = 0;
    std::memcpy(&a5, a->data + 20, 4);  // unaligned when unpadded: memcpy
    CHECK(a5 == 6.0f);

    const TensorView* b = file.Find("b");
    REQUIRE(b != nullptr);
    CHECK(b->dtype == DType::kBF16);
    CHECK(b->nbytes == 4);
    CHECK(std::memcmp(b->data, data.data() + 24, 4) == 0);

    const TensorView* c = file.Find("c");
    REQUIRE(c != nullptr);
    CHECK(c->shape.empty());
    int64_t c_value = 0;
    std::memcpy(&c_value, c->data, 8);
    CHECK(c_value == 7);

    const TensorView* e = file.Find("e");
    REQUIRE(e != nullptr);
    CHECK(e->shape == std::vector<int64_t>{0, 5});
    CHECK(e->nbytes == 0);

    CHECK(file.Find("d") == nullptr);
    CHECK(file.Find("") == nullptr);
  }
}

TEST_CASE("safetensors: edge cases the reference accepts", "[safetensors]") {
  TempDir dir;
  auto open = [&](const std::string& name, const std::string& bytes) {
    return SafetensorsFile::Open(dir.Write(name, bytes));
  };
  // Metadata only, no tensors, no data.
  auto metadata_only =
      open("m.safetensors", SafetensorsBytes("{\"__metadata__\":{}}", ""));
  REQUIRE(metadata_only.ok());
  CHECK((*metadata_only)->tensors().empty());
  // null metadata reads as none.
  auto null_metadata =
      open("n.safetensors", SafetensorsBytes("{\"__metadata__\":null}", ""));
  REQUIRE(null_metadata.ok());
  CHECK((*null_metadata)->metadata().empty());
  // A zero dimension first makes an empty tensor even with huge others: the
  // reference's left-to-right product never overflows here.
  auto zero_first =
      open("z.safetensors",
           SafetensorsBytes(
               Header(Entry("w", "F32",
                            {0, uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0)),
               ""));
  REQUIRE(zero_first.ok());
  CHECK((*zero_first)->Find("w")->nbytes == 0);
  // Every dtype of the closed set, one element each.
  std::string entries;
  std::string data;
  for (const char* name :
       {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16",
        "I32", "U32", "F32", "F64", "I64", "U64"}) {
    const auto dtype = DTypeFromName(name);
    REQUIRE(dtype.has_value());
    CHECK(DTypeName(*dtype) == name);
    const size_t size = DTypeSize(*dtype);
    absl::StrAppend(&entries, entries.empty() ? "" : ",",
                    Entry(name, name, {1}, data.size(), data.size() + size));
    data.append(size, '\x01');
  }
  auto all = open("all.safetensors", SafetensorsBytes(Header(entries), data));
  REQUIRE(all.ok());
  CHECK((*all)->tensors().size() == 15);
  CHECK((*all)->Find("BF16")->dtype == DType::kBF16);
  CHECK(DTypeSize(DType::kF64) == 8);
  CHECK_FALSE(DTypeFromName("F4").has_value());
}

TEST_CASE("safetensors: a 10 MB __metadata__ under the cap is allowed",
          "[safetensors]") {
  TempDir dir;
  const std::string big(10'000'000, 'x');
  const std::string path =
      dir.Write("big.safetensors",
                SafetensorsBytes(Header("\"__metadata__\":{\"blob\":\"" + big +
                                        "\"}," + Entry("w", "F32", {2}, 0, 8)),
                                 F32Bytes(2)));
  auto file = SafetensorsFile::Open(path);
  REQUIRE(file.ok());
  CHECK((*file)->metadata().at("blob").size() == big.size());
  CHECK((*file)->Find("w")->nbytes == 8);
}

int64_t ResidentKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::stoll(line.substr(6));
    }
  }
  return -1;
}

TEST_CASE("safetensors: a 1 GiB tensor is mapped, not read", "[safetensors]") {
  TempDir dir;
  constexpr uint64_t kBytes = uint64_t{1} << 30;
  const std::string path = dir.Path("huge.safetensors");
  {
    // Sparse: the header, then a hole up to the end.
    std::ofstream out(path, std::ios::binary);
    out << SafetensorsBytes(Header(Entry("w", "U8", {kBytes}, 0, kBytes)), "");
  }
  std::filesystem::resize_file(path, std::filesystem::file_size(path) + kBytes);
  const int64_t before = ResidentKiB();
  REQUIRE(before > 0);
  auto file = SafetensorsFile::Open(path);
  REQUIRE(file.ok());
  const int64_t growth_kib = ResidentKiB() - before;
  INFO("resident growth " << growth_kib << " KiB");
  CHECK(growth_kib < 16 * 1024);
  CHECK((*file)->Find("w")->nbytes == kBytes);
  CHECK((*file)->data_bytes() == kBytes);
}

}  // namespace
}  // namespace mesa_anyjev::model
