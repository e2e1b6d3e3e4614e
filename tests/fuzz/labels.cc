// A labels file (JSON lines) against the reference question set.
#include "client/learn/label_ingest.h"
#include "common/questions/question_set.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesa_anyjev;
  const auto parsed = learn::ParseLabelLines(
      fuzz::AsText(data, size), questions::QuestionSet::Reference(),
      "2026-12-02T00:00:00Z");
  (void)learn::IngestSummary(parsed.rows, 0);
  return 0;
}
