// Drives libnccl-tuner-rerail.so through its exported tables the way NCCL 2.28 (v5) and 2.30 (v6)
// do: init per communicator with nRanks/nNodes/logger/constants, getCollInfo with a 7x3 cost table
// holding ignored (-1) entries and *nChannels = 0, finalize. Rail health comes from a real board that
// this process publishes with rr::rails::BoardWriter, as the net plugin does.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rerail/rails/board.h"
#include "tuner_abi.h"

namespace {

using rr::rails::BoardWriter;
using rr::rails::RailEvent;
using rr::rails::RailState;

constexpr int kA = RR_TUNER_NUM_ALGORITHMS;
constexpr int kP = RR_TUNER_NUM_PROTOCOLS;

std::mutex g_log_mu;
std::vector<std::string> g_log;  // "<level> <text>"

void TestLogger(int level, unsigned long /*flags*/, const char* /*file*/, int /*line*/, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lk(g_log_mu);
  g_log.push_back(std::to_string(level) + " " + buf);
}

int CountLog(const std::string& needle) {
  std::lock_guard<std::mutex> lk(g_log_mu);
  int n = 0;
  for (const auto& l : g_log) n += l.find(needle) != std::string::npos;
  return n;
}

std::string DumpLog() {
  std::lock_guard<std::mutex> lk(g_log_mu);
  std::string s;
  for (const auto& l : g_log) s += l + "\n";
  return s;
}

void* Lib() {
  static void* h = dlopen(RERAIL_TUNER_SO, RTLD_NOW | RTLD_LOCAL);
  return h;
}

// NCCL's table, typed as v6 (v5 is its prefix); `version` says which symbol it came from.
struct Tuner {
  int version;
  const rrTuner_v6_t* t;
};

Tuner Get(int version) {
  void* s = dlsym(Lib(), version == 5 ? "ncclTunerPlugin_v5" : "ncclTunerPlugin_v6");
  return {version, static_cast<const rrTuner_v6_t*>(s)};
}

// NCCL-like constants: base latency 6 µs, NET hop 14 µs for every algorithm/protocol.
constexpr double kBase = 6.0, kHwNet = 14.0;
rrTunerConstants_v5_t Constants() {
  rrTunerConstants_v5_t c{};
  for (int a = 0; a < kA; ++a)
    for (int p = 0; p < kP; ++p) {
      c.baseLatencies[a][p] = kBase;
      c.hwLatencies[RR_HW_NVLINK][a][p] = 0.6;
      c.hwLatencies[RR_HW_NET][a][p] = kHwNet;
    }
  return c;
}

// A cost table as NCCL builds it: collnet and NVLS unsupported (-1), times growing with the entry.
struct CostTable {
  float v[kA][kP];
  CostTable() {
    for (int a = 0; a < kA; ++a)
      for (int p = 0; p < kP; ++p) v[a][p] = (a >= RR_ALGO_COLLNET_DIRECT && a <= RR_ALGO_NVLS_TREE) ? -1.0f
                                                                                                  : 100.0f + 10 * a + p;
    v[RR_ALGO_TREE][RR_PROTO_LL] = 20.0f;  // below the latency estimate: never scaled
  }
  float** ptr() { return reinterpret_cast<float**>(v); }
};

class TunerAbiTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ASSERT_NE(Lib(), nullptr) << dlerror();
    tuner_ = Get(GetParam());
    ASSERT_NE(tuner_.t, nullptr);
    char tmpl[] = "/dev/shm/rerail-tuner-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    setenv("RERAIL_BOARD_DIR", dir_.c_str(), 1);
    setenv("RERAIL_TUNER_REFRESH_MS", "0", 1);  // re-read health on every call: deterministic tests
    setenv("RERAIL_TUNER_HEALTH", "1", 1);     // these tests are about health-driven choices (off by default)
    unsetenv("RERAIL_TUNER_CONFIG");
    unsetenv("RERAIL_TUNER_ENABLE");
    unsetenv("RERAIL_TUNER_CHANNELS_PER_RAIL");
    unsetenv("RERAIL_TUNER_BOARD");
    std::lock_guard<std::mutex> lk(g_log_mu);
    g_log.clear();
  }
  void TearDown() override {
    if (ctx_ != nullptr) {
      EXPECT_EQ(tuner_.t->finalize(ctx_), rrTunerSuccess);
    }
    board_.reset();
    for (const auto& f : files_) unlink(f.c_str());
    rmdir(dir_.c_str());
  }

  void MakeBoard(int rails, int failed) {
    ASSERT_TRUE(BoardWriter::Create("net", &board_, dir_).ok());
    for (int i = 0; i < rails; ++i) {
      int slot = -1;
      ASSERT_TRUE(board_->AddRail("eth" + std::to_string(i), &slot).ok());
      if (i < failed) board_->SetState(slot, RailState::kFailed, RailEvent::kLinkDown);
    }
  }

  void Init(size_t nranks, size_t nnodes) {
    rrTunerNvlDomainInfo_v5_t nvl{static_cast<int>(nnodes), 8, 8};
    constants_ = Constants();
    ASSERT_EQ(tuner_.t->init(&ctx_, 0xabcdef, nranks, nnodes, TestLogger, &nvl, &constants_), rrTunerSuccess);
    ASSERT_NE(ctx_, nullptr);
  }

  int Call(CostTable* t, int coll = RR_FUNC_ALLREDUCE, size_t bytes = 1 << 20) {
    int nch = 0;
    EXPECT_EQ(tuner_.t->getCollInfo(ctx_, coll, bytes, 1, t->ptr(), kA, kP, 0, &nch), rrTunerSuccess);
    return nch;
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string p = dir_ + "/" + name;
    std::ofstream(p) << text;
    files_.push_back(p);
    return p;
  }

  Tuner tuner_{};
  std::string dir_;
  std::unique_ptr<BoardWriter> board_;
  std::vector<std::string> files_;
  rrTunerConstants_v5_t constants_{};
  void* ctx_ = nullptr;
};

