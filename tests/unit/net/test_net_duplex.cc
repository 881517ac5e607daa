// RERAIL_TCP_DUPLEX (net_plugin/duplex.h) through the .so's exported tables, in one process: two
// connections in opposite directions (X and Y) between the process and itself pair up, so one of the
// process' roles is the initiator's (a send comm's socket read by a receive comm) and the other the
// reactor's (a receive comm's socket written by a send comm too). One thread drives all four comms,
// as NCCL's proxy thread does.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "proxy_driver.h"
#include "rerail/clock.h"

namespace {

using rr::netbench::Endpoint;
using rr::netbench::LogCapture;
using rr::netbench::LogLine;

// Captured lines of `level` (2 WARN, 3 INFO) containing `what` ("" = every one).
int CountLines(int level, const std::string& what) {
  int n = 0;
  for (const LogLine& l : LogCapture::Snapshot()) n += l.level == level && l.text.find(what) != std::string::npos;
  return n;
}
int CountInfos(const std::string& what) { return CountLines(3, what); }

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
  return v;
}

// One direction's pair of comms.
struct Dir {
  void* send = nullptr;
  void* recv = nullptr;
};

class Duplex : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("RERAIL_TCP_IFNAME", "lo", 1);
    setenv("RERAIL_TCP_DUPLEX", "1", 1);
    setenv("NCCL_DEBUG", "INFO", 1);
    rr::Status st = Endpoint::Open(RERAIL_NET_SO, 0, &ep_);
    ASSERT_TRUE(st.ok()) << st.message();
    plugin_ = &ep_->net();
    ctx_ = ep_->ctx();
  }
  static void TearDownTestSuite() {
    if (ep_) {
      EXPECT_TRUE(ep_->Finalize().ok());
    }
    ep_.reset();
    plugin_ = nullptr;
  }

  void Connect(Dir* d) {
    rr::Status st = ep_->SelfConnect(&d->send, &d->recv, 10000);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  void* Send(void* comm, void* data, size_t size) {
    void* req = nullptr;
    rr::Deadline dl = rr::Deadline::AfterMs(10000);
    while (req == nullptr && !dl.Expired()) EXPECT_EQ(plugin_->Isend(comm, data, size, 0, nullptr, nullptr, &req), rrNcclSuccess);
    return req;
  }
  void* Recv(void* comm, void* data, size_t cap) {
    void* req = nullptr;
    size_t sizes[1] = {cap};
    int tags[1] = {0};
    void* mh[1] = {nullptr};
    rr::Deadline dl = rr::Deadline::AfterMs(10000);
    while (req == nullptr && !dl.Expired()) {
      if (plugin_->Irecv(comm, 1, &data, sizes, tags, mh, nullptr, &req) != rrNcclSuccess) return nullptr;
    }
    return req;
  }
  // Tests every pending request round-robin until all are done (one thread drives every comm).
  void WaitAll(std::vector<void*> reqs, std::vector<int>* sizes = nullptr) {
    std::vector<int> done(reqs.size(), 0);
    if (sizes != nullptr) sizes->assign(reqs.size(), -1);
    rr::Deadline dl = rr::Deadline::AfterMs(30000);
    size_t left = reqs.size();
    while (left > 0 && !dl.Expired()) {
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (done[i]) continue;
        int sz = -1;
        ASSERT_EQ(plugin_->Test(reqs[i], &done[i], &sz), rrNcclSuccess) << "request " << i;
        if (done[i]) {
          --left;
          if (sizes != nullptr) (*sizes)[i] = sz;
        }
      }
    }
    ASSERT_EQ(left, 0u) << "requests did not complete";
  }
  // n rounds: a message on X, then its answer on Y, each checked byte for byte.
  void PingPong(const Dir& x, const Dir& y, int n, uint32_t seed) {
    const size_t sizes[] = {8, 0, 1000, 40000, 200000};
    for (int m = 0; m < n; ++m) {
      const size_t size = sizes[m % 5];
      auto ping = Pattern(size, seed + m), pong = Pattern(size, seed + m + 1000000);
      std::vector<uint8_t> got_ping(size + 16, 0xee), got_pong(size + 16, 0xee);
      void* r1 = Recv(x.recv, got_ping.data(), got_ping.size());
      void* s1 = Send(x.send, ping.data(), size);
      ASSERT_NE(r1, nullptr);
      ASSERT_NE(s1, nullptr);
      WaitAll({r1, s1});
      ASSERT_TRUE(std::equal(ping.begin(), ping.end(), got_ping.begin())) << "ping " << m;
      void* r2 = Recv(y.recv, got_pong.data(), got_pong.size());
      void* s2 = Send(y.send, pong.data(), size);
      ASSERT_NE(r2, nullptr);
      ASSERT_NE(s2, nullptr);
      WaitAll({r2, s2});
      ASSERT_TRUE(std::equal(pong.begin(), pong.end(), got_pong.begin())) << "pong " << m;
    }
  }
  // k messages in flight each way at once, checked.
  void Bulk(const Dir& x, const Dir& y, int k, size_t size, uint32_t seed) {
    std::vector<std::vector<uint8_t>> src, dst;
    std::vector<void*> reqs;
    for (int i = 0; i < 2 * k; ++i) {
      src.push_back(Pattern(size + i, seed + i));
      dst.emplace_back(size + i, 0);
    }
    for (int i = 0; i < k; ++i) {
      reqs.push_back(Recv(x.recv, dst[i].data(), dst[i].size()));
      reqs.push_back(Recv(y.recv, dst[k + i].data(), dst[k + i].size()));
    }
    for (int i = 0; i < k; ++i) {
      reqs.push_back(Send(x.send, src[i].data(), src[i].size()));
      reqs.push_back(Send(y.send, src[k + i].data(), src[k + i].size()));
    }
    for (void* r : reqs) ASSERT_NE(r, nullptr);
    WaitAll(reqs);
    for (int i = 0; i < 2 * k; ++i) ASSERT_EQ(src[i], dst[i]) << "message " << i;
  }
  // Pairing takes a send comm's next look (every 10 ms) and the peer's kShare: a ping-pong until both
  // ends said so.
  void Pair(const Dir& x, const Dir& y) {
    const int reads = CountInfos("also reads conn"), writes = CountInfos("also writes on conn");
    rr::Deadline dl = rr::Deadline::AfterMs(5000);
    while ((CountInfos("also reads conn") == reads || CountInfos("also writes on conn") == writes) && !dl.Expired()) {
      PingPong(x, y, 5, 1);
    }
    ASSERT_EQ(CountInfos("also reads conn"), reads + 1) << "no receive comm adopted a send comm's socket";
    ASSERT_EQ(CountInfos("also writes on conn"), writes + 1) << "no send comm borrowed a receive comm's socket";
  }

  // Two opposite connections, paired.
  void ConnectPair(Dir* x, Dir* y) {
    Connect(x);
    Connect(y);
    Pair(*x, *y);
  }
  void CloseEnd(const Dir& d, bool send) {
    EXPECT_EQ(send ? plugin_->CloseSend(d.send) : plugin_->CloseRecv(d.recv), rrNcclSuccess);
  }
  void CloseBoth(const Dir& d, bool send_first) {
    CloseEnd(d, send_first);
    CloseEnd(d, !send_first);
  }

  static std::unique_ptr<Endpoint> ep_;
  static rr::netdrv::NetPlugin* plugin_;
  static void* ctx_;
};
std::unique_ptr<Endpoint> Duplex::ep_;
rr::netdrv::NetPlugin* Duplex::plugin_ = nullptr;
void* Duplex::ctx_ = nullptr;

