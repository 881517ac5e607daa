// Conformance suite entry point: pins the environment both processes use, then runs gtest.
//   conformance_test [--plugin PATH] [--echo-plugin-log] [--time-scale N] [gtest flags]
// The default plugin is the one built in this tree. The peer is the conformance_peer binary beside
// this one.
#include <gtest/gtest.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "conformance_util.h"

namespace conf {
namespace {
std::string g_plugin = RERAIL_NET_PLUGIN_PATH;
std::string g_peer;
bool g_echo = false;
unsigned g_time_scale = 1;
}  // namespace
bool EchoPluginLog() {
  return g_echo;
}
unsigned TimeScale() {
  return g_time_scale;
}
const std::string& PluginPath() {
  return g_plugin;
}
const std::string& PeerExe() {
  return g_peer;
}
}  // namespace conf

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--plugin") == 0 && i + 1 < argc) conf::g_plugin = argv[i + 1];
    if (std::strcmp(argv[i], "--echo-plugin-log") == 0) conf::g_echo = true;
    if (std::strcmp(argv[i], "--time-scale") == 0 && i + 1 < argc) {
      conf::g_time_scale = static_cast<unsigned>(std::max(1L, std::strtol(argv[i + 1], nullptr, 10)));
    }
  }
  char self[PATH_MAX] = {0};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) > 0) {
    std::string dir(self);
    conf::g_peer = dir.substr(0, dir.rfind('/')) + "/conformance_peer";
  }
  // Loopback only; the peer inherits it.
  setenv("RERAIL_TCP_IFNAME", "lo", 1);
  rr::netbench::LogCapture::SetEcho(conf::g_echo);
  return RUN_ALL_TESTS();
}