void ExpectUnchanged(const CostTable& got) {
  CostTable want;
  for (int a = 0; a < kA; ++a)
    for (int p = 0; p < kP; ++p) EXPECT_EQ(got.v[a][p], want.v[a][p]) << "algo " << a << " proto " << p;
}

// Scaled by capacity `cap` with NCCL-like constants on 2 nodes: every hop count is 2 there.
void ExpectScaled(const CostTable& got, double cap) {
  CostTable want;
  const float lat = static_cast<float>(kBase + 2 * kHwNet);
  const float scale = static_cast<float>(1.0 / cap);
  for (int a = 0; a < kA; ++a)
    for (int p = 0; p < kP; ++p) {
      float w = want.v[a][p];
      if (w > lat) w = lat + (w - lat) * scale;
      EXPECT_FLOAT_EQ(got.v[a][p], w) << "algo " << a << " proto " << p;
    }
}

TEST_P(TunerAbiTest, TableHasNcclLayout) {
  EXPECT_STREQ(tuner_.t->name, "rerail");
  EXPECT_NE(tuner_.t->init, nullptr);
  EXPECT_NE(tuner_.t->getCollInfo, nullptr);
  EXPECT_NE(tuner_.t->finalize, nullptr);
  if (tuner_.version == 6) {
    ASSERT_NE(tuner_.t->getChunkSize, nullptr);
    MakeBoard(4, 1);
    Init(16, 2);
    size_t chunk = 131072;
    EXPECT_EQ(tuner_.t->getChunkSize(ctx_, RR_FUNC_ALLREDUCE, 1 << 20, RR_ALGO_RING, RR_PROTO_SIMPLE, 8, &chunk),
              rrTunerSuccess);
    EXPECT_EQ(chunk, 131072u);
  }
}