TEST_F(Duplex, OppositeConnectionsShareOneSocketAndDeliverEveryByte) {
  Dir x, y;
  ConnectPair(&x, &y);
  PingPong(x, y, 200, 7);
  PingPong(y, x, 200, 9);
  Bulk(x, y, 8, 1 << 20, 11);
  Bulk(x, y, 8, 3000, 13);
  PingPong(x, y, 50, 15);
  EXPECT_EQ(CountLines(2, ""), 0) << "a WARN while nothing failed";
  CloseBoth(x, true);
  CloseBoth(y, true);
}

// Each end driven by its own thread, as two processes' proxy threads would: one thread holds X's send
// comm and Y's receive comm (the initiator's end), the other X's receive comm and Y's send comm (the
// reactor's end), so the shared socket's reader, writers and mailbox are used concurrently (run
// under TSan in build-tsan).
TEST_F(Duplex, TwoThreadsAsTwoProcessesLoseNothing) {
  Dir x, y;
  ConnectPair(&x, &y);
  constexpr int kRounds = 2000;
  const size_t sizes[] = {8, 64, 5000, 70000};
  auto drive = [&](void* send, void* recv, bool first, uint32_t seed, int* bad) {
    for (int m = 0; m < kRounds; ++m) {
      const size_t size = sizes[m % 4];
      auto out = Pattern(size, seed + m);
      std::vector<uint8_t> in(size, 0);
      void* r = Recv(recv, in.data(), in.size());
      std::vector<void*> reqs{r};
      if (first) reqs.push_back(Send(send, out.data(), size));
      if (r == nullptr || reqs.back() == nullptr) return void(++*bad);
      WaitAll(reqs);
      if (!first) {
        void* s = Send(send, out.data(), size);
        if (s == nullptr) return void(++*bad);
        WaitAll({s});
      }
      if (in != Pattern(size, (seed ^ 1) + m)) ++*bad;
    }
  };
  int bad_a = 0, bad_b = 0;
  std::thread a([&] { drive(x.send, y.recv, true, 2, &bad_a); });
  std::thread b([&] { drive(y.send, x.recv, false, 3, &bad_b); });
  a.join();
  b.join();
  EXPECT_EQ(bad_a, 0) << "messages lost or wrong at the initiator's end";
  EXPECT_EQ(bad_b, 0) << "messages lost or wrong at the reactor's end";
  CloseBoth(x, true);
  CloseBoth(y, false);
}

