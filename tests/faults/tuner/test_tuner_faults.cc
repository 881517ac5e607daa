// Fault tier: the net plugin runs on simulated host 0 (2 rails, network namespaces); its link monitor
// sees a real carrier loss on rail 1 and marks the rail failed. Both tuners must follow: the one in
// the net plugin's library reads the state in process, the stand-alone library reads the board.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl_net_abi.h"
#include "netns_fixture.h"
#include "tuner_abi.h"

namespace {

std::mutex g_mu;
std::vector<std::string> g_log;

void Logger(int level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lk(g_mu);
  g_log.push_back(std::to_string(level) + " " + buf);
}

int CountLog(const std::string& needle) {
  std::lock_guard<std::mutex> lk(g_mu);
  int n = 0;
  for (const auto& l : g_log) n += l.find(needle) != std::string::npos;
  return n;
}

std::string DumpLog() {
  std::lock_guard<std::mutex> lk(g_mu);
  std::string s;
  for (const auto& l : g_log) s += l + "\n";
  return s;
}

class TunerFaults : public rr::testing::NetnsFixture {
 protected:
  const char* PrefixBase() const override { return "rrtun"; }
  int Hosts() const override { return 2; }
  int Rails() const override { return 2; }
};

// One getCollInfo on a fresh table; returns *nChannels.
int Channels(const rrTuner_v5_t* t, void* ctx) {
  float table[RR_TUNER_NUM_ALGORITHMS][RR_TUNER_NUM_PROTOCOLS];
  for (auto& row : table)
    for (float& v : row) v = 500.0f;
  int nch = 0;
  EXPECT_EQ(t->getCollInfo(ctx, RR_FUNC_ALLREDUCE, 64 << 20, 1, reinterpret_cast<float**>(table),
                           RR_TUNER_NUM_ALGORITHMS, RR_TUNER_NUM_PROTOCOLS, 0, &nch), 0);
  return nch;
}

TEST_F(TunerFaults, LinkDownReachesBothTuners) {
  char tmpl[] = "/dev/shm/rerail-tuner-faults.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  setenv("RERAIL_TCP_IFNAME", "rail", 1);
  setenv("RERAIL_LINK_EVENTS", "1", 1);
  setenv("RERAIL_BOARD", "1", 1);
  setenv("RERAIL_TUNER_HEALTH", "1", 1);
  setenv("RERAIL_BOARD_DIR", tmpl, 1);
  setenv("RERAIL_TUNER_REFRESH_MS", "0", 1);
  setenv("RERAIL_TUNER_CHANNELS_PER_RAIL", "2", 1);
  void* hnet = dlopen(RERAIL_NET_SO, RTLD_NOW | RTLD_LOCAL);
  void* htun = dlopen(RERAIL_TUNER_SO, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(hnet, nullptr) << dlerror();
  ASSERT_NE(htun, nullptr) << dlerror();
  auto* net = static_cast<const rrNcclNet_v11_t*>(dlsym(hnet, "ncclNetPlugin_v11"));
  auto* inproc = static_cast<const rrTuner_v5_t*>(dlsym(hnet, "ncclTunerPlugin_v5"));
  auto* board = static_cast<const rrTuner_v5_t*>(dlsym(htun, "ncclTunerPlugin_v5"));
  ASSERT_TRUE(net != nullptr && inproc != nullptr && board != nullptr);

  // The net plugin initialises on host 0: its devices and link monitor live in that namespace.
  const uint64_t comm_id = 0xfa17;
  void* nctx = nullptr;
  int ndev = 0;
  rrNcclNetCommConfig_t cfg{-1};
  topo().InHost(0, [&] {
    ASSERT_EQ(net->init(&nctx, comm_id, &cfg, Logger, nullptr), rrNcclSuccess) << DumpLog();
    ASSERT_EQ(net->devices(&ndev), rrNcclSuccess);
  });
  ASSERT_EQ(ndev, 2) << DumpLog();

  rrTunerConstants_v5_t c{};
  void* t_in = nullptr;
  void* t_board = nullptr;
  ASSERT_EQ(inproc->init(&t_in, comm_id, 4, 2, Logger, nullptr, &c), 0);
  ASSERT_EQ(board->init(&t_board, comm_id, 4, 2, Logger, nullptr, &c), 0);
  EXPECT_EQ(Channels(inproc, t_in), 0);
  EXPECT_EQ(Channels(board, t_board), 0);
  EXPECT_EQ(CountLog("2/2 rails healthy (net plugin (in process))"), 1) << DumpLog();
  EXPECT_EQ(CountLog("2/2 rails healthy (board)"), 1) << DumpLog();

  ASSERT_TRUE(topo().Fail(0, 1, "carrier"));
  // The monitor thread delivers the event asynchronously: wait for it (bounded), then both agree.
  int in_ch = 0;
  for (int i = 0; i < 500 && in_ch == 0; ++i) {
    in_ch = Channels(inproc, t_in);
    if (in_ch == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(in_ch, 2) << "the in-process tuner never saw rail 1 fail\n" << DumpLog();
  EXPECT_EQ(Channels(board, t_board), 2);
  EXPECT_EQ(CountLog("1/2 rails healthy (net plugin (in process)): network bandwidth terms x2.00, channels 2"), 1)
      << DumpLog();
  EXPECT_EQ(CountLog("1/2 rails healthy (board): network bandwidth terms x2.00, channels 2"), 1) << DumpLog();

  // The net plugin finalizes: its source is unregistered and its board removed; both tuners stand down.
  ASSERT_EQ(net->finalize(nctx), rrNcclSuccess);
  EXPECT_EQ(Channels(inproc, t_in), 0);
  EXPECT_EQ(Channels(board, t_board), 0);
  EXPECT_EQ(CountLog("no rail health (board "), 2) << DumpLog();
  EXPECT_EQ(inproc->finalize(t_in), 0);
  EXPECT_EQ(board->finalize(t_board), 0);
  rmdir(tmpl);
}

}  // namespace
