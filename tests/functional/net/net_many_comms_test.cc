// Resource bounds (issue 15): RERAIL_MANY_COMMS (default 1000) connections over every rail the plugin
// finds (4 veth "rails" in a private network namespace: net_many_comms.sh), all open at once, one
// message each, then all closed: the process's descriptors (/proc/self/fd) and threads (/proc/self/task)
// must be back to what they were before the first listen. Prints the peak counts.
#include <dirent.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "net_loader.h"
#include "rerail/clock.h"

namespace {

using rr::netdrv::NetPlugin;

void QuietLogger(int, unsigned long, const char*, int, const char*, ...) {}

int CountEntries(const char* dir) {
  DIR* d = opendir(dir);
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - (std::strcmp(dir, "/proc/self/fd") == 0 ? 1 : 0);  // the DIR's own descriptor
}

struct Conn {
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

TEST(ManyComms, ThousandsOfCommsOnEveryRailLeaveNoDescriptorOrThread) {
  const char* env = std::getenv("RERAIL_MANY_COMMS");
  const int n = env != nullptr ? std::atoi(env) : 1000;
  std::string err;
  auto plugin = NetPlugin::Open(RERAIL_NET_SO, &err);
  ASSERT_NE(plugin, nullptr) << err;
  void* ctx = nullptr;
  ASSERT_EQ(plugin->Init(&ctx, 1, QuietLogger, nullptr), rrNcclSuccess);
  int ndev = 0;
  ASSERT_EQ(plugin->Devices(&ndev), rrNcclSuccess);
  std::printf("rails: %d\n", ndev);
  const int fd0 = CountEntries("/proc/self/fd"), th0 = CountEntries("/proc/self/task");

  std::vector<Conn> conns(n);
  std::vector<char> handles(static_cast<size_t>(n) * 128, 0);
  for (int i = 0; i < n; ++i) {
    Conn& c = conns[i];
    char* h = &handles[static_cast<size_t>(i) * 128];
    ASSERT_EQ(plugin->Listen(ctx, i % ndev, h, &c.listen), rrNcclSuccess) << i;
    rr::Deadline dl = rr::Deadline::AfterMs(20000);
    while ((c.send == nullptr || c.recv == nullptr) && !dl.Expired()) {
      if (c.send == nullptr) { ASSERT_EQ(plugin->Connect(ctx, i % ndev, h, &c.send), rrNcclSuccess) << i; }
      if (c.recv == nullptr) { ASSERT_EQ(plugin->Accept(c.listen, &c.recv), rrNcclSuccess) << i; }
    }
    ASSERT_TRUE(c.send != nullptr && c.recv != nullptr) << "comm " << i << " did not connect";
  }
  // One message per connection (so every connection is fully up, standby links included).
  int v = 0;
  for (int i = 0; i < n; ++i) {
    int src = i, dst = -1;
    void *sr = nullptr, *rr_ = nullptr;
    void* dptr = &dst;
    size_t sizes[1] = {sizeof(dst)};
    int tags[1] = {0};
    void* mh[1] = {nullptr};
    rr::Deadline dl = rr::Deadline::AfterMs(20000);
    int sd = 0, rd = 0;
    while ((!sd || !rd) && !dl.Expired()) {
      if (sr == nullptr) { ASSERT_EQ(plugin->Isend(conns[i].send, &src, sizeof(src), 0, nullptr, nullptr, &sr), rrNcclSuccess); }
      if (rr_ == nullptr) { ASSERT_EQ(plugin->Irecv(conns[i].recv, 1, &dptr, sizes, tags, mh, nullptr, &rr_), rrNcclSuccess); }
      if (sr != nullptr && !sd) { ASSERT_EQ(plugin->Test(sr, &sd, nullptr), rrNcclSuccess); }
      if (rr_ != nullptr && !rd) { ASSERT_EQ(plugin->Test(rr_, &rd, nullptr), rrNcclSuccess); }
    }
    ASSERT_EQ(dst, i);
    v += dst == i;
  }
  const int fd_peak = CountEntries("/proc/self/fd"), th_peak = CountEntries("/proc/self/task");
  std::printf("%d comms x %d rails open: %d descriptors (baseline %d), %d threads (baseline %d)\n", n, ndev,
              fd_peak, fd0, th_peak, th0);
  for (auto& c : conns) {
    EXPECT_EQ(plugin->CloseSend(c.send), rrNcclSuccess);
    EXPECT_EQ(plugin->CloseRecv(c.recv), rrNcclSuccess);
    EXPECT_EQ(plugin->CloseListen(c.listen), rrNcclSuccess);
  }
  // Closing is synchronous in the plugin; the short settle loop only covers threads the kernel is
  // still reaping (none expected).
  int fd1 = 0, th1 = 0;
  rr::Deadline dl = rr::Deadline::AfterMs(5000);
  do {
    fd1 = CountEntries("/proc/self/fd");
    th1 = CountEntries("/proc/self/task");
  } while ((fd1 != fd0 || th1 != th0) && !dl.Expired());
  std::printf("after closing: %d descriptors, %d threads\n", fd1, th1);
  EXPECT_EQ(fd1, fd0) << "descriptors left after closing every comm";
  EXPECT_EQ(th1, th0) << "threads left after closing every comm";
  EXPECT_GT(fd_peak, fd0 + n * ndev) << "the connections really held descriptors on every rail";
  EXPECT_EQ(plugin->Finalize(ctx), rrNcclSuccess);
}

}  // namespace
