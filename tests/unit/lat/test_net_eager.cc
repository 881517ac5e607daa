// Eager small sends of libnccl-net-rerail.so (dlopened through rr::netdrv, as NCCL does), in one
// process over loopback. The receiver end is driven only where a test says so: a send that completes
// while the receiver has never been called cannot have been acknowledged, which is what makes the
// "completes before the ack" checks deterministic.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "net_loader.h"
#include "rerail/clock.h"

// The plugin's socket reads, counted on the test's thread while g_count is set: this executable
// exports recv/recvmsg (ENABLE_EXPORTS), so the dlopened plugin calls these, which call libc's.
namespace {
thread_local bool g_count = false;
struct Reads {
  uint64_t got = 0;      // reads that returned bytes
  uint64_t empty = 0;    // reads that found nothing (EAGAIN)
  uint64_t wasted = 0;   // empty reads of a socket whose previous read in the window returned bytes
  std::map<int, bool> last_got;
};
thread_local Reads g_reads;
// Reads made by the plugin's own threads (IdleSends) while g_watch_others is set.
thread_local bool g_test_thread = false;
std::atomic<bool> g_watch_others{false};
std::atomic<uint64_t> g_other_reads{0};
void Note(int fd, ssize_t r) {
  if (!g_test_thread && g_watch_others.load()) g_other_reads.fetch_add(1);
  if (!g_count) return;
  if (r > 0) {
    ++g_reads.got;
    g_reads.last_got[fd] = true;
  } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    ++g_reads.empty;
    if (g_reads.last_got[fd]) ++g_reads.wasted;
    g_reads.last_got[fd] = false;
  }
}
}  // namespace

extern "C" __attribute__((visibility("default"))) ssize_t recv(int fd, void* buf, size_t len, int flags) {
  static auto real = reinterpret_cast<ssize_t (*)(int, void*, size_t, int)>(dlsym(RTLD_NEXT, "recv"));
  ssize_t r = real(fd, buf, len, flags);
  int e = errno;
  Note(fd, r);
  errno = e;
  return r;
}

extern "C" __attribute__((visibility("default"))) ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  static auto real = reinterpret_cast<ssize_t (*)(int, msghdr*, int)>(dlsym(RTLD_NEXT, "recvmsg"));
  ssize_t r = real(fd, msg, flags);
  int e = errno;
  Note(fd, r);
  errno = e;
  return r;
}

