// A tokenizer.json: loading it, then encoding and decoding a little text
// with whatever loaded.
#include "common/text/bpe_tokenizer.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesa_anyjev;
  auto tokenizer =
      text::BpeTokenizer::FromJson(fuzz::AsText(data, size), "fuzz");
  if (!tokenizer.ok()) return 0;
  auto ids = (*tokenizer)->Encode("Hello, world! \xC3\xA9 <|im_start|>user");
  if (ids.ok()) (void)(*tokenizer)->Decode(*ids);
  return 0;
}
