#include "rerail/sysfs.h"

#include <climits>
#include <cstdlib>
#include <fstream>

namespace rr::sysfs {

std::string NetPciPath(const std::string& ifname, const std::string& root) {
  if (ifname.empty() || ifname.find('/') != std::string::npos) return "";
  std::string link = root + "/class/net/" + ifname + "/device";
  char buf[PATH_MAX];
  if (realpath(link.c_str(), buf) == nullptr) return "";
  return buf;
}

int NetSpeedMbps(const std::string& ifname, int fallback, const std::string& root) {
  if (ifname.empty() || ifname.find('/') != std::string::npos) return fallback;
  std::ifstream f(root + "/class/net/" + ifname + "/speed");
  long v = 0;
  // Reading speed of a down or virtual link fails with EINVAL; treat as unknown.
  if (!(f >> v) || v <= 0 || v > INT_MAX) return fallback;
  return static_cast<int>(v);
}

}  // namespace rr::sysfs
