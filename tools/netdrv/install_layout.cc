#include "install_layout.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef RERAIL_REL_LIBDIR
#define RERAIL_REL_LIBDIR "../lib"
#endif
#ifndef RERAIL_REL_DATADIR
#define RERAIL_REL_DATADIR "../share"
#endif

namespace rr::netdrv {
namespace {

// The canonical path ("<prefix>/lib/x.so", not "<prefix>/bin/../lib/x.so"), or "" when it is not there.
std::string IfExists(const std::string& path) {
  char real[PATH_MAX];
  return (access(path.c_str(), R_OK) == 0 && realpath(path.c_str(), real) != nullptr) ? real : "";
}

}  // namespace

std::string ExeDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string exe(buf, static_cast<size_t>(n));
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "" : exe.substr(0, slash);
}

std::string InstalledPlugin(const std::string& kind) {
  std::string dir = ExeDir();
  if (dir.empty()) return "";
  return IfExists(dir + "/" RERAIL_REL_LIBDIR "/libnccl-" + kind + "-rerail.so");
}

std::string InstalledScript(const std::string& name) {
  std::string dir = ExeDir();
  if (dir.empty()) return "";
  return IfExists(dir + "/" RERAIL_REL_DATADIR "/rerail/scripts/" + name);
}

}  // namespace rr::netdrv