TEST_P(TunerAbiTest, HealthyBoardLeavesNcclChoices) {
  MakeBoard(4, 0);
  Init(16, 2);
  for (int i = 0; i < 3; ++i) {
    CostTable t;
    EXPECT_EQ(Call(&t), 0);
    ExpectUnchanged(t);
  }
  EXPECT_EQ(CountLog("4/4 rails healthy (board); NCCL's choices stand"), 1) << DumpLog();
  EXPECT_EQ(CountLog("TUNER/rerail : rerail "), 1) << DumpLog();
  EXPECT_EQ(CountLog("tuner ABI v" + std::to_string(tuner_.version)), 1) << DumpLog();
}

TEST_P(TunerAbiTest, DegradedBoardScalesNetworkCostsAndChannels) {
  MakeBoard(4, 1);
  Init(16, 2);
  for (int i = 0; i < 3; ++i) {
    CostTable t;
    EXPECT_EQ(Call(&t), 6);  // 3 healthy rails x 2 channels per rail
    ExpectScaled(t, 0.75);
  }
  EXPECT_EQ(CountLog("3/4 rails healthy (board): network bandwidth terms x1.33, channels 6"), 1) << DumpLog();
}

// The default: rail health is logged but changes nothing, so every rank makes NCCL's own choice.
// (With health on, a rank that saw a failback before its peer chose differently and an all_reduce
// came out wrong in a real NCCL run on a GPU.)
TEST_P(TunerAbiTest, HealthIsOffByDefaultSoRanksAgree) {
  unsetenv("RERAIL_TUNER_HEALTH");
  MakeBoard(4, 1);
  Init(16, 2);
  CostTable t;
  EXPECT_EQ(Call(&t), 0) << "channel count left to NCCL";
  ExpectScaled(t, 1.0);
  EXPECT_EQ(CountLog("3/4 rails healthy (board); NCCL's choices stand (RERAIL_TUNER_HEALTH=0"), 1) << DumpLog();
}

TEST_P(TunerAbiTest, SmallMessagesKeepNcclChannelCount) {
  MakeBoard(4, 1);
  Init(16, 2);
  CostTable t;
  EXPECT_EQ(Call(&t, RR_FUNC_ALLREDUCE, 6 * 32 * 1024 - 1), 0);  // NCCL would run fewer than 6 channels
  ExpectScaled(t, 0.75);
  CostTable t2;
  EXPECT_EQ(Call(&t2, RR_FUNC_ALLREDUCE, 6 * 32 * 1024), 6);
}

TEST_P(TunerAbiTest, ConstantsAreReadNeverWritten) {
  MakeBoard(4, 1);
  // NCCL's 1152-byte struct followed by bytes NCCL does not own: both must come back untouched.
  struct {
    rrTunerConstants_v5_t c;
    unsigned char guard[64];
  } buf;
  buf.c = Constants();
  memset(buf.guard, 0x5a, sizeof(buf.guard));
  decltype(buf) before;
  memcpy(&before, &buf, sizeof(buf));
  rrTunerNvlDomainInfo_v5_t nvl{2, 8, 8};
  ASSERT_EQ(tuner_.t->init(&ctx_, 7, 16, 2, TestLogger, &nvl, &buf.c), rrTunerSuccess);
  CostTable t;
  Call(&t);
  EXPECT_EQ(memcmp(&before, &buf, sizeof(buf)), 0);
}

TEST_P(TunerAbiTest, FollowsRailFailureAndRecoveryOncePerChange) {
  MakeBoard(4, 0);
  Init(16, 2);
  CostTable t0;
  EXPECT_EQ(Call(&t0), 0);
  ExpectUnchanged(t0);
  board_->SetState(1, RailState::kFailed, RailEvent::kError);
  board_->SetState(2, RailState::kSuspect, RailEvent::kStall);
  for (int i = 0; i < 2; ++i) {
    CostTable t;
    EXPECT_EQ(Call(&t), 4);
    ExpectScaled(t, 0.5);
  }
  board_->SetState(1, RailState::kHealthy, RailEvent::kProbeOk);
  board_->SetState(2, RailState::kHealthy, RailEvent::kProgress);
  CostTable t2;
  EXPECT_EQ(Call(&t2), 0);
  ExpectUnchanged(t2);
  EXPECT_EQ(CountLog("4/4 rails healthy (board)"), 2) << DumpLog();
  EXPECT_EQ(CountLog("2/4 rails healthy (board): network bandwidth terms x2.00, channels 4"), 1) << DumpLog();
}