namespace {

using rr::netdrv::NetPlugin;

constexpr size_t kEagerMax = 16384;
constexpr size_t kPool = 4 * kEagerMax;  // RERAIL_EAGER_POOL of this suite: four eager messages

void QuietLogger(int, unsigned long, const char*, int, const char*, ...) {}

class Eager : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("RERAIL_TCP_IFNAME", "lo", 1);
    setenv("RERAIL_EAGER_MAX", std::to_string(kEagerMax).c_str(), 1);
    setenv("RERAIL_EAGER_POOL", std::to_string(kPool).c_str(), 1);
    // Eager sends posted before their receive: only a sender that does not group receives sends before
    // the receiver announced the receive (net_plugin/README.md, "Grouped receives").
    setenv("RERAIL_MAX_RECVS", "1", 1);
    std::string err;
    plugin_ = NetPlugin::Open(RERAIL_NET_SO, &err).release();
    ASSERT_NE(plugin_, nullptr) << err;
    ASSERT_EQ(plugin_->Init(&ctx_, 1, QuietLogger, nullptr), rrNcclSuccess);
  }
  static void TearDownTestSuite() {
    if (plugin_ != nullptr) {
      EXPECT_EQ(plugin_->Finalize(ctx_), rrNcclSuccess);
    }
    delete plugin_;
    plugin_ = nullptr;
  }

  void SetUp() override {
    char handle[128] = {0};
    void* listen = nullptr;
    ASSERT_EQ(plugin_->Listen(ctx_, 0, handle, &listen), rrNcclSuccess);
    rr::Deadline dl = rr::Deadline::AfterMs(10000);
    while ((send_ == nullptr || recv_ == nullptr) && !dl.Expired()) {
      if (send_ == nullptr) {
        ASSERT_EQ(plugin_->Connect(ctx_, 0, handle, &send_), rrNcclSuccess);
      }
      if (recv_ == nullptr) {
        ASSERT_EQ(plugin_->Accept(listen, &recv_), rrNcclSuccess);
      }
    }
    ASSERT_EQ(plugin_->CloseListen(listen), rrNcclSuccess);
    ASSERT_NE(send_, nullptr);
    ASSERT_NE(recv_, nullptr);
  }
  void TearDown() override {
    if (send_ != nullptr) {
      EXPECT_EQ(plugin_->CloseSend(send_), rrNcclSuccess);
    }
    if (recv_ != nullptr) {
      EXPECT_EQ(plugin_->CloseRecv(recv_), rrNcclSuccess);
    }
  }

  void* Send(void* data, size_t size) {
    void* req = nullptr;
    rr::Deadline dl = rr::Deadline::AfterMs(10000);
    while (req == nullptr && !dl.Expired()) {
      EXPECT_EQ(plugin_->Isend(send_, data, size, 0, nullptr, nullptr, &req), rrNcclSuccess);
    }
    return req;
  }
  void* Recv(void* data, size_t cap) {
    void* req = nullptr;
    size_t sizes[1] = {cap};
    int tags[1] = {0};
    void* mh[1] = {nullptr};
    rr::Deadline dl = rr::Deadline::AfterMs(10000);
    while (req == nullptr && !dl.Expired()) {
      EXPECT_EQ(plugin_->Irecv(recv_, 1, &data, sizes, tags, mh, nullptr, &req), rrNcclSuccess);
    }
    return req;
  }
  // Tests `req` alone (the other end is not driven) `polls` times or until done.
  bool PollAlone(void* req, int polls, int* size = nullptr) {
    int done = 0;
    for (int i = 0; i < polls && !done; ++i) {
      EXPECT_EQ(plugin_->Test(req, &done, size), rrNcclSuccess);
    }
    return done != 0;
  }
  // Drives every request (both ends) until all are done.
  void WaitAll(std::vector<void*> reqs) {
    rr::Deadline dl = rr::Deadline::AfterMs(20000);
    size_t left = reqs.size();
    while (left > 0 && !dl.Expired()) {
      for (void*& r : reqs) {
        int done = 0;
        if (r == nullptr) continue;
        ASSERT_EQ(plugin_->Test(r, &done, nullptr), rrNcclSuccess);
        if (done) r = nullptr, --left;
      }
    }
    ASSERT_EQ(left, 0u) << "requests did not complete";
  }

  static NetPlugin* plugin_;
  static void* ctx_;
  void* send_ = nullptr;
  void* recv_ = nullptr;
};
NetPlugin* Eager::plugin_ = nullptr;
void* Eager::ctx_ = nullptr;

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed * 7 + 1);
  return v;
}

constexpr int kManyPolls = 2000;  // far more than writing a few KiB to loopback needs

TEST_F(Eager, SmallSendCompletesBeforeTheReceiverActsAndSurvivesBufferReuse) {
  auto src = Pattern(8, 1);
  const auto want = src;
  void* sreq = Send(src.data(), src.size());
  ASSERT_NE(sreq, nullptr);
  ASSERT_TRUE(PollAlone(sreq, kManyPolls)) << "an eager send must not wait for the receiver's ack";
  std::fill(src.begin(), src.end(), 0x55);  // NCCL may reuse its buffer once the send is done
  std::vector<uint8_t> dst(64, 0xee);
  void* rreq = Recv(dst.data(), dst.size());
  ASSERT_NE(rreq, nullptr);
  int got = -1;
  rr::Deadline dl = rr::Deadline::AfterMs(20000);
  while (!PollAlone(rreq, 1, &got) && !dl.Expired()) {
  }
  EXPECT_EQ(got, 8);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), dst.begin())) << "the receiver got the copy, not the reused buffer";
}

