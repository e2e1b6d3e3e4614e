#include "common/util/suggest.h"

#include <catch2/catch.hpp>

namespace mesa_anyjev::util {
namespace {

TEST_CASE("EditDistance counts edits and adjacent transpositions", "[util]") {
  CHECK(EditDistance("decide", "decide") == 0);
  CHECK(EditDistance("decid", "decide") == 1);
  CHECK(EditDistance("dceide", "decide") == 1);  // one transposition
  CHECK(EditDistance("DECIDE", "decide") == 0);  // case-insensitive
  CHECK(EditDistance("", "fit") == 3);
  CHECK(EditDistance("kitten", "sitting") == 3);
}

TEST_CASE("ClosestName suggests a near name, a unique prefix, or nothing",
          "[util]") {
  const std::vector<std::string> verbs = {"doctor", "decide", "annotate",
                                          "learn",  "bench",  "bundles"};
  CHECK(ClosestName("decid", verbs) == "decide");
  CHECK(ClosestName("anotate", verbs) == "annotate");
  CHECK(ClosestName("bund", verbs) == "bundles");    // a unique prefix
  CHECK_FALSE(ClosestName("b", verbs).has_value());  // two prefixes, far
  CHECK_FALSE(ClosestName("zzzzzz", verbs).has_value());
  CHECK_FALSE(ClosestName("", verbs).has_value());
  CHECK(DidYouMean("--questoin", {"--question", "--questions-file"}) ==
        " (did you mean '--question'?)");
  CHECK(DidYouMean("--nothing-like-it", {"--question"}).empty());
}

}  // namespace
}  // namespace mesa_anyjev::util
