// Any bytes through the real Qwen3 tokenizer: Encode (invalid UTF-8 is a
// status), and Decode of any ids, in range or not.
#include <cstring>
#include <vector>

#include "common/text/bpe_tokenizer.h"
#include "tests/fuzz/fuzz_input.h"

#ifndef MESA_ANYJEV_TEST_DATA
#error "MESA_ANYJEV_TEST_DATA names tests/data"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesa_anyjev;
  static const text::BpeTokenizer* tokenizer = [] {
    auto loaded = text::BpeTokenizer::FromFile(
        std::string(MESA_ANYJEV_TEST_DATA) + "/qwen3-tokenizer");
    if (!loaded.ok()) abort();
    return loaded->release();
  }();
  auto ids = tokenizer->Encode(fuzz::AsText(data, size));
  if (ids.ok()) (void)tokenizer->Decode(*ids);
  std::vector<text::TokenId> raw(size / sizeof(text::TokenId));
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * sizeof(raw[0]));
  (void)tokenizer->Decode(raw);
  return 0;
}