TEST_F(Eager, LargerThanEagerMaxWaitsForTheAck) {
  auto src = Pattern(kEagerMax + 1, 2);
  std::vector<uint8_t> dst(src.size());
  void* sreq = Send(src.data(), src.size());
  ASSERT_NE(sreq, nullptr);
  EXPECT_FALSE(PollAlone(sreq, kManyPolls)) << "a normal send completes only on the receiver's ack";
  void* rreq = Recv(dst.data(), dst.size());
  WaitAll({sreq, rreq});
  EXPECT_EQ(src, dst);
}

TEST_F(Eager, FullPoolFallsBackToANormalSendAndAcksFreeThePool) {
  constexpr int kN = 5;  // four fill the pool, the fifth cannot be eager
  std::vector<std::vector<uint8_t>> src, dst;
  std::vector<void*> sreq;
  for (int i = 0; i < kN; ++i) {
    src.push_back(Pattern(kEagerMax, 10 + i));
    dst.emplace_back(kEagerMax, 0);
  }
  for (int i = 0; i < kN; ++i) {
    sreq.push_back(Send(src[i].data(), kEagerMax));
    ASSERT_NE(sreq.back(), nullptr);
  }
  for (int i = 0; i < kN - 1; ++i) {
    EXPECT_TRUE(PollAlone(sreq[i], kManyPolls)) << "eager message " << i << " fits the pool";
  }
  EXPECT_FALSE(PollAlone(sreq[kN - 1], kManyPolls)) << "pool full: the fifth send must wait for its ack";
  std::vector<void*> reqs{sreq[kN - 1]};
  for (int i = 0; i < kN; ++i) reqs.push_back(Recv(dst[i].data(), kEagerMax));
  WaitAll(reqs);
  for (int i = 0; i < kN; ++i) EXPECT_EQ(src[i], dst[i]) << "message " << i;
  // The fifth send completed on a cumulative ack covering the eager ones: their copies are released.
  auto again = Pattern(kEagerMax, 99);
  void* s6 = Send(again.data(), again.size());
  EXPECT_TRUE(PollAlone(s6, kManyPolls)) << "the ack must have returned the eager copies to the pool";
  std::vector<uint8_t> d6(kEagerMax);
  void* r6 = Recv(d6.data(), d6.size());
  WaitAll({r6});
  EXPECT_EQ(again, d6);
}

TEST_F(Eager, ManySmallMessagesInOrderWithDeferredAcks) {
  constexpr int kN = 200;  // several windows: only deferred (cumulative) acks let the sender go on
  for (int i = 0; i < kN; ++i) {
    auto src = Pattern(1 + (i * 37) % kEagerMax, i);
    std::vector<uint8_t> dst(kEagerMax, 0);
    void* rreq = Recv(dst.data(), dst.size());
    void* sreq = Send(src.data(), src.size());
    ASSERT_NE(rreq, nullptr);
    ASSERT_NE(sreq, nullptr);
    WaitAll({sreq, rreq});
    ASSERT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << "message " << i;
  }
}

