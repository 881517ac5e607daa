// Profiler behaviour that depends on RERAIL_PROFILE_* settings. The settings are read once per process,
// so each test here runs in its own process with its own environment (see prof.cmake), selected with
// --gtest_filter; run alone without that environment, a test skips.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "nccl_emu.h"
#include "prof_test_util.h"
#include "rerail/log.h"

namespace rr::prof::test {
namespace {

bool EnvIs(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == value;
}

TEST(ProfConfig, BadMaskWordIsWarnedAndUnwritableDirFailsInit) {
  if (!EnvIs("RERAIL_PROFILE_MASK", "coll,bogus")) GTEST_SKIP() << "needs RERAIL_PROFILE_MASK=coll,bogus";
  std::vector<std::string> warns;
  log::SetCapture([&](log::Level l, const std::string& s) {
    if (l == log::Level::kWarn) warns.push_back(s);
  });
  std::unique_ptr<NcclEmu> emu;
  Status st = NcclEmu::Open(RERAIL_PROFILER_SO, {0xbad1, "bad", 1, 1, 0}, &emu);
  log::SetCapture(nullptr);
  EXPECT_EQ(st.code(), Code::kInvalidUsage) << st.ToString();
  EXPECT_EQ(emu, nullptr);
  ASSERT_EQ(warns.size(), 2u);
  EXPECT_NE(warns[0].find("RERAIL_PROFILE_MASK=coll,bogus: unknown event kind(s) 'bogus'"), std::string::npos)
      << warns[0];
  EXPECT_NE(warns[1].find("RERAIL_PROFILE_DIR="), std::string::npos) << warns[1];
  EXPECT_NE(warns[1].find("profiling disabled"), std::string::npos) << warns[1];
}

TEST(ProfConfig, HiddenTypesAreSkippedAndChildrenReparented) {
  if (!EnvIs("RERAIL_PROFILE_MASK", "coll,net")) GTEST_SKIP() << "needs RERAIL_PROFILE_MASK=coll,net";
  const uint64_t comm = 0x41dde;
  std::unique_ptr<NcclEmu> emu;
  ASSERT_TRUE(NcclEmu::Open(RERAIL_PROFILER_SO, {comm, "mask", 1, 1, 0}, &emu).ok());
  EXPECT_EQ(emu->activation_mask(), RR_PROF_COLL | RR_PROF_NET_PLUGIN);
  NetEventEmitter net(NcclEmu::NetCallback());
  void* g = emu->StartGroup();  // NCCL starts the ancestors that net events need
  void* c = emu->StartColl(g, NcclEmu::CollInfo{});
  emu->Stop(c);
  emu->Stop(g);
  void* op = emu->StartProxyOp(c, 0, 1, 2, 4096, true);
  NcclEmu::ProxyStep slot;
  for (int s = 0; s < 2; ++s) {
    emu->StartProxyStep(&slot, op, s);
    rrProfNetEvent_v1_t io = MakeNetEvent(RR_PROF_NET_EV_IO, 0);
    io.bytes = 4096;
    net.StopIo(net.StartIo(&slot, &io));
    emu->StopProxyStep(&slot);
  }
  emu->Stop(op);
  ASSERT_TRUE(emu->Finalize().ok());
  TraceIndex t(LoadJson(Base(0, comm) + ".trace.json"));
  EXPECT_EQ(t.by_id.size(), 3u) << "one coll, two io events, nothing else";
  ASSERT_EQ(t.Count("coll"), 1u);
  ASSERT_EQ(t.Count("net"), 2u);
  uint64_t coll = t.by_cat["coll"][0];
  EXPECT_EQ(t.Parent(coll), 0u) << "the group is not recorded";
  for (uint64_t n : t.by_cat["net"]) EXPECT_EQ(t.Parent(n), coll) << "op and step are not recorded";
  nlohmann::json sum = LoadJson(Base(0, comm) + ".summary.json");
  EXPECT_EQ(sum.at("events").at("proxystep"), 2u) << "hidden events still count";
  EXPECT_EQ(sum.at("rails").at("0").at("bytes_recv"), 8192u);
}

TEST(ProfConfig, PeriodicFlushWritesValidOutputsBeforeFinalize) {
  if (!EnvIs("RERAIL_PROFILE_FLUSH_S", "1")) GTEST_SKIP() << "needs RERAIL_PROFILE_FLUSH_S=1";
  const uint64_t comm = 0xf1005;
  std::unique_ptr<NcclEmu> emu;
  ASSERT_TRUE(NcclEmu::Open(RERAIL_PROFILER_SO, {comm, "flush", 1, 1, 0}, &emu).ok());
  void* op = emu->StartProxyOp(nullptr, 0, 1, 1, 4096, true);
  NcclEmu::ProxyStep slot;
  emu->StartProxyStep(&slot, op, 0);
  emu->StopProxyStep(&slot);
  emu->Stop(op);
  // Wait (bounded) for the periodic snapshot; its content, not its timing, is what is checked.
  nlohmann::json sum;
  for (int i = 0; i < 200 && !sum.is_object(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    sum = LoadJson(Base(0, comm) + ".summary.json");
  }
  ASSERT_TRUE(sum.is_object()) << "no summary within 10 s with RERAIL_PROFILE_FLUSH_S=1";
  EXPECT_FALSE(sum.at("final").get<bool>());
  EXPECT_EQ(sum.at("events").at("proxyop"), 1u);
  nlohmann::json trace = LoadJson(Base(0, comm) + ".trace.json");
  ASSERT_TRUE(trace.is_object()) << "the trace parses while the comm is still running";
  EXPECT_EQ(TraceIndex(trace).Count("proxyop"), 1u);
  EXPECT_NE(LoadText(Base(0, comm) + ".prom").find("rerail_profiler_dropped_records_total"),
            std::string::npos);
  ASSERT_TRUE(emu->Finalize().ok());
  EXPECT_TRUE(LoadJson(Base(0, comm) + ".summary.json").at("final").get<bool>());
}

}  // namespace
}  // namespace rr::prof::test
