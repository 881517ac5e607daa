// Conformance suite helpers (test side): a connected pair of endpoints — the plugin loaded in this
// process and again in a peer process — plus the bounds every test runs under.
//
// Each gtest case runs in its own process (gtest_discover_tests), so plugin state never leaks between
// cases. main() (conformance_main.cc) pins the environment both processes use to loopback only
// (RERAIL_TCP_IFNAME=lo); failure cases add short give-up/connect bounds (UseShortFailureBounds).
//
// Contract
//   * Pair::Open spawns the peer and opens both endpoints; the destructor kills and reaps the peer.
//   * Wire(n_out, n_in) connects n_out comms from here to the peer and n_in from the peer to here
//     (comm indices = creation order on both sides, so plan comm i is the same connection on both).
//   * Run(plan) runs `plan` here and plan.Mirror() in the peer at the same time; returns the first
//     error of either side (the peer's error text is prefixed "peer:").
//   * Watchdog: an alarm that ends the process with a message if a case runs past its bound.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "peer.h"
#include "plan.h"
#include "proxy_driver.h"

namespace conf {

namespace nb = rr::netbench;

const std::string& PluginPath();
const std::string& PeerExe();
bool EchoPluginLog();  // --echo-plugin-log: both processes print the plugin's log lines
// --time-scale N (default 1): every time bound of the harness (the per-case watchdog, plan timeouts,
// waits on the peer) is N times longer, for slow hosts such as a QEMU TCG guest (ib_rxe_conformance).
// The plugin's own bounds are its RERAIL_* settings, never scaled here.
unsigned TimeScale();
inline uint64_t ScaledMs(uint64_t ms) { return ms * TimeScale(); }

// Failure cases run with short plugin bounds (RERAIL_GIVEUP_MS, RERAIL_CONNECT_TIMEOUT_MS) so they end
// quickly; data-path cases keep the plugin's defaults, as a job would.
constexpr uint64_t kGiveupMs = 2000;
constexpr uint64_t kConnectTimeoutMs = 3000;
// Upper bound for "an error must come": the plugin's own bound plus scheduling slack on a loaded host.
constexpr uint64_t kErrorBoundMs = kGiveupMs + kConnectTimeoutMs + 10000;

// Sets the short bounds in the environment; call before the plugin is loaded (Pair::Open) — each
// case is its own process under ctest, so the setting covers this case and its peer only.
void UseShortFailureBounds();

// Ends the process (with a message naming the case) when a case runs past `seconds` x TimeScale().
void ArmWatchdog(unsigned seconds);

class Pair {
 public:
  rr::Status Open(const std::vector<std::string>& peer_env = {});
  rr::Status Wire(int n_out, int n_in);
  rr::Status Run(const nb::Plan& plan, nb::PlanResult* result = nullptr);
  // Closes every comm on both sides.
  rr::Status CloseAll();

  nb::Endpoint& ep() { return *ep_; }
  nb::PeerClient& peer() { return peer_; }
  std::vector<void*>& send_comms() { return send_; }
  std::vector<void*>& recv_comms() { return recv_; }

 private:
  std::unique_ptr<nb::Endpoint> ep_;
  nb::PeerClient peer_;
  std::vector<void*> send_, recv_;
};

// Local TCP ports in LISTEN state owned by sockets among this process's descriptors.
struct ListenPort {
  int port;
  bool v6;
};
std::vector<ListenPort> ListeningPorts();
// Socket inodes currently open in this process.
std::vector<unsigned long> SocketInodes();

}  // namespace conf

// ASSERT_OK(status_expr) << "more context";
#define ASSERT_OK(expr)                                \
  switch (0)                                           \
  case 0:                                              \
  default:                                             \
    if (::rr::Status conf_s_ = (expr); conf_s_.ok()) { \
    } else                                             \
      FAIL() << #expr << " -> " << conf_s_.ToString() << " "
