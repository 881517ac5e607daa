// The conformance suite's peer process: a second, independent process that loads the plugin and
// executes the suite's commands (see tools/netbench/peer.h) on the channel at fd 3.
#include <cstdio>
#include <cstring>

#include "oob.h"
#include "peer.h"
#include "proxy_driver.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "-v") == 0) rr::netbench::LogCapture::SetEcho(true);
  rr::netbench::Oob oob(3);
  return rr::netbench::RunPeer(oob);
}
