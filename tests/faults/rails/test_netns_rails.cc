// Fault tier: the simulated fabric itself — topology, isolation of rails, and that fail / blackhole /
// slow / heal really change connectivity and rate (real TCP traffic between namespaces).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "netns_fixture.h"
#include "netns_traffic.h"

namespace {

using rr::testing::IperfRate;
using rr::testing::NetnsFixture;
using rr::testing::TcpTransfer;

constexpr size_t kBytes = 4 << 20;
constexpr int kOkTimeoutMs = 5000;    // generous: a working rail finishes in milliseconds
constexpr int kDeadTimeoutMs = 1500;  // how long a probe of a dead rail waits before calling it dead

class NetnsRails : public NetnsFixture {};

TEST_F(NetnsRails, EveryRailCarriesVerifiedDataBothWays) {
  for (int r = 0; r < topo().rails(); ++r) {
    EXPECT_EQ(TcpTransfer(topo(), 0, 1, r, kBytes, kOkTimeoutMs), "") << "rail " << r;
    EXPECT_EQ(TcpTransfer(topo(), 1, 0, r, kBytes, kOkTimeoutMs), "") << "rail " << r;
    EXPECT_EQ(topo().State(0, r), "up");
  }
}

TEST_F(NetnsRails, RailOnlyReachesTheSameRail) {
  // Pinned to rail0, host 0 cannot reach host 1's rail-1 address: separate switch, separate subnet.
  std::string err = TcpTransfer(topo(), 0, 1, 1, 1024, kDeadTimeoutMs, "rail0");
  EXPECT_NE(err, "");
  // Host 0 has exactly the rail interfaces (and lo), each with its own /24.
  auto links = topo().Exec(0, "ip -o -4 addr show");
  EXPECT_NE(links.out.find("rail0"), std::string::npos);
  EXPECT_NE(links.out.find("rail1"), std::string::npos);
  auto names = topo().Exec(0, "ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | sort | paste -sd,");
  EXPECT_EQ(names.out, "lo,rail0,rail1\n");
}

TEST_F(NetnsRails, FailCutsOnlyThatRailAndHealRestoresIt) {
  for (const char* mode : {"carrier", "admin"}) {
    SCOPED_TRACE(mode);
    ASSERT_TRUE(topo().Fail(1, 0, mode));
    EXPECT_EQ(topo().State(1, 0), std::string("down-") + mode);
    EXPECT_NE(TcpTransfer(topo(), 0, 1, 0, kBytes, kDeadTimeoutMs), "");
    EXPECT_EQ(TcpTransfer(topo(), 0, 1, 1, kBytes, kOkTimeoutMs), "");  // the other rail still works
    ASSERT_TRUE(topo().Heal(1, 0));
    EXPECT_EQ(topo().State(1, 0), "up");
    EXPECT_EQ(TcpTransfer(topo(), 0, 1, 0, kBytes, kOkTimeoutMs), "");
  }
}

TEST_F(NetnsRails, BlackholeDropsTrafficWhileTheLinkStaysUp) {
  ASSERT_TRUE(topo().Blackhole(1, 0));
  ASSERT_TRUE(topo().Blackhole(1, 0));  // idempotent: one set of rules
  EXPECT_EQ(topo().State(1, 0), "up+blackhole");
  EXPECT_NE(TcpTransfer(topo(), 0, 1, 0, kBytes, kDeadTimeoutMs), "");
  EXPECT_NE(TcpTransfer(topo(), 1, 0, 0, kBytes, kDeadTimeoutMs), "");
  EXPECT_EQ(TcpTransfer(topo(), 0, 1, 1, kBytes, kOkTimeoutMs), "");
  ASSERT_TRUE(topo().Heal(1, 0));
  EXPECT_EQ(topo().State(1, 0), "up");
  EXPECT_EQ(TcpTransfer(topo(), 0, 1, 0, kBytes, kOkTimeoutMs), "");
}

TEST_F(NetnsRails, SlowLimitsTheRateBothWaysAndHealLiftsIt) {
  if (rr::testing::RunCmd("command -v iperf3").rc != 0) GTEST_SKIP() << "iperf3 not installed";
  const double limit = 40e6;  // 40mbit: far below what veth does on two busy cores
  ASSERT_TRUE(topo().Slow(1, 0, "40mbit"));
  EXPECT_EQ(topo().State(1, 0).rfind("up+slow:", 0), 0u) << topo().State(1, 0);
  std::string err;
  double into = IperfRate(topo(), 0, 1, 0, 2, &err);
  ASSERT_GT(into, 0) << err;
  double out = IperfRate(topo(), 1, 0, 0, 2, &err);
  ASSERT_GT(out, 0) << err;
  ASSERT_TRUE(topo().Heal(1, 0));
  double healed = IperfRate(topo(), 0, 1, 0, 1, &err);
  ASSERT_GT(healed, 0) << err;
  printf("[ figures ] tbf 40mbit: into host %.1f Mbit/s, out of host %.1f Mbit/s; healed %.1f Mbit/s\n",
         into / 1e6, out / 1e6, healed / 1e6);
  EXPECT_LT(into, 1.25 * limit);
  EXPECT_LT(out, 1.25 * limit);
  EXPECT_GT(into, 0.3 * limit);  // limited, not broken
  EXPECT_GT(healed, 3 * limit);
}

TEST_F(NetnsRails, ScriptIsIdempotentValidatesAndReportsJson) {
  auto again = topo().Script("up 2 2");
  EXPECT_EQ(again.rc, 0);
  EXPECT_NE(again.out.find("already up"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("ifnames: rail0,rail1"), std::string::npos) << again.out;

  struct Bad {
    const char* args;
    const char* says;
  } bad[] = {{"up 0 2", "H='0'"},        {"up 2 99", "K='99'"},          {"fail 7 0", "host 7 does not exist"},
             {"fail 0 5", "no rail 5"},  {"slow 0 0 fast", "RATE 'fast'"}, {"fail 0 0 sideways", "carrier or admin"},
             {"frobnicate", "unknown command"}, {"heal x 0", "not a number"}};
  for (const auto& b : bad) {
    auto r = topo().Script(b.args);
    EXPECT_EQ(r.rc, 2) << b.args;
    EXPECT_NE(r.out.find(b.says), std::string::npos) << b.args << ": " << r.out;
  }
  auto badprefix = rr::testing::RunCmd("RERAIL_NETNS_PREFIX='x;y' bash " RERAIL_NETNS_SCRIPT " status");
  EXPECT_EQ(badprefix.rc, 2);

  ASSERT_TRUE(topo().Slow(0, 1, "100mbit"));
  auto js = topo().Script("status --json");
  ASSERT_EQ(js.rc, 0);
  auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j.at("hosts"), 2);
  EXPECT_EQ(j.at("rails_per_host"), 2);
  ASSERT_EQ(j.at("rails").size(), 4u);
  for (const auto& r : j.at("rails")) {
    EXPECT_EQ(r.at("ifname"), "rail" + std::to_string(r.at("rail").get<int>()));
    EXPECT_EQ(r.at("addr"), topo().Addr(r.at("host"), r.at("rail")));
  }
  EXPECT_EQ(j.at("rails")[1].at("state"), "up+slow:100Mbit");

  // A second, independent prefix coexists, and `down` only removes its own namespaces.
  rr::testing::NetnsTopology other(topo().prefix() + "b");
  ASSERT_EQ(other.Up(2, 1).rc, 0);
  other.Down();
  EXPECT_EQ(topo().State(0, 0), "up");
  EXPECT_EQ(other.Script("status").out.find("up=0") != std::string::npos, true);
}

TEST_F(NetnsRails, UpRebuildsAPartialTopologyLeftByACrash) {
  ASSERT_EQ(rr::testing::RunCmd("ip netns del " + topo().Netns(1)).rc, 0);  // as if killed mid-way
  auto up = topo().Script("up 2 2");
  ASSERT_EQ(up.rc, 0) << up.out;
  EXPECT_EQ(up.out.find("already up"), std::string::npos) << up.out;
  for (int r = 0; r < 2; ++r) EXPECT_EQ(TcpTransfer(topo(), 0, 1, r, kBytes, kOkTimeoutMs), "") << "rail " << r;
  // A different shape replaces the old one entirely.
  ASSERT_EQ(topo().Script("up 3 1").rc, 0);
  auto st = topo().Script("status");
  EXPECT_NE(st.out.find("hosts=3 rails=1"), std::string::npos) << st.out;
  EXPECT_EQ(st.out.find("rail=1"), std::string::npos) << st.out;
}

TEST_F(NetnsRails, DownIsCompleteAndSafeToRepeat) {
  std::string p = topo().prefix();
  topo().Down();
  EXPECT_EQ(rr::testing::RunCmd("ip netns list | grep -c '^" + p + "-'").out, "0\n");
  EXPECT_EQ(topo().Script("down").rc, 0);
  EXPECT_EQ(topo().Script("down").rc, 0);
}

}  // namespace