// Acks ride the replies on the shared socket (duplex.h): a receive comm parks its acks there for the
// next small frame of its partner send comm. Here no reply ever comes, in either direction (the
// reactor's acks parked on its own socket, the initiator's on the adopted one): 40 one-way eager
// messages, then the receiver is never called again and the sender closes, which waits for every ack
// (LingerUntilAcked). The parked acks still arrive (the receiver's next pass, then IdleSends, writes
// them): no "unacknowledged" close, and the pair goes on working.
TEST_F(Duplex, ParkedAcksReachASenderThatGetsNoReply) {
  for (int dir = 0; dir < 2; ++dir) {
    Dir x, y;
    ConnectPair(&x, &y);
    const Dir& one = dir == 0 ? x : y;
    std::vector<uint8_t> out(8, 0x5a), in(8, 0);
    for (int m = 0; m < 40; ++m) {
      void* r = Recv(one.recv, in.data(), in.size());
      void* s = Send(one.send, out.data(), out.size());
      ASSERT_NE(r, nullptr);
      ASSERT_NE(s, nullptr);
      WaitAll({r, s});
      ASSERT_EQ(in, out) << "message " << m;
    }
    (void)LogCapture::Take();
    CloseEnd(one, true);  // the receiver is not driven from here on
    EXPECT_EQ(CountInfos("unacknowledged"), 0) << (dir == 0 ? "X" : "Y") << ": a send closed before its ack came";
    const Dir& other = dir == 0 ? y : x;
    PingPong(other, other, 10, 600);
    CloseEnd(one, false);
    CloseBoth(other, true);
  }
}

