// JSON from outside: the strict parser, then what walks a parsed value (the
// bounded state rendering, the canonical dump behind hashes, nlohmann's
// own dump). None may crash, recurse without bound or read out of range.
#include "common/text/strict_json.h"

#include <string>

#include "common/decision/py_json.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesa_anyjev;
  const std::string_view text = fuzz::AsText(data, size);
  const text::JsonLimits limits{.max_bytes = 1 << 20,
                                .max_bytes_name = "limits.max_text_bytes"};
  auto ordered = text::ParseStrictOrderedJson(text, limits);
  if (ordered.ok()) {
    (void)decision::PyJsonDumpsIndent2(*ordered, 1 << 20);
    (void)decision::PyJsonCanonical(*ordered);
  }
  auto plain = text::ParseStrictJson(text, limits);
  if (plain.ok()) {
    (void)plain->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return 0;
}