// The hot path of a small message (issue 11): its header and payload come in one read, and a socket
// that returned data is not read again for nothing in the same call (one read, as a raw TCP
// ping-pong does; before, a message cost 2 reads and 4 or more empty ones).
TEST_F(Eager, SmallMessageCostsOneReadAndNoEmptyReadAfterIt) {
  constexpr int kMsgs = 200;
  std::vector<uint8_t> src = Pattern(8, 9), dst(64);
  uint64_t got = 0, wasted = 0, empty = 0, calls = 0;
  for (int m = 0; m < kMsgs; ++m) {
    src[0] = static_cast<uint8_t>(m);
    void* sreq = Send(src.data(), 8);
    ASSERT_NE(sreq, nullptr);
    ASSERT_TRUE(PollAlone(sreq, kManyPolls));
    g_reads = Reads{};
    g_count = true;  // from the irecv on: a receive that reads in irecv pays there
    void* rreq = Recv(dst.data(), dst.size());
    int done = 0, size = -1;
    for (int polls = 0; rreq != nullptr && !done && polls < kManyPolls; ++polls, ++calls) {
      ASSERT_EQ(plugin_->Test(rreq, &done, &size), rrNcclSuccess);
    }
    g_count = false;
    ASSERT_TRUE(done) << "message " << m;
    ASSERT_EQ(size, 8);
    ASSERT_EQ(std::memcmp(dst.data(), src.data(), 8), 0) << "message " << m;
    got += g_reads.got;
    wasted += g_reads.wasted;
    empty += g_reads.empty;
  }
  // A heartbeat may add a read now and then on a slow (sanitizer) run. And while the receive comm owes
  // its sender an ack (RecvCore::OwesIdleProgress) the IdleSends thread drives it every 5 ms: on a
  // slow run it may read a message ahead of its irecv (into the stash), a read not on this thread.
  EXPECT_GE(got, static_cast<uint64_t>(kMsgs - kMsgs / 10));
  EXPECT_LE(got, static_cast<uint64_t>(kMsgs + kMsgs / 10)) << "reads per 8-byte message: " << double(got) / kMsgs;
  EXPECT_EQ(wasted, 0u) << "empty reads right after a read that got the data (" << empty << " empty reads in "
                        << calls << " test() calls)";
}

// IdleSends passes only a comm that no progress pass drove for its period (net_plugin/idle_sends.h):
// a ping-pong that keeps both comms driven, each owing idle progress between its completions
// (unacknowledged eager sends; acks the sender's kernel has not confirmed), gets no pass from the
// thread, whose passes took the comms' locks from under test(); a comm left alone gets one within
// the period. Its passes are seen as socket reads on a thread other than this one.
TEST_F(Eager, IdleSendsLeavesADrivenCommAloneAndPassesAnIdleOne) {
  g_test_thread = true;
  auto src = Pattern(8, 7);
  std::vector<uint8_t> dst(64, 0);
  auto round_trip = [&] {
    void* rreq = Recv(dst.data(), dst.size());
    void* sreq = Send(src.data(), src.size());
    WaitAll({sreq, rreq});
  };
  round_trip();  // both comms now owe idle progress, so both are listed
  g_other_reads = 0;
  g_watch_others = true;
  const uint64_t t0 = rr::NowNs();
  uint64_t rounds = 0, stalls = 0, last = t0;
  while (last - t0 < 150'000'000) {  // 30 periods of 5 ms
    round_trip(), ++rounds;
    const uint64_t now = rr::NowNs();
    stalls += now - last >= 4'000'000;  // this thread lost the CPU for a period: a pass was due
    last = now;
  }
  g_watch_others = false;
  const uint64_t driven_reads = g_other_reads.load();
  // Left alone: an eager send whose receiver is not driven stays unacknowledged.
  void* sreq = Send(src.data(), src.size());
  ASSERT_TRUE(PollAlone(sreq, kManyPolls));
  g_other_reads = 0;
  g_watch_others = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  g_watch_others = false;
  const uint64_t idle_reads = g_other_reads.load();
  // A pass is due only where this thread stalled for a period (a loaded runner): a few reads each.
  // Before the driven stamp the thread passed each comm every 5 ms: 9-16 reads here.
  EXPECT_LE(driven_reads, 3 + 4 * stalls) << "IdleSends read the sockets of comms driven " << rounds
                                           << " times in 150 ms (" << stalls << " stalls of 4 ms)";
  EXPECT_GE(idle_reads, 1u) << "a comm that owes its peer progress got no idle pass in 40 ms";
  void* rreq = Recv(dst.data(), dst.size());
  WaitAll({rreq});
  EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
  g_test_thread = false;
}

}  // namespace