// Closing one comm of a pair while the other connection has messages in flight over the shared
// socket: the other connection loses nothing (at worst it fails over link 0) and nothing hangs.
class DuplexClose : public Duplex, public ::testing::WithParamInterface<int> {};

TEST_P(DuplexClose, TheOtherConnectionLosesNothing) {
  Dir a, b;
  ConnectPair(&a, &b);
  // Which comm closes: 0 = a's send, 1 = a's recv, 2 = b's send, 3 = b's recv; the other connection
  // keeps carrying 8 messages of each size class in flight while it goes.
  const int which = GetParam();
  Dir& gone = which < 2 ? a : b;
  Dir& kept = which < 2 ? b : a;
  std::vector<std::vector<uint8_t>> src, dst;
  std::vector<void*> reqs;
  for (int i = 0; i < 8; ++i) {
    src.push_back(Pattern(i % 2 ? 8 : 300000, 100 + i));
    dst.emplace_back(src.back().size(), 0);
  }
  for (int i = 0; i < 8; ++i) reqs.push_back(Recv(kept.recv, dst[i].data(), dst[i].size()));
  for (int i = 0; i < 8; ++i) reqs.push_back(Send(kept.send, src[i].data(), src[i].size()));
  for (void* r : reqs) ASSERT_NE(r, nullptr);
  CloseEnd(gone, which % 2 == 0);
  WaitAll(reqs);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(src[i], dst[i]) << "message " << i;
  for (const LogLine& l : LogCapture::Take()) {  // the failover it cost, for the log
    if (l.level == 2) printf("WARN %s\n", l.text.c_str());
  }
  // The kept connection goes on working (over its own socket once the shared one is gone).
  Bulk(kept, kept, 4, 100000, 200);
  CloseEnd(gone, which % 2 != 0);
  CloseBoth(kept, true);
}

// A connection of a pair closed at both ends with nothing in flight (every message acknowledged: the
// receivers' held acks go out within their hold time, driven by IdleSends), in either order, as NCCL
// tears a connection down: no failover, no WARN, and the other connection goes on (an adopter whose
// connection ended hands the reading back to the socket's owner; a borrower whose messages were all
// acknowledged drops the socket quietly).
class DuplexQuietClose : public Duplex, public ::testing::WithParamInterface<int> {};

TEST_P(DuplexQuietClose, CostsNoFailover) {
  Dir a, b;
  ConnectPair(&a, &b);
  PingPong(a, b, 20, 300);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (void)LogCapture::Take();
  // 0: a's send then a's recv, 1: a's recv then a's send, 2 and 3: the same for b.
  const int which = GetParam();
  Dir& gone = which < 2 ? a : b;
  Dir& kept = which < 2 ? b : a;
  CloseBoth(gone, which % 2 == 0);
  Bulk(kept, kept, 4, 100000, 400);
  PingPong(kept, kept, 40, 500);
  for (const LogLine& l : LogCapture::Snapshot()) {
    if (l.level == 2) ADD_FAILURE() << "WARN " << l.text;
  }
  CloseBoth(kept, true);
}

std::string CloseName(const ::testing::TestParamInfo<int>& i) {
  static const char* const kNames[] = {"FirstSendClosed", "FirstRecvClosed", "SecondSendClosed", "SecondRecvClosed"};
  return kNames[i.param];
}
INSTANTIATE_TEST_SUITE_P(EachComm, DuplexClose, ::testing::Values(0, 1, 2, 3), CloseName);
std::string QuietName(const ::testing::TestParamInfo<int>& i) {
  static const char* const kNames[] = {"FirstSendThenRecv", "FirstRecvThenSend", "SecondSendThenRecv", "SecondRecvThenSend"};
  return kNames[i.param];
}
INSTANTIATE_TEST_SUITE_P(EachOrder, DuplexQuietClose, ::testing::Values(0, 1, 2, 3), QuietName);

}  // namespace