TEST_P(TunerAbiTest, AllRailsDownLeavesNcclChoices) {
  MakeBoard(2, 2);
  Init(16, 2);
  CostTable t;
  EXPECT_EQ(Call(&t), 0);
  ExpectUnchanged(t);
  EXPECT_EQ(CountLog("0/2 rails healthy (board)"), 1) << DumpLog();
}

TEST_P(TunerAbiTest, BoardDisappearsMidRunAndComesBack) {
  MakeBoard(4, 1);
  Init(16, 2);
  CostTable t1;
  EXPECT_EQ(Call(&t1), 6);
  ExpectScaled(t1, 0.75);
  board_.reset();  // the net plugin finalized: the board is unlinked and unmapped by its writer
  for (int i = 0; i < 3; ++i) {
    CostTable t;
    EXPECT_EQ(Call(&t), 0);
    ExpectUnchanged(t);
  }
  EXPECT_EQ(CountLog("no rail health (board "), 1) << DumpLog();
  MakeBoard(4, 2);  // a new net plugin instance publishes again at the same path
  CostTable t3;
  EXPECT_EQ(Call(&t3), 4);
  ExpectScaled(t3, 0.5);
}

TEST_P(TunerAbiTest, NoBoardLeavesNcclChoices) {
  Init(16, 2);
  CostTable t;
  EXPECT_EQ(Call(&t), 0);
  ExpectUnchanged(t);
  EXPECT_EQ(CountLog("no rail health (board "), 1) << DumpLog();
}

TEST_P(TunerAbiTest, NotABoardIsRejectedWithAReason) {
  std::string p = WriteFile("not-a-board", std::string(4096, 'x'));
  setenv("RERAIL_TUNER_BOARD", p.c_str(), 1);
  MakeBoard(4, 1);  // the default board exists but the knob names another file
  Init(16, 2);
  CostTable t;
  EXPECT_EQ(Call(&t), 0);
  ExpectUnchanged(t);
  EXPECT_EQ(CountLog("bad magic"), 1) << DumpLog();
}

TEST_P(TunerAbiTest, SingleNodeNeverTouched) {
  MakeBoard(4, 3);
  Init(8, 1);
  CostTable t;
  EXPECT_EQ(Call(&t), 0);
  ExpectUnchanged(t);
}

TEST_P(TunerAbiTest, DisabledByKnob) {
  setenv("RERAIL_TUNER_ENABLE", "0", 1);
  MakeBoard(4, 1);
  Init(16, 2);
  CostTable t;
  EXPECT_EQ(Call(&t), 0);
  ExpectUnchanged(t);
}

TEST_P(TunerAbiTest, ChannelsKnob) {
  setenv("RERAIL_TUNER_CHANNELS_PER_RAIL", "0", 1);
  MakeBoard(4, 1);
  Init(16, 2);
  CostTable t;
  EXPECT_EQ(Call(&t), 0);  // costs still scaled, channels left to NCCL
  ExpectScaled(t, 0.75);
}

TEST_P(TunerAbiTest, BadKnobValueStillLoads) {
  setenv("RERAIL_TUNER_REFRESH_MS", "soon", 1);
  MakeBoard(4, 1);
  Init(16, 2);
  CostTable t;
  EXPECT_EQ(Call(&t), 6);
  EXPECT_GE(CountLog("RERAIL_TUNER_REFRESH_MS"), 1) << DumpLog();
}

