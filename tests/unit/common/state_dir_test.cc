#include "common/util/state_dir.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

namespace mesa_anyjev::util {
namespace {

GetEnv From(const std::map<std::string, std::string>& env) {
  return [env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

TEST_CASE("The default state directory: systemd, then XDG, then HOME",
          "[util]") {
  CHECK(DefaultStateDir(From({{"STATE_DIRECTORY", "/var/lib/m:/var/lib/x"},
                              {"XDG_STATE_HOME", "/x"},
                              {"HOME", "/h"}})) == "/var/lib/m");
  CHECK(DefaultStateDir(From({{"XDG_STATE_HOME", "/x"}, {"HOME", "/h"}})) ==
        "/x/mesa-anyjev");
  CHECK(DefaultStateDir(From({{"HOME", "/h"}})) ==
        "/h/.local/state/mesa-anyjev");
  CHECK(DefaultStateDir(From({})).empty());
}

TEST_CASE("decisions.bundles_dir: auto, off or a path", "[util]") {
  const GetEnv env = From({{"HOME", "/h"}});
  CHECK(ResolveBundlesDir("auto", env) ==
        "/h/.local/state/mesa-anyjev/bundles");
  CHECK(ResolveBundlesDir("off", env).empty());
  CHECK(ResolveBundlesDir("", env).empty());
  CHECK(ResolveBundlesDir("/srv/bundles", env) == "/srv/bundles");
  CHECK(ResolveBundlesDir("auto", From({})).empty());  // nowhere to put it
}

}  // namespace
}  // namespace mesa_anyjev::util
