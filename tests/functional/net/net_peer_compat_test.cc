// Peer compatibility of libnccl-net-rerail.so (issue 15), decided from NCCL's socket transport
// (src/transport/net_socket.cc) and documented in net_plugin/README.md:
//   (a) accept() may be called again on a listen comm that already accepted: each call accepts the next
//       connection made with the same handle (NULL until one arrives), with its own data stream;
//   (b) isend/irecv posted after the peer closed succeed (a request is handed out) and test() reports
//       the error - never a hang, never an error from the post itself.
// Driven through rr::netdrv (dlopen, as NCCL does) in one process over loopback.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "net_loader.h"
#include "rerail/clock.h"

namespace {

using rr::netdrv::NetPlugin;

void QuietLogger(int, unsigned long, const char*, int, const char*, ...) {}

constexpr uint64_t kBoundMs = 20000;  // hang guard only: every step below completes in milliseconds

class Compat : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("RERAIL_TCP_IFNAME", "lo", 1);
    setenv("RERAIL_GIVEUP_MS", "2000", 1);
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

  // Connects once with `handle` and accepts it on `listen`.
  static void Connect(void* listen, char* handle, void** send, void** recv) {
    *send = *recv = nullptr;
    rr::Deadline dl = rr::Deadline::AfterMs(kBoundMs);
    while ((*send == nullptr || *recv == nullptr) && !dl.Expired()) {
      if (*send == nullptr) {
        ASSERT_EQ(plugin_->Connect(ctx_, 0, handle, send), rrNcclSuccess);
      }
      if (*recv == nullptr) {
        ASSERT_EQ(plugin_->Accept(listen, recv), rrNcclSuccess);
      }
    }
    ASSERT_NE(*send, nullptr);
    ASSERT_NE(*recv, nullptr);
  }
  static void* Isend(void* sc, void* data, size_t size) {
    void* req = nullptr;
    rr::Deadline dl = rr::Deadline::AfterMs(kBoundMs);
    while (req == nullptr && !dl.Expired()) {
      rrNcclResult_t r = plugin_->Isend(sc, data, size, 0, nullptr, nullptr, &req);
      EXPECT_EQ(r, rrNcclSuccess) << "isend post";
      if (r != rrNcclSuccess) return nullptr;
    }
    return req;
  }
  static void* Irecv(void* rc, void* data, size_t cap) {
    void* req = nullptr;
    size_t sizes[1] = {cap};
    int tags[1] = {0};
    void* mh[1] = {nullptr};
    rr::Deadline dl = rr::Deadline::AfterMs(kBoundMs);
    while (req == nullptr && !dl.Expired()) {
      rrNcclResult_t r = plugin_->Irecv(rc, 1, &data, sizes, tags, mh, nullptr, &req);
      EXPECT_EQ(r, rrNcclSuccess) << "irecv post";
      if (r != rrNcclSuccess) return nullptr;
    }
    return req;
  }
  // Tests every request until all are done; false on an error or the bound.
  static bool WaitAll(std::vector<void*> reqs) {
    rr::Deadline dl = rr::Deadline::AfterMs(kBoundMs);
    size_t left = reqs.size();
    while (left > 0 && !dl.Expired()) {
      for (void*& r : reqs) {
        int done = 0;
        if (r == nullptr) continue;
        if (plugin_->Test(r, &done, nullptr) != rrNcclSuccess) return false;
        if (done) r = nullptr, --left;
      }
    }
    return left == 0;
  }
  // Tests `req` until test() returns an error; returns it (rrNcclSuccess if it completed or the bound
  // passed instead - both failures of the tests below).
  static rrNcclResult_t ErrorOf(void* req, std::vector<void*> drive = {}) {
    rr::Deadline dl = rr::Deadline::AfterMs(kBoundMs);
    while (!dl.Expired()) {
      int done = 0;
      rrNcclResult_t r = plugin_->Test(req, &done, nullptr);
      if (r != rrNcclSuccess) return r;
      if (done) {
        ADD_FAILURE() << "request completed instead of reporting the error";
        return rrNcclSuccess;
      }
      for (void* d : drive) plugin_->Test(d, &done, nullptr);
    }
    ADD_FAILURE() << "no error within " << kBoundMs << " ms";
    return rrNcclSuccess;
  }
  // One message sc -> rc, checked.
  static void RoundTrip(void* sc, void* rc, uint8_t seed) {
    std::vector<uint8_t> src(70000), dst(70000, 0);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + seed);
    void* s = Isend(sc, src.data(), src.size());
    void* r = Irecv(rc, dst.data(), dst.size());
    ASSERT_NE(s, nullptr);
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(WaitAll({s, r}));
    EXPECT_EQ(src, dst) << "seed " << int(seed);
  }

  static NetPlugin* plugin_;
  static void* ctx_;
};
NetPlugin* Compat::plugin_ = nullptr;
void* Compat::ctx_ = nullptr;

