// Test helpers for the safetensors reader: a temporary directory and a tiny
// writer of the format (8-byte little-endian header length, JSON header
// padded with spaces to a multiple of 8 as the reference writer does, raw
// data). Malformed files are built from the same pieces by hand.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/unit/temp_dir.h"

namespace mesa_anyjev::model::testing {

using ::mesa_anyjev::testing::TempDir;

inline std::string U64Le(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  }
  return bytes;
}

// A file with `header` as its JSON (padded with spaces to a multiple of 8
// unless `pad` is false) followed by `data`.
inline std::string SafetensorsBytes(std::string header, std::string_view data,
                                    bool pad = true) {
  while (pad && header.size() % 8 != 0) {
    header.push_back(' ');
  }
  return absl::StrCat(U64Le(header.size()), header, std::string(data));
}

// One header entry: "name":{"dtype":..,"shape":[..],"data_offsets":[b,e]}.
inline std::string Entry(const std::string& name, const std::string& dtype,
                         const std::vector<uint64_t>& shape, uint64_t begin,
                         uint64_t end) {
  return absl::StrCat("\"", name, "\":{\"dtype\":\"", dtype, "\",\"shape\":[",
                      absl::StrJoin(shape, ","), "],\"data_offsets\":[", begin,
                      ",", end, "]}");
}

struct TestTensor {
  std::string name;
  std::string dtype;  // only 1/2/4/8-byte names the writer knows
  std::vector<uint64_t> shape;
  std::string bytes;  // exactly numel x element size
};

// A well-formed file holding `tensors` in the given order.
inline std::string WriteTensors(const std::vector<TestTensor>& tensors,
                                const std::string& metadata_json = "") {
  std::vector<std::string> entries;
  std::string data;
  if (!metadata_json.empty()) {
    entries.push_back(absl::StrCat("\"__metadata__\":", metadata_json));
  }
  for (const TestTensor& t : tensors) {
    entries.push_back(Entry(t.name, t.dtype, t.shape, data.size(),
                            data.size() + t.bytes.size()));
    data += t.bytes;
  }
  return SafetensorsBytes(absl::StrCat("{", absl::StrJoin(entries, ","), "}"),
                          data);
}

// `n` float32 values start, start+1, ... as little-endian bytes.
inline std::string F32Bytes(int n, float start = 0.0f) {
  std::string bytes(static_cast<size_t>(n) * 4, '\0');
  for (int i = 0; i < n; ++i) {
    const float v = start + static_cast<float>(i);
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  }
  return bytes;
}

}  // namespace mesa_anyjev::model::testing
