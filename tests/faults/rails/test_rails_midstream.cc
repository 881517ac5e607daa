// Fault tier: what faults do to traffic already in flight, flapping and random schedules, and the
// whole rails chain (link monitor -> rail-health machine -> board -> rerail-top) on a real fault.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "netns_faults.h"
#include "netns_fixture.h"
#include "netns_traffic.h"
#include "rerail/clock.h"
#include "rerail/log.h"
#include "rerail/rails/board.h"
#include "rerail/rails/link_monitor.h"
#include "rerail/rails/rail_health.h"

namespace {

// Expected WARN lines are captured and asserted, not printed.
void NoopLogger(int, unsigned long, const char*, int, const char*, ...) {}

using rr::testing::FaultInjector;
using rr::testing::TcpStream;

constexpr int kBoundMs = 10000;  // generous bound for "it happens eventually" (TCP back-off included)

class RailsMidstream : public rr::testing::NetnsFixture {
 protected:
  // Waits until `pred` holds, polling; false after kBoundMs.
  template <class P>
  static bool Eventually(P pred) {
    for (uint64_t end = rr::NowMs() + kBoundMs; rr::NowMs() < end; usleep(20000))
      if (pred()) return true;
    return pred();
  }
  // True when the stream made no progress for `ms` (the rail carries nothing).
  static bool Frozen(const TcpStream& s, int ms) {
    uint64_t a = s.received();
    usleep(ms * 1000);
    return s.received() == a;
  }
};

TEST_F(RailsMidstream, FaultsStallAStreamInFlightAndHealResumesItIntact) {
  for (const char* fault : {"fail", "blackhole"}) {
    SCOPED_TRACE(fault);
    TcpStream s(topo(), 0, 1, 0);
    ASSERT_EQ(s.Start(5000), "");
    ASSERT_TRUE(Eventually([&] { return s.received() > (1u << 20); })) << "stream never started";
    ASSERT_TRUE(std::string(fault) == "fail" ? topo().Fail(1, 0) : topo().Blackhole(1, 0));
    usleep(300 * 1000);  // in-flight bytes drain; afterwards nothing can cross the rail
    EXPECT_TRUE(Frozen(s, 500)) << "data crossed a " << fault << " rail";
    uint64_t stalled_at = s.received();
    ASSERT_TRUE(topo().Heal(1, 0));
    EXPECT_TRUE(Eventually([&] { return s.received() > stalled_at + (1u << 20); })) << "no resume after heal";
    EXPECT_EQ(s.Stop(), "");  // every byte verified, no reset
  }
}

TEST_F(RailsMidstream, SlowRailKeepsTheStreamMovingAtTheLimitedRate) {
  TcpStream s(topo(), 0, 1, 1);
  ASSERT_EQ(s.Start(5000), "");
  ASSERT_TRUE(topo().Slow(1, 1, "20mbit"));
  usleep(500 * 1000);  // the queue built before the limit drains
  uint64_t a = s.received(), t0 = rr::NowNs();
  usleep(1000 * 1000);
  double rate = double(s.received() - a) * 8e9 / double(rr::NowNs() - t0);
  printf("[ figures ] stream on a 20mbit rail: %.1f Mbit/s\n", rate / 1e6);
  EXPECT_GT(rate, 0.0);          // slow is not dead
  EXPECT_LT(rate, 1.5 * 20e6);   // and it is really limited
  EXPECT_EQ(s.Stop(), "");
}

TEST_F(RailsMidstream, FlappingRailIsSeenByTheMonitorAndEndsHealed) {
  std::atomic<int> downs{0}, ups{0};
  std::unique_ptr<rr::rails::LinkMonitor> mon;
  ASSERT_TRUE(rr::rails::LinkMonitor::Start({{"rail0"}, topo().NetnsPath(1)},
                                            [&](const rr::rails::LinkEvent& e) { (e.up ? ups : downs)++; }, &mon)
                  .ok());
  TcpStream other(topo(), 0, 1, 1);  // the other rail keeps working throughout
  ASSERT_EQ(other.Start(5000), "");
  FaultInjector inj(topo());
  inj.StartFlap(1, 0, 200, 10);  // every 200 ms for 2 s
  inj.Wait();
  auto log = inj.log();
  int fails = 0;
  for (const auto& a : log) {
    EXPECT_TRUE(a.ok) << a.what;
    fails += a.what.rfind("fail", 0) == 0;
  }
  EXPECT_EQ(fails, 10);
  EXPECT_EQ(log.back().what, "heal");
  EXPECT_TRUE(Eventually([&] { return downs.load() == fails && ups.load() == fails; }))
      << "downs " << downs << " ups " << ups << " fails " << fails;
  EXPECT_EQ(topo().State(1, 0), "up");
  EXPECT_GT(other.received(), 0u);
  EXPECT_EQ(other.Stop(), "");
}

TEST_F(RailsMidstream, RandomScheduleFaultsOneRailAtATimeAndEndsHealed) {
  FaultInjector inj(topo());
  inj.StartRandom(/*seed=*/42, 100, 300, 2500);
  inj.Wait();
  auto log = inj.log();
  ASSERT_GE(log.size(), 6u);
  int faulty = 0;
  for (const auto& a : log) {
    EXPECT_TRUE(a.ok) << a.what;
    faulty += a.what == "heal" ? -1 : 1;
    EXPECT_LE(faulty, 1) << "two rails faulty at once";
  }
  EXPECT_EQ(faulty, 0);
  for (int h = 0; h < topo().hosts(); ++h)
    for (int r = 0; r < topo().rails(); ++r) EXPECT_EQ(topo().State(h, r), "up") << h << "/" << r;
}

// The whole chain the net plugin will run: link events drive the rail-health machine, which
// publishes to the board; rerail-top (another process) sees the failure and the recovery.
TEST_F(RailsMidstream, LinkDownReachesTheBoardAndRerailTop) {
  char tmpl[] = "/tmp/rrrails-chain-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::unique_ptr<rr::rails::BoardWriter> board;
  ASSERT_TRUE(rr::rails::BoardWriter::Create("net", &board, dir).ok());
  std::map<std::string, std::unique_ptr<rr::rails::RailHealth>> rails;
  for (int r = 0; r < topo().rails(); ++r) {
    int slot = -1;
    std::string n = topo().Ifname(r);
    ASSERT_TRUE(board->AddRail(n, &slot).ok());
    rails[n] = std::make_unique<rr::rails::RailHealth>(r, n, board.get(), slot);
  }
  std::vector<std::string> warns;
  std::mutex wmu;
  rr::log::SetLogger(&NoopLogger);
  rr::log::SetCapture([&](rr::log::Level l, const std::string& m) {
    std::lock_guard<std::mutex> g(wmu);
    if (l == rr::log::Level::kWarn) warns.push_back(m);
  });
  std::unique_ptr<rr::rails::LinkMonitor> mon;
  ASSERT_TRUE(rr::rails::LinkMonitor::Start(
                  {{"rail0", "rail1"}, topo().NetnsPath(0)},
                  [&](const rr::rails::LinkEvent& e) {
                    auto& h = rails.at(e.ifname);
                    if (!e.up) board->CountLinkDown(h->rail());
                    (void)h->OnEvent(rr::rails::ToRailEvent(e), e.carrier ? "admin down" : "carrier lost");
                  },
                  &mon)
                  .ok());
  auto top = [&] {
    FILE* p = popen((std::string(RERAIL_TOP_BIN) + " --once --json --dir " + dir).c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
    return nlohmann::json::parse(out)["boards"][0]["rails"];
  };

  ASSERT_TRUE(topo().Fail(0, 1));
  ASSERT_TRUE(Eventually([&] { return rails["rail1"]->state() == rr::rails::RailState::kFailed; }));
  auto j = top();
  EXPECT_EQ(j[1]["state"], "failed");
  EXPECT_EQ(j[1]["reason"], "link-down");
  EXPECT_EQ(j[1]["link_down_events"], 1);
  EXPECT_EQ(j[0]["state"], "healthy");

  ASSERT_TRUE(topo().Heal(0, 1));
  ASSERT_TRUE(Eventually([&] { return rails["rail1"]->state() == rr::rails::RailState::kRecovering; }));
  (void)rails["rail1"]->OnEvent(rr::rails::RailEvent::kProbeOk, "probe answered");  // the plugin's probe
  j = top();
  EXPECT_EQ(j[1]["state"], "healthy");
  EXPECT_EQ(j[1]["transitions"], 3);
  EXPECT_EQ(j[1]["failbacks"], 1);
  EXPECT_EQ(j[0]["failbacks"], 0);
  mon->Stop();
  rr::log::SetCapture(nullptr);
  rr::log::SetLogger(nullptr);
  ASSERT_EQ(warns.size(), 1u);
  EXPECT_NE(warns[0].find("rail 1 (rail1) healthy -> failed on link-down: carrier lost"), std::string::npos)
      << warns[0];
  board.reset();
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
