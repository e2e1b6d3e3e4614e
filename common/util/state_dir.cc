#include "common/util/state_dir.h"

#include <string_view>

namespace mesa_anyjev::util {
namespace {

std::string Env(const GetEnv& getenv, const char* name) {
  const char* value = getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

std::string DefaultStateDir(const GetEnv& getenv) {
  const std::string systemd = Env(getenv, "STATE_DIRECTORY");
  if (!systemd.empty()) return systemd.substr(0, systemd.find(':'));
  const std::string xdg = Env(getenv, "XDG_STATE_HOME");
  if (!xdg.empty()) return xdg + "/mesa-anyjev";
  const std::string home = Env(getenv, "HOME");
  if (!home.empty()) return home + "/.local/state/mesa-anyjev";
  return "";
}

std::string ResolveBundlesDir(const std::string& configured,
                              const GetEnv& getenv) {
  if (configured.empty() || configured == "off") return "";
  if (configured != "auto") return configured;
  const std::string state = DefaultStateDir(getenv);
  return state.empty() ? "" : state + "/bundles";
}

}  // namespace mesa_anyjev::util
