// Where the daemon keeps its state when the configuration names no place:
// a documented per-user (or systemd) directory, so a daemon started as the
// README starts it already has a bundle store for its promotes.
#pragma once

#include <functional>
#include <string>

namespace mesa_anyjev::util {

using GetEnv = std::function<const char*(const char*)>;

// systemd's $STATE_DIRECTORY (StateDirectory=; the first of a list), else
// $XDG_STATE_HOME/mesa-anyjev, else $HOME/.local/state/mesa-anyjev; "" when
// none of them is set.
std::string DefaultStateDir(const GetEnv& getenv);

// decisions.bundles_dir as the daemon uses it: "auto" is
// DefaultStateDir()/bundles, "off" (or "") is no store, anything else is
// the path itself.
std::string ResolveBundlesDir(const std::string& configured,
                              const GetEnv& getenv);

}  // namespace mesa_anyjev::util
