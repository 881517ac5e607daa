// rerail — where an installed tool finds its siblings (the plugins, the user scripts).
//
// An installed tree is <prefix>/bin/<tool>, <prefix>/<libdir>/libnccl-net-rerail.so,
// <prefix>/<datadir>/rerail/scripts/... (cmake/install.cmake). A tool run from the build tree finds
// none of those beside it and falls back to the build-tree paths compiled into it.
//
// Contract
//   * Paths are resolved from /proc/self/exe (the real file, links followed), never from argv[0] or
//     the current directory. Thread-safe; no state.
//   * InstalledPlugin("net") returns <exe>/../<libdir>/libnccl-net-rerail.so when that file exists,
//     else "". InstalledScript("netns-rails.sh") likewise for <exe>/../<datadir>/rerail/scripts/.
#pragma once

#include <string>

namespace rr::netdrv {

// "net", "tuner" or "profiler" → the installed libnccl-<kind>-rerail.so beside this executable, or "".
std::string InstalledPlugin(const std::string& kind);
// A script of scripts/ installed with this executable, or "".
std::string InstalledScript(const std::string& name);
// The directory holding this executable ("" when /proc/self/exe cannot be read).
std::string ExeDir();

}  // namespace rr::netdrv
