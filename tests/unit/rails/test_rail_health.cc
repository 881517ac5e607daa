// Unit tests: rail-health state machine, probe back-off, publication to the board.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "rerail/log.h"
#include "rerail/rails/board.h"
#include "rerail/rails/rail_health.h"

namespace {

// Expected WARN lines are captured and asserted, not printed.
void NoopLogger(int, unsigned long, const char*, int, const char*, ...) {}

using rr::rails::NextState;
using rr::rails::RailEvent;
using rr::rails::RailHealth;
using rr::rails::RailState;
using E = RailEvent;
using S = RailState;

struct Row {
  S from;
  E ev;
  int to;  // -1: unchanged
};

// The table of rail_health.h, written out independently of the implementation's array.
const std::vector<Row> kExpected = {
    {S::kHealthy, E::kLinkDown, int(S::kFailed)},       {S::kHealthy, E::kError, int(S::kFailed)},
    {S::kHealthy, E::kStall, int(S::kSuspect)},         {S::kHealthy, E::kLinkRemoved, int(S::kPermanentlyFailed)},
    {S::kHealthy, E::kDisable, int(S::kPermanentlyFailed)}, {S::kHealthy, E::kLinkUp, -1},
    {S::kHealthy, E::kProbeOk, -1},                     {S::kHealthy, E::kProgress, -1},
    {S::kSuspect, E::kProgress, int(S::kHealthy)},      {S::kSuspect, E::kProbeOk, int(S::kHealthy)},
    {S::kSuspect, E::kProbeFail, int(S::kFailed)},      {S::kSuspect, E::kLinkDown, int(S::kFailed)},
    {S::kSuspect, E::kError, int(S::kFailed)},          {S::kSuspect, E::kStall, -1},
    {S::kFailed, E::kLinkUp, int(S::kRecovering)},      {S::kFailed, E::kProbeStart, int(S::kRecovering)},
    {S::kFailed, E::kProbeOk, int(S::kHealthy)},        {S::kFailed, E::kLinkDown, -1},
    {S::kFailed, E::kError, -1},                        {S::kFailed, E::kProgress, -1},
    {S::kFailed, E::kLinkRemoved, int(S::kPermanentlyFailed)},
    {S::kRecovering, E::kProbeOk, int(S::kHealthy)},    {S::kRecovering, E::kProbeFail, int(S::kFailed)},
    {S::kRecovering, E::kLinkDown, int(S::kFailed)},    {S::kRecovering, E::kError, int(S::kFailed)},
    {S::kRecovering, E::kLinkUp, -1},                   {S::kRecovering, E::kStall, -1},
};

TEST(RailHealthTable, MatchesDocumentedTable) {
  for (const Row& r : kExpected) {
    auto got = NextState(r.from, r.ev);
    SCOPED_TRACE(std::string(rr::rails::StateName(r.from)) + " + " + rr::rails::EventName(r.ev));
    if (r.to < 0) {
      EXPECT_FALSE(got.has_value());
    } else {
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(int(*got), r.to);
    }
  }
}

TEST(RailHealthTable, PermanentlyFailedIsTerminalAndNoneIsInert) {
  for (uint32_t e = 0; e < rr::rails::kRailEventCount; ++e)
    EXPECT_FALSE(NextState(S::kPermanentlyFailed, RailEvent(e)).has_value()) << rr::rails::EventName(RailEvent(e));
  for (uint32_t s = 0; s < rr::rails::kRailStateCount; ++s)
    EXPECT_FALSE(NextState(RailState(s), E::kNone).has_value());
}

TEST(RailHealthTable, OutOfRangeValuesAreRejectedNotRead) {
  EXPECT_FALSE(NextState(RailState(77), E::kLinkDown).has_value());
  EXPECT_FALSE(NextState(S::kHealthy, RailEvent(99)).has_value());
  EXPECT_STREQ(rr::rails::StateName(RailState(77)), "?");
  EXPECT_STREQ(rr::rails::EventName(RailEvent(99)), "?");
}

TEST(RailHealth, FailureLogsOneWarnWithRailNameAndReason) {
  std::vector<std::pair<rr::log::Level, std::string>> lines;
  rr::log::SetLogger(&NoopLogger);
  rr::log::SetCapture([&](rr::log::Level l, const std::string& m) { lines.emplace_back(l, m); });
  RailHealth h(2, "rail2");
  EXPECT_TRUE(h.OnEvent(E::kLinkDown, "carrier lost"));
  EXPECT_FALSE(h.OnEvent(E::kLinkDown, "again"));  // already failed: ignored
  EXPECT_TRUE(h.OnEvent(E::kLinkUp, "carrier back"));
  EXPECT_TRUE(h.OnEvent(E::kProbeOk, "probe answered in 1 ms"));
  rr::log::SetCapture(nullptr);
  rr::log::SetLogger(nullptr);
  int warns = 0;
  for (const auto& [lvl, msg] : lines) {
    if (lvl != rr::log::Level::kWarn) continue;
    ++warns;
    EXPECT_NE(msg.find("rail 2 (rail2) healthy -> failed on link-down: carrier lost"), std::string::npos) << msg;
  }
  EXPECT_EQ(warns, 1);
  EXPECT_EQ(h.state(), S::kHealthy);
  EXPECT_EQ(h.transitions(), 3u);
}

TEST(RailHealth, UsableOnlyWhenHealthy) {
  RailHealth h(0, "rail0");
  EXPECT_TRUE(h.Usable());
  ASSERT_TRUE(h.OnEvent(E::kStall, "no progress for 500 ms"));
  EXPECT_EQ(h.state(), S::kSuspect);
  EXPECT_FALSE(h.Usable());
  ASSERT_TRUE(h.OnEvent(E::kProbeFail, "heartbeat timeout"));
  EXPECT_EQ(h.state(), S::kFailed);
  ASSERT_TRUE(h.OnEvent(E::kProbeStart, "back-off timer"));
  EXPECT_FALSE(h.Usable());
  ASSERT_TRUE(h.OnEvent(E::kLinkRemoved, "ifindex 7 gone"));
  EXPECT_EQ(h.state(), S::kPermanentlyFailed);
  EXPECT_FALSE(h.OnEvent(E::kProbeOk, "late probe"));
  EXPECT_EQ(h.state(), S::kPermanentlyFailed);
}

TEST(ProbeBackoff, DoublesUpToTheCapAndNeverGivesUp) {
  rr::rails::ProbeBackoff b(100, 5000);
  std::vector<uint64_t> got;
  for (int i = 0; i < 10; ++i) got.push_back(b.NextDelayMs());
  EXPECT_EQ(got, (std::vector<uint64_t>{100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000}));
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(b.NextDelayMs(), 5000u);
  b.Reset();
  EXPECT_EQ(b.NextDelayMs(), 100u);
  rr::rails::ProbeBackoff odd(0, 0);  // nonsense bounds still give a positive delay
  EXPECT_GE(odd.NextDelayMs(), 1u);
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/rrrails-ut-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf " + path_).c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(RailHealth, PublishesEveryTransitionToTheBoard) {
  TempDir dir;
  std::unique_ptr<rr::rails::BoardWriter> board;
  ASSERT_TRUE(rr::rails::BoardWriter::Create("net", &board, dir.path()).ok());
  int slot = -1;
  ASSERT_TRUE(board->AddRail("rail1", &slot).ok());
  RailHealth h(1, "rail1", board.get(), slot);
  rr::log::SetLogger(&NoopLogger);
  rr::log::SetCapture([](rr::log::Level, const std::string&) {});  // expected WARN lines: not printed
  // Several threads hammer the machine: every accepted event is one transition on the board.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&h, t] {
      const E evs[] = {E::kLinkDown, E::kLinkUp, E::kProbeOk, E::kStall, E::kProgress, E::kError, E::kProbeStart};
      for (int i = 0; i < 2000; ++i) (void)h.OnEvent(evs[(i + t) % 7], "test");
    });
  for (auto& th : threads) th.join();
  rr::log::SetCapture(nullptr);
  rr::log::SetLogger(nullptr);
  rr::rails::BoardSnapshot snap;
  ASSERT_TRUE(rr::rails::ReadBoard(board->path(), &snap).ok());
  ASSERT_EQ(snap.rails.size(), 1u);
  EXPECT_EQ(snap.rails[0].transitions, h.transitions());
  EXPECT_EQ(snap.rails[0].state, h.state());
  EXPECT_GT(h.transitions(), 0u);
}

}  // namespace