TEST_P(TunerAbiTest, UnexpectedShapesAndNullsNeverFail) {
  MakeBoard(4, 1);
  Init(16, 2);
  CostTable t;
  int nch = 0;
  EXPECT_EQ(tuner_.t->getCollInfo(ctx_, RR_FUNC_ALLREDUCE, 1 << 20, 1, t.ptr(), 17, kP, 0, &nch), rrTunerSuccess);
  EXPECT_EQ(tuner_.t->getCollInfo(ctx_, RR_FUNC_ALLREDUCE, 1 << 20, 1, t.ptr(), kA, 9, 0, &nch), rrTunerSuccess);
  EXPECT_EQ(tuner_.t->getCollInfo(ctx_, RR_FUNC_ALLREDUCE, 1 << 20, 1, t.ptr(), 0, kP, 0, &nch), rrTunerSuccess);
  EXPECT_EQ(tuner_.t->getCollInfo(ctx_, RR_FUNC_ALLREDUCE, 1 << 20, 1, nullptr, kA, kP, 0, &nch), rrTunerSuccess);
  EXPECT_EQ(nch, 0);
  ExpectUnchanged(t);
  EXPECT_EQ(CountLog("cost table of an unexpected shape"), 1) << DumpLog();  // logged once
  EXPECT_EQ(tuner_.t->getCollInfo(nullptr, RR_FUNC_ALLREDUCE, 1, 1, t.ptr(), kA, kP, 0, &nch), rrTunerSuccess);
  EXPECT_EQ(tuner_.t->finalize(nullptr), rrTunerSuccess);
  EXPECT_EQ(tuner_.t->init(nullptr, 1, 2, 2, TestLogger, nullptr, nullptr), rrTunerSuccess);
  // NULL constants and NULL nChannels (latency estimate 0: every usable entry scaled).
  void* ctx2 = nullptr;
  ASSERT_EQ(tuner_.t->init(&ctx2, 9, 16, 2, TestLogger, nullptr, nullptr), rrTunerSuccess);
  CostTable t2;
  EXPECT_EQ(tuner_.t->getCollInfo(ctx2, RR_FUNC_ALLREDUCE, 1 << 20, 1, t2.ptr(), kA, kP, 0, nullptr), rrTunerSuccess);
  EXPECT_FLOAT_EQ(t2.v[RR_ALGO_TREE][RR_PROTO_LL], 20.0f / 0.75f);
  EXPECT_EQ(t2.v[RR_ALGO_NVLS][RR_PROTO_SIMPLE], -1.0f);
  EXPECT_EQ(tuner_.t->finalize(ctx2), rrTunerSuccess);
}

TEST_P(TunerAbiTest, WiderTableOfANewerNcclUsesItsStride) {
  MakeBoard(4, 1);
  Init(16, 2);
  float wide[kA][4];  // 4 protocol columns: the stride is numProto, not 3
  for (int a = 0; a < kA; ++a)
    for (int p = 0; p < 4; ++p) wide[a][p] = p == 3 ? -1.0f : 100.0f;
  int nch = 0;
  EXPECT_EQ(tuner_.t->getCollInfo(ctx_, RR_FUNC_ALLREDUCE, 1 << 20, 1, reinterpret_cast<float**>(wide), kA, 4, 0, &nch),
            rrTunerSuccess);
  EXPECT_EQ(nch, 6);
  const float lat = static_cast<float>(kBase + 2 * kHwNet);
  for (int a = 0; a < kA; ++a) {
    for (int p = 0; p < 3; ++p) EXPECT_FLOAT_EQ(wide[a][p], lat + (100.0f - lat) * static_cast<float>(1.0 / 0.75));
    EXPECT_EQ(wide[a][3], -1.0f);
  }
}

