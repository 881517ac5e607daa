// Conformance suite entry point: pins the environment both processes use, then runs gtest.
//   conformance_test [--plugin PATH] [gtest flags]
// The default plugin is the one built in this tree. The peer is the conformance_peer binary beside
// this one.
#include <gtest/gtest.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "conformance_util.h"

namespace conf {
namespace {
std::string g_plugin = RERAIL_NET_PLUGIN_PATH;
std::string g_peer;
}  // namespace
const std::string& PluginPath() { return g_plugin; }
const std::string& PeerExe() { return g_peer; }
}  // namespace conf

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--plugin") == 0) conf::g_plugin = argv[i + 1];
  char self[PATH_MAX] = {0};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) > 0) {
    std::string dir(self);
    conf::g_peer = dir.substr(0, dir.rfind('/')) + "/conformance_peer";
  }
  // Loopback only; failures must surface within the suite's bounds. Both processes inherit these.
  setenv("RERAIL_TCP_IFNAME", "lo", 1);
  setenv("RERAIL_GIVEUP_MS", std::to_string(conf::kGiveupMs).c_str(), 1);
  setenv("RERAIL_CONNECT_TIMEOUT_MS", std::to_string(conf::kConnectTimeoutMs).c_str(), 1);
  return RUN_ALL_TESTS();
}