TEST_F(Compat, SecondAcceptOnAListenCommAcceptsTheNextConnection) {
  char handle[128] = {0};
  void* listen = nullptr;
  ASSERT_EQ(plugin_->Listen(ctx_, 0, handle, &listen), rrNcclSuccess);
  void *sc1, *rc1;
  Connect(listen, handle, &sc1, &rc1);
  // No second connection yet: accept succeeds with no comm (NCCL polls it again), as often as asked.
  for (int i = 0; i < 100; ++i) {
    void* none = reinterpret_cast<void*>(1);
    ASSERT_EQ(plugin_->Accept(listen, &none), rrNcclSuccess) << "second accept is not an error";
    ASSERT_EQ(none, nullptr);
  }
  void *sc2, *rc2;
  Connect(listen, handle, &sc2, &rc2);
  EXPECT_NE(rc1, rc2);
  // Each accepted comm carries its own connection's data, both before and after closing the listen comm.
  RoundTrip(sc1, rc1, 1);
  RoundTrip(sc2, rc2, 2);
  ASSERT_EQ(plugin_->CloseListen(listen), rrNcclSuccess);
  RoundTrip(sc2, rc2, 3);
  RoundTrip(sc1, rc1, 4);
  EXPECT_EQ(plugin_->CloseSend(sc1), rrNcclSuccess);
  EXPECT_EQ(plugin_->CloseRecv(rc1), rrNcclSuccess);
  RoundTrip(sc2, rc2, 5);  // closing one connection leaves the other (same listener) working
  EXPECT_EQ(plugin_->CloseSend(sc2), rrNcclSuccess);
  EXPECT_EQ(plugin_->CloseRecv(rc2), rrNcclSuccess);
}

TEST_F(Compat, IsendAfterTheReceiverClosedIsPostedAndTestReportsTheError) {
  char handle[128] = {0};
  void* listen = nullptr;
  ASSERT_EQ(plugin_->Listen(ctx_, 0, handle, &listen), rrNcclSuccess);
  void *sc, *rc;
  Connect(listen, handle, &sc, &rc);
  ASSERT_EQ(plugin_->CloseListen(listen), rrNcclSuccess);
  RoundTrip(sc, rc, 7);
  ASSERT_EQ(plugin_->CloseRecv(rc), rrNcclSuccess);
  // 1 MiB: above the eager size, so only the receiver's ack could complete it (a small eager send may
  // complete before anyone notices the close, as a socket write would).
  std::vector<uint8_t> buf(1 << 20, 0x42);
  void* req = Isend(sc, buf.data(), buf.size());
  ASSERT_NE(req, nullptr) << "the post succeeds, as with NCCL's socket transport";
  rrNcclResult_t err = ErrorOf(req);
  EXPECT_EQ(err, rrNcclRemoteError);
  // Once the connection is known to be gone, a new post still succeeds and its test() reports why.
  void* again = Isend(sc, buf.data(), buf.size());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(ErrorOf(again), rrNcclRemoteError);
  EXPECT_EQ(plugin_->CloseSend(sc), rrNcclSuccess);
}

TEST_F(Compat, IrecvAfterTheSenderClosedIsPostedAndTestReportsTheError) {
  char handle[128] = {0};
  void* listen = nullptr;
  ASSERT_EQ(plugin_->Listen(ctx_, 0, handle, &listen), rrNcclSuccess);
  void *sc, *rc;
  Connect(listen, handle, &sc, &rc);
  ASSERT_EQ(plugin_->CloseListen(listen), rrNcclSuccess);
  RoundTrip(sc, rc, 9);
  ASSERT_EQ(plugin_->CloseSend(sc), rrNcclSuccess);
  std::vector<uint8_t> buf(4096);
  void* req = Irecv(rc, buf.data(), buf.size());
  ASSERT_NE(req, nullptr) << "the post succeeds, as with NCCL's socket transport";
  EXPECT_EQ(ErrorOf(req), rrNcclRemoteError);
  void* again = Irecv(rc, buf.data(), buf.size());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(ErrorOf(again), rrNcclRemoteError);
  EXPECT_EQ(plugin_->CloseRecv(rc), rrNcclSuccess);
}

}  // namespace
