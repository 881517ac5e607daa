// Unit tests of the tuner's pieces below the ABI (tuner_plugin/src).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "rail_view.h"
#include "rerail/log.h"
#include "rerail/rails/board_layout.h"
#include "rerail/rails/rail_health.h"
#include "rerail/tuner/health_link.h"
#include "rules.h"
#include "tuner.h"

namespace rr::tuner {
namespace {

using rails::RailState;

TEST(TunerRules, ParsesEveryField) {
  RuleSet rs = ParseRulesText(
      "  # comment only\n"
      "degraded AllReduce 1K 4m ring simple 8 # trailing comment\n"
      "healthy * * * * ll128 rails\n"
      "any reducescatter 0 0 nvls_tree * -\n",
      "t");
  ASSERT_TRUE(rs.errors.empty()) << rs.errors[0];
  ASSERT_EQ(rs.rules.size(), 3u);
  const Rule& r = rs.rules[0];
  EXPECT_EQ(r.when, When::kDegraded);
  EXPECT_EQ(r.coll, RR_FUNC_ALLREDUCE);
  EXPECT_EQ(r.min_bytes, 1024u);
  EXPECT_EQ(r.max_bytes, 4u << 20);
  EXPECT_EQ(r.algo, RR_ALGO_RING);
  EXPECT_EQ(r.proto, RR_PROTO_SIMPLE);
  EXPECT_EQ(r.channels, 8);
  EXPECT_EQ(r.line, 2);
  EXPECT_EQ(rs.rules[1].coll, -1);
  EXPECT_EQ(rs.rules[1].max_bytes, UINT64_MAX);
  EXPECT_TRUE(rs.rules[1].channels_rails);
  EXPECT_EQ(rs.rules[2].algo, RR_ALGO_NVLS_TREE);
  EXPECT_EQ(rs.rules[2].proto, -1);
}

TEST(TunerRules, MalformedLinesAreReportedAndIgnored) {
  RuleSet rs = ParseRulesText(
      "any allreduce 0 1K ring ll 2\n"
      "any send 0 1K ring ll 2\n"          // p2p is not tuned
      "any allreduce -5 1K ring ll 2\n"
      "any allreduce 0 1T ring ll 2\n"
      "any allreduce 0 1K ring ll128x 2\n"
      "any allreduce 0 1K ring ll 0\n"
      "any allreduce 0 1K * * -\n"
      "any allreduce 0 99999999999999999999G ring ll 2\n",
      "f");
  ASSERT_EQ(rs.rules.size(), 1u);
  std::vector<std::string> want = {"f:2: unknown collective: send", "f:3: bad minimum size: -5",
                                   "f:4: bad maximum size: 1T", "f:5: unknown protocol: ll128x",
                                   "f:6: bad channel count", "f:7: rule changes nothing",
                                   "f:8: bad maximum size"};
  ASSERT_EQ(rs.errors.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(rs.errors[i].rfind(want[i], 0), 0u) << rs.errors[i];
    EXPECT_NE(rs.errors[i].find("(line ignored)"), std::string::npos);
  }
}

TEST(TunerRules, FirstMatchWins) {
  RuleSet rs = ParseRulesText(
      "degraded allreduce * * tree * -\n"
      "any allreduce 0 1M ring * -\n"
      "any * * * pat * -\n",
      "m");
  ASSERT_EQ(rs.rules.size(), 3u);
  EXPECT_EQ(MatchRule(rs.rules, RR_FUNC_ALLREDUCE, 100, true)->line, 1);
  EXPECT_EQ(MatchRule(rs.rules, RR_FUNC_ALLREDUCE, 100, false)->line, 2);
  EXPECT_EQ(MatchRule(rs.rules, RR_FUNC_ALLREDUCE, (1 << 20) + 1, false)->line, 3);
  EXPECT_EQ(MatchRule(rs.rules, RR_FUNC_BROADCAST, 1, false)->line, 3);
  EXPECT_EQ(MatchRule({}, RR_FUNC_BROADCAST, 1, false), nullptr);
}

TEST(TunerRailView, Summarise) {
  uint32_t s[] = {static_cast<uint32_t>(RailState::kHealthy), static_cast<uint32_t>(RailState::kSuspect),
                  static_cast<uint32_t>(RailState::kFailed), static_cast<uint32_t>(RailState::kRecovering),
                  static_cast<uint32_t>(RailState::kPermanentlyFailed), 77u, static_cast<uint32_t>(RailState::kHealthy),
                  static_cast<uint32_t>(RailState::kHealthy)};
  RailView v = Summarise(s, 8, SourceKind::kBoard);
  EXPECT_TRUE(v.valid);
  EXPECT_EQ(v.total, 8);
  EXPECT_EQ(v.usable, 3);  // only healthy rails carry traffic; unknown values count as unusable
  EXPECT_DOUBLE_EQ(v.capacity, 3.0 / 8);
  EXPECT_TRUE(v.Degraded());
  EXPECT_FALSE(Summarise(s, 0, SourceKind::kBoard).valid);
}

// State the "net plugin" of this test publishes through the registry.
std::vector<uint32_t> g_states;
int Publish(void* /*arg*/, uint32_t* states, int max) {
  int n = static_cast<int>(g_states.size()) < max ? static_cast<int>(g_states.size()) : max;
  for (int i = 0; i < n; ++i) states[i] = g_states[i];
  return n;
}

// A board whose header grows after the tuner mapped it (max_rails and num_rails raised by a hostile or
// broken writer) must not make the tuner read slots past the file: that faulted with SIGBUS.
TEST(TunerRailView, BoardHeaderRaisedAfterMappingIsClampedToTheMappedSlots) {
  char path[] = "/tmp/rerail-tuner-boardXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  rr::rails::BoardHeader h{};
  h.magic.store(rr::rails::kBoardMagic);
  h.version = rr::rails::kBoardVersion;
  h.header_size = sizeof(rr::rails::BoardHeader);
  h.slot_size = sizeof(rr::rails::RailSlot);
  h.max_rails = 0;
  h.total_size = rr::rails::BoardSize(0);
  ASSERT_EQ(write(fd, &h, sizeof(h)), static_cast<ssize_t>(sizeof(h)));
  RailSource src(0xabc, path);
  EXPECT_FALSE(src.Read().valid);  // a board without rails says nothing
  // The header now claims 32 rails in use; the file still ends after the header.
  h.max_rails = rr::rails::kBoardMaxRails;
  h.num_rails.store(rr::rails::kBoardMaxRails);
  ASSERT_EQ(pwrite(fd, &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
  RailView v = src.Read();
  EXPECT_FALSE(v.valid);
  EXPECT_EQ(v.total, 0);
  close(fd);
  unlink(path);
}

TEST(TunerInProcessRegistry, KeyedByCommIdThenProcessWide) {
  uint32_t st[4];
  EXPECT_EQ(ReadRailSource(42, st, 4), -1);
  g_states = {0, 0};
  RegisterRailSource(0, Publish, nullptr);
  EXPECT_TRUE(HasRailSources());
  EXPECT_EQ(ReadRailSource(42, st, 4), 2);  // falls back to the process-wide source
  RegisterRailSource(42, [](void*, uint32_t* s, int) { s[0] = 2; return 1; }, nullptr);
  EXPECT_EQ(ReadRailSource(42, st, 4), 1);
  EXPECT_EQ(st[0], 2u);
  EXPECT_EQ(ReadRailSource(43, st, 4), 2);
  UnregisterRailSource(42);
  UnregisterRailSource(0);
  EXPECT_EQ(ReadRailSource(42, st, 4), -1);
  EXPECT_FALSE(HasRailSources());
}

// More live communicators than the table holds: the ones left out read the process-wide entry, and
// every slot is free again once they unregister (the table is static storage, nothing to leak).
TEST(TunerInProcessRegistry, BeyondTheTableCommsReadTheProcessWideSource) {
  uint32_t st[4];
  g_states = {0, 0, 0};
  RegisterRailSource(0, Publish, nullptr);
  auto one = [](void*, uint32_t* s, int) { s[0] = 7; return 1; };
  for (uint64_t id = 1; id <= 400; ++id) RegisterRailSource(id, one, nullptr);
  EXPECT_EQ(ReadRailSource(1, st, 4), 1);
  EXPECT_EQ(ReadRailSource(255, st, 4), 1);   // slots 1..255 after comm 0
  EXPECT_EQ(ReadRailSource(256, st, 4), 3);   // left out: the process-wide source answers
  EXPECT_EQ(ReadRailSource(400, st, 4), 3);
  for (uint64_t id = 1; id <= 400; ++id) UnregisterRailSource(id);
  RegisterRailSource(400, one, nullptr);       // room again
  EXPECT_EQ(ReadRailSource(400, st, 4), 1);
  UnregisterRailSource(400);
  UnregisterRailSource(0);
  EXPECT_FALSE(HasRailSources());
}

TEST(TunerInProcessRegistry, CommTunerFollowsThePublisher) {
  std::vector<std::string> lines;
  log::SetCapture([&](log::Level, const std::string& l) { lines.push_back(l); });
  setenv("RERAIL_TUNER_REFRESH_MS", "0", 1);
  setenv("RERAIL_TUNER_HEALTH", "1", 1);
  setenv("RERAIL_TUNER_BOARD", "/nonexistent/board", 1);
  auto settings = Acquire(nullptr);
  g_states = {0, 0, 0, 0};
  RegisterRailSource(7, Publish, nullptr);
  {
    CommTuner t(7, 32, 4, nullptr, nullptr, settings);
    float table[RR_TUNER_NUM_ALGORITHMS * RR_TUNER_NUM_PROTOCOLS];
    auto fill = [&] {
      for (float& v : table) v = 10.0f;
      table[RR_ALGO_NVLS * RR_TUNER_NUM_PROTOCOLS + RR_PROTO_LL] = -1.0f;
    };
    fill();
    int nch = 0;
    t.GetCollInfo(RR_FUNC_ALLGATHER, 1 << 20, table, RR_TUNER_NUM_ALGORITHMS, RR_TUNER_NUM_PROTOCOLS, &nch);
    EXPECT_EQ(nch, 0);
    EXPECT_EQ(table[0], 10.0f);
    g_states[3] = static_cast<uint32_t>(RailState::kFailed);
    fill();
    t.GetCollInfo(RR_FUNC_ALLGATHER, 1 << 20, table, RR_TUNER_NUM_ALGORITHMS, RR_TUNER_NUM_PROTOCOLS, &nch);
    EXPECT_EQ(nch, 6);
    EXPECT_FLOAT_EQ(table[0], 10.0f / 0.75f);  // no constants: the whole time is bandwidth
    EXPECT_EQ(table[RR_ALGO_NVLS * RR_TUNER_NUM_PROTOCOLS + RR_PROTO_LL], -1.0f);
    UnregisterRailSource(7);  // the publisher goes away: no board either → NCCL's choices
    fill();
    nch = 0;
    t.GetCollInfo(RR_FUNC_ALLGATHER, 1 << 20, table, RR_TUNER_NUM_ALGORITHMS, RR_TUNER_NUM_PROTOCOLS, &nch);
    EXPECT_EQ(nch, 0);
    EXPECT_EQ(table[0], 10.0f);
  }
  Release();
  log::SetCapture(nullptr);
  int healthy = 0, degraded = 0, gone = 0;
  for (const auto& l : lines) {
    healthy += l.find("4/4 rails healthy (net plugin (in process))") != std::string::npos;
    degraded += l.find("3/4 rails healthy (net plugin (in process)): network bandwidth terms x1.33, channels 6") !=
                std::string::npos;
    gone += l.find("no rail health (board /nonexistent/board: cannot open") != std::string::npos;
  }
  EXPECT_EQ(healthy, 1);
  EXPECT_EQ(degraded, 1);
  EXPECT_EQ(gone, 1);
  unsetenv("RERAIL_TUNER_BOARD");
}

}  // namespace
}  // namespace rr::tuner
