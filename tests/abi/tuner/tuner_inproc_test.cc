// NCCL's "mixed library" case (reference §1.3): NCCL_NET_PLUGIN=rerail loads libnccl-net-rerail.so,
// and with no tuner library it finds ncclTunerPlugin_v5 in that same library. The tuner must then
// read rail health from the net plugin in process (keyed by commId), not from the board file, and
// must stop using it once the net plugin finalized.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "nccl_net_abi.h"
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

TEST(TunerInProcess, ReadsTheNetPluginOfItsLibrary) {
  char tmpl[] = "/dev/shm/rerail-tuner-inproc.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  setenv("RERAIL_TCP_IFNAME", "lo", 1);
  setenv("RERAIL_LINK_EVENTS", "0", 1);
  setenv("RERAIL_BOARD_DIR", tmpl, 1);
  setenv("RERAIL_TUNER_REFRESH_MS", "0", 1);
  setenv("RERAIL_TUNER_HEALTH", "1", 1);
  void* h = dlopen(RERAIL_NET_SO, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto* net = static_cast<const rrNcclNet_v11_t*>(dlsym(h, "ncclNetPlugin_v11"));
  auto* tuner = static_cast<const rrTuner_v5_t*>(dlsym(h, "ncclTunerPlugin_v5"));
  ASSERT_NE(net, nullptr);
  ASSERT_NE(tuner, nullptr);

  // NCCL: net init for the communicator first, then the tuner with the same commId (= commHash).
  const uint64_t comm_id = 0x5eed;
  void* nctx = nullptr;
  rrNcclNetCommConfig_t cfg{-1};
  ASSERT_EQ(net->init(&nctx, comm_id, &cfg, Logger, nullptr), rrNcclSuccess) << DumpLog();
  int ndev = 0;
  ASSERT_EQ(net->devices(&ndev), rrNcclSuccess);
  ASSERT_GE(ndev, 1);
  void* tctx = nullptr;
  rrTunerConstants_v5_t c{};
  ASSERT_EQ(tuner->init(&tctx, comm_id, 16, 2, Logger, nullptr, &c), 0);
  float table[RR_TUNER_NUM_ALGORITHMS][RR_TUNER_NUM_PROTOCOLS];
  for (auto& row : table)
    for (float& v : row) v = 50.0f;
  int nch = 0;
  EXPECT_EQ(tuner->getCollInfo(tctx, RR_FUNC_ALLREDUCE, 1 << 20, 1, reinterpret_cast<float**>(table),
                               RR_TUNER_NUM_ALGORITHMS, RR_TUNER_NUM_PROTOCOLS, 0, &nch), 0);
  EXPECT_EQ(nch, 0);
  for (auto& row : table)
    for (float v : row) EXPECT_EQ(v, 50.0f);
  std::string want = std::to_string(ndev) + "/" + std::to_string(ndev) + " rails healthy (net plugin (in process))";
  EXPECT_EQ(CountLog(want), 1) << DumpLog();

  // The net plugin finalizes (last comm): its source is unregistered and its board removed.
  ASSERT_EQ(net->finalize(nctx), rrNcclSuccess);
  EXPECT_EQ(tuner->getCollInfo(tctx, RR_FUNC_ALLREDUCE, 1 << 20, 1, reinterpret_cast<float**>(table),
                               RR_TUNER_NUM_ALGORITHMS, RR_TUNER_NUM_PROTOCOLS, 0, &nch), 0);
  EXPECT_EQ(CountLog("no rail health (board "), 1) << DumpLog();
  EXPECT_EQ(tuner->finalize(tctx), 0);
  rmdir(tmpl);
}

}  // namespace