TEST_P(TunerAbiTest, RuleFile) {
  std::string p = WriteFile("rules.conf",
                            "# rerail tuner rules\n"
                            "any allreduce 0 64K ring ll 4   # small all-reduce: ring LL on 4 channels\n"
                            "degraded allgather * * tree * rails\n"
                            "any broadcast * * collnet_direct simple -\n"
                            "sometimes allreduce 0 1 ring ll 4\n"
                            "any allreduce 0 1 warp ll 4\n"
                            "any allreduce 10 1 ring ll 4\n"
                            "any allreduce 0 1 ring ll 99\n"
                            "any allreduce 0 1\n"
                            "\n");
  setenv("RERAIL_TUNER_CONFIG", p.c_str(), 1);
  MakeBoard(4, 1);
  Init(16, 2);
  EXPECT_EQ(CountLog(p + ":5: unknown condition (healthy|degraded|any): sometimes (line ignored)"), 1) << DumpLog();
  EXPECT_EQ(CountLog(p + ":6: unknown algorithm: warp"), 1) << DumpLog();
  EXPECT_EQ(CountLog(p + ":7: minimum size above maximum"), 1) << DumpLog();
  EXPECT_EQ(CountLog(p + ":8: bad channel count"), 1) << DumpLog();
  EXPECT_EQ(CountLog(p + ":9: expected 7 fields"), 1) << DumpLog();
  EXPECT_EQ(CountLog("3 rule(s) loaded"), 1) << DumpLog();

  CostTable small;
  EXPECT_EQ(Call(&small, RR_FUNC_ALLREDUCE, 4096), 4);
  EXPECT_EQ(small.v[RR_ALGO_RING][RR_PROTO_LL], 0.0f);

  CostTable large;  // no rule: health policy only
  EXPECT_EQ(Call(&large, RR_FUNC_ALLREDUCE, 1 << 20), 6);
  ExpectScaled(large, 0.75);

  CostTable ag;  // degraded all-gather: cheapest tree entry forced, channels = 3 rails x 2
  EXPECT_EQ(Call(&ag, RR_FUNC_ALLGATHER, 1 << 20), 6);
  EXPECT_EQ(ag.v[RR_ALGO_TREE][RR_PROTO_LL], 0.0f);
  EXPECT_GT(ag.v[RR_ALGO_TREE][RR_PROTO_SIMPLE], 0.0f);

  CostTable bc;  // the rule names an unsupported (-1) combination: nothing is un-ignored
  Call(&bc, RR_FUNC_BROADCAST, 1 << 20);
  for (int p2 = 0; p2 < kP; ++p2) EXPECT_EQ(bc.v[RR_ALGO_COLLNET_DIRECT][p2], -1.0f);
  ExpectScaled(bc, 0.75);

  board_->SetState(0, RailState::kHealthy, RailEvent::kProbeOk);
  CostTable ag2;  // healthy now: the degraded rule no longer matches
  EXPECT_EQ(Call(&ag2, RR_FUNC_ALLGATHER, 1 << 20), 0);
  ExpectUnchanged(ag2);
}

TEST_P(TunerAbiTest, MissingRuleFileIsLoggedAndIgnored) {
  setenv("RERAIL_TUNER_CONFIG", (dir_ + "/absent.conf").c_str(), 1);
  MakeBoard(4, 1);
  Init(16, 2);
  CostTable t;
  EXPECT_EQ(Call(&t), 6);
  EXPECT_EQ(CountLog("cannot read the rule file"), 1) << DumpLog();
}

TEST_P(TunerAbiTest, SeveralCommunicators) {
  MakeBoard(4, 1);
  Init(16, 2);
  void* other = nullptr;
  rrTunerNvlDomainInfo_v5_t nvl{1, 8, 8};
  rrTunerConstants_v5_t c = Constants();
  ASSERT_EQ(tuner_.t->init(&other, 0x77, 8, 1, TestLogger, &nvl, &c), rrTunerSuccess);
  CostTable t1, t2;
  EXPECT_EQ(Call(&t1), 6);
  int nch = 0;
  EXPECT_EQ(tuner_.t->getCollInfo(other, RR_FUNC_ALLREDUCE, 1 << 20, 1, t2.ptr(), kA, kP, 0, &nch), rrTunerSuccess);
  EXPECT_EQ(nch, 0);  // single-node communicator
  ExpectUnchanged(t2);
  EXPECT_EQ(tuner_.t->finalize(other), rrTunerSuccess);
  CostTable t3;
  EXPECT_EQ(Call(&t3), 6);  // the first one still works after the other finalized
}

INSTANTIATE_TEST_SUITE_P(Versions, TunerAbiTest, ::testing::Values(5, 6),
                         [](const ::testing::TestParamInfo<int>& i) { return "v" + std::to_string(i.param); });

}  // namespace
