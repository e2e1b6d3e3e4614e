// A heads or export file (LoadArtifacts, decisions.artifacts, a bundle),
// loaded into a decider over the fake model; whatever loads must then
// export and serve an auto decision without crashing.
#include "common/decision/decider.h"
#include "common/fake_backend.h"
#include "common/text/strict_json.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesa_anyjev;
  static FakeBackend* fake = new FakeBackend();
  auto file = text::ParseStrictOrderedJson(fuzz::AsText(data, size), {});
  if (!file.ok()) return 0;
  decision::Decider decider(fake);
  auto loaded = decider.artifacts().Load(*file);
  if (!loaded.ok()) return 0;
  (void)decider.artifacts().Export(/*include_observations=*/true);
  // Any loaded head routes a choice or noul of its layout; ask both kinds.
  const auto choice = decision::Question::Choice(
      "What is it about?", {"genes", "proteins", "cells", "viruses"});
  const auto noul = decision::Question::Noul("Is it about cells?");
  if (choice.ok()) {
    (void)decider.Decide({"About cells"}, {*choice, noul},
                         decision::Level::kAuto);
  }
  return 0;
}
