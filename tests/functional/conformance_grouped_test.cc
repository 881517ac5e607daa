// NCCL-proxy conformance suite, grouped receives (maxRecvs = 8, issue 12; net_plugin/core/core.h):
// one irecv of n buffers with tags, matched by n isends on the same send comm in any tag order, as
// NCCL's shared (PXN) comms post them. Driven through the plugin's ABI table like NCCL's proxy: a
// NULL request from isend or irecv is retried, requests are tested until done, test() fills sizes[].
#include <algorithm>
#include <cstring>
#include <random>

#include "conformance_util.h"
#include "rerail/clock.h"

namespace conf {
namespace {

using rr::Deadline;

size_t WarnCount() {
  size_t n = 0;
  for (const auto& l : nb::LogCapture::Snapshot()) n += l.level == 2;
  return n;
}

class ConformanceGrouped : public ::testing::Test {
 protected:
  void SetUp() override {
    ArmWatchdog(60);
    setenv("RERAIL_MAX_RECVS", "8", 1);  // before the plugin loads: each case is its own process
  }
  // A send comm and a recv comm of this process connected to each other, as the plugin hands them to
  // NCCL (listen, then connect and accept polled until both return a comm).
  void OpenLocal() {
    ASSERT_OK(nb::Endpoint::Open(PluginPath(), 0, &ep_));
    nb::Handle h;
    void* listen = nullptr;
    ASSERT_OK(ep_->Listen(&h, &listen));
    Deadline dl = Deadline::AfterMs(ScaledMs(20000));
    while (sc_ == nullptr || rc_ == nullptr) {
      if (sc_ == nullptr) {
        ASSERT_EQ(net().Connect(ep_->ctx(), 0, h.data(), &sc_), rrNcclSuccess);
      }
      if (rc_ == nullptr) {
        ASSERT_EQ(net().Accept(listen, &rc_), rrNcclSuccess);
      }
      ASSERT_FALSE(dl.Expired()) << "connect/accept in one process never completed";
    }
    ASSERT_EQ(net().CloseListen(listen), rrNcclSuccess);
    ASSERT_EQ(net().RegMr(sc_, src_.data(), src_.size(), RR_NCCL_PTR_HOST, &smh_), rrNcclSuccess);
    ASSERT_EQ(net().RegMr(rc_, dst_.data(), dst_.size(), RR_NCCL_PTR_HOST, &rmh_), rrNcclSuccess);
  }
  void TearDown() override {
    if (ep_ == nullptr) return;
    if (smh_ != nullptr) {
      EXPECT_EQ(net().DeregMr(sc_, smh_), rrNcclSuccess);
    }
    if (rmh_ != nullptr) {
      EXPECT_EQ(net().DeregMr(rc_, rmh_), rrNcclSuccess);
    }
    if (sc_ != nullptr) {
      EXPECT_EQ(net().CloseSend(sc_), rrNcclSuccess);
    }
    if (rc_ != nullptr) {
      EXPECT_EQ(net().CloseRecv(rc_), rrNcclSuccess);
    }
    (void)ep_->Finalize();
  }
  rr::netdrv::NetPlugin& net() { return ep_->net(); }

  // Posts a grouped receive (retrying a NULL request) of n buffers at dst_ + offs[k].
  void* PostRecv(int n, const size_t* offs, size_t* caps, int* tags) {
    std::vector<void*> data(n), mhs(n, rmh_);
    for (int k = 0; k < n; ++k) data[k] = dst_.data() + offs[k];
    void* req = nullptr;
    Deadline dl = Deadline::AfterMs(ScaledMs(10000));
    while (req == nullptr) {
      EXPECT_EQ(net().Irecv(rc_, n, data.data(), caps, tags, mhs.data(), nullptr, &req), rrNcclSuccess);
      if (::testing::Test::HasFailure() || dl.Expired()) return nullptr;
    }
    return req;
  }

  std::unique_ptr<nb::Endpoint> ep_;
  void* sc_ = nullptr;
  void* rc_ = nullptr;
  void* smh_ = nullptr;
  void* rmh_ = nullptr;
  std::vector<uint8_t> src_ = std::vector<uint8_t>(16 << 20);
  std::vector<uint8_t> dst_ = std::vector<uint8_t>(16 << 20);
};

uint8_t Byte(int round, int k, size_t b) { return static_cast<uint8_t>((round * 41 + k * 131 + b * 7 + (b >> 10)) & 0xff); }

// Eight buffers, tags 20..27, sizes 0 .. 1 MiB (some buffers larger than their message), the eight
// sends posted in a shuffled tag order, four rounds: each buffer gets its own tag's bytes and size.
TEST_F(ConformanceGrouped, GroupedReceiveOfEightMatchesShuffledTagsAndSizes) {
  OpenLocal();
  ASSERT_FALSE(HasFatalFailure());
  rrNcclNetProperties_v12_t props;
  ASSERT_EQ(net().GetProperties(0, &props), rrNcclSuccess);
  ASSERT_EQ(props.maxRecvs, 8) << "RERAIL_MAX_RECVS=8 offers grouped receives of 8";
  const size_t kSizes[8] = {0, 1, 4096, (128 << 10) + 7, 1 << 20, 100, 0, 65536};
  const size_t kSlack[8] = {0, 999, 0, 4096, 1, 0, 64, 12345};
  std::mt19937 rng(12);
  for (int round = 0; round < 4; ++round) {
    size_t offs[8], caps[8], soffs[8];
    int tags[8];
    size_t at = 0, sat = 0;
    for (int k = 0; k < 8; ++k) {
      size_t size = kSizes[(k + round) % 8];
      caps[k] = size + kSlack[k];
      offs[k] = at;
      at += caps[k] + 256;
      soffs[k] = sat;
      sat += size;
      tags[k] = 20 + k;
      for (size_t b = 0; b < size; ++b) src_[soffs[k] + b] = Byte(round, k, b);
    }
    std::fill(dst_.begin(), dst_.begin() + static_cast<long>(at), 0xee);
    void* rreq = PostRecv(8, offs, caps, tags);
    ASSERT_NE(rreq, nullptr);
    std::vector<int> order = {0, 1, 2, 3, 4, 5, 6, 7};
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<void*> sreq(8, nullptr);
    int sizes[8];
    std::fill(sizes, sizes + 8, -1);
    int rdone = 0, sdone = 0;
    Deadline dl = Deadline::AfterMs(ScaledMs(20000));
    while (!rdone || sdone < 8) {
      for (int i = 0; i < 8; ++i) {  // each sender retries its NULL request, in the shuffled order
        int k = order[i];
        if (sreq[k] != nullptr) continue;
        ASSERT_EQ(net().Isend(sc_, src_.data() + soffs[k], kSizes[(k + round) % 8], tags[k], smh_, nullptr, &sreq[k]),
                  rrNcclSuccess);
      }
      for (int k = 0; k < 8; ++k) {
        if (sreq[k] == nullptr || sreq[k] == reinterpret_cast<void*>(1)) continue;
        int done = 0;
        ASSERT_EQ(net().Test(sreq[k], &done, nullptr), rrNcclSuccess);
        if (done) sreq[k] = reinterpret_cast<void*>(1), ++sdone;
      }
      if (!rdone) {
        ASSERT_EQ(net().Test(rreq, &rdone, sizes), rrNcclSuccess);
      }
      ASSERT_FALSE(dl.Expired()) << "round " << round << ": receive done " << rdone << ", sends done " << sdone;
    }
    for (int k = 0; k < 8; ++k) {
      size_t size = kSizes[(k + round) % 8];
      ASSERT_EQ(sizes[k], static_cast<int>(size)) << "round " << round << " buffer " << k << ": sizes[] must be its own";
      for (size_t b = 0; b < size; ++b) {
        ASSERT_EQ(dst_[offs[k] + b], Byte(round, k, b)) << "round " << round << " buffer " << k << " byte " << b;
      }
      for (size_t b = size; b < caps[k] + 256; ++b) {
        ASSERT_EQ(dst_[offs[k] + b], 0xee) << "round " << round << " buffer " << k << ": byte " << b << " beyond the message";
      }
    }
  }
}

// A send larger than the buffer its tag matches is refused with ncclInvalidUsage and a WARN (as
// net_ib's "collective mismatch"), nothing is written; a tag in no posted buffer gets a NULL request
// (net_ib waits for a later group); the right sends still complete the receive.
TEST_F(ConformanceGrouped, SendLargerThanItsBufferIsRefusedAndAnUnmatchedTagWaits) {
  OpenLocal();
  ASSERT_FALSE(HasFatalFailure());
  size_t offs[2] = {0, 8192}, caps[2] = {1000, 1000};
  int tags[2] = {5, 6};
  std::fill(dst_.begin(), dst_.begin() + 16384, 0xee);
  void* rreq = PostRecv(2, offs, caps, tags);
  ASSERT_NE(rreq, nullptr);
  size_t warns0 = WarnCount();
  void* req = nullptr;
  rrNcclResult_t r = rrNcclSuccess;
  Deadline dl = Deadline::AfterMs(ScaledMs(10000));
  while ((r = net().Isend(sc_, src_.data(), 1001, 5, smh_, nullptr, &req)) == rrNcclSuccess && req == nullptr) {
    ASSERT_FALSE(dl.Expired()) << "the announcement of the receive never reached the sender";
  }
  EXPECT_EQ(r, rrNcclInvalidUsage) << "a 1001-byte send into a 1000-byte buffer was accepted";
  EXPECT_GT(WarnCount(), warns0) << "the refusal was not explained through the logger";
  bool named = false;
  for (const auto& l : nb::LogCapture::Snapshot()) named |= l.text.find("holds only 1000 bytes") != std::string::npos;
  EXPECT_TRUE(named) << "the WARN does not say which buffer was too small";
  for (int i = 0; i < 50; ++i) {  // tag 9 is in no posted receive: NULL request every time
    req = nullptr;
    ASSERT_EQ(net().Isend(sc_, src_.data(), 10, 9, smh_, nullptr, &req), rrNcclSuccess);
    ASSERT_EQ(req, nullptr) << "a send with a tag no posted buffer has was taken";
  }
  void* s6 = nullptr;
  void* s5 = nullptr;
  for (size_t b = 0; b < 1000; ++b) src_[b] = Byte(1, 0, b);
  int sizes[2] = {-1, -1};
  int rdone = 0, d5 = 0, d6 = 0;
  dl = Deadline::AfterMs(ScaledMs(10000));
  while (!rdone || !d5 || !d6) {
    if (s6 == nullptr) {
      ASSERT_EQ(net().Isend(sc_, src_.data(), 0, 6, smh_, nullptr, &s6), rrNcclSuccess);
    }
    if (s5 == nullptr) {
      ASSERT_EQ(net().Isend(sc_, src_.data(), 1000, 5, smh_, nullptr, &s5), rrNcclSuccess);
    }
    if (s5 != nullptr && !d5) {
      ASSERT_EQ(net().Test(s5, &d5, nullptr), rrNcclSuccess);
    }
    if (s6 != nullptr && !d6) {
      ASSERT_EQ(net().Test(s6, &d6, nullptr), rrNcclSuccess);
    }
    if (!rdone) {
      ASSERT_EQ(net().Test(rreq, &rdone, sizes), rrNcclSuccess);
    }
    ASSERT_FALSE(dl.Expired());
  }
  EXPECT_EQ(sizes[0], 1000);
  EXPECT_EQ(sizes[1], 0);
  for (size_t b = 0; b < 1000; ++b) ASSERT_EQ(dst_[b], Byte(1, 0, b)) << b;
  for (size_t b = 8192; b < 8192 + 1000; ++b) ASSERT_EQ(dst_[b], 0xee) << "the 0-byte message wrote byte " << b;
}

// A sender configured with RERAIL_MAX_RECVS=1 does not match tags: the receiver's grouped irecv is
// refused with ncclInvalidUsage and a WARN naming the setting, never misdelivered.
TEST(ConformanceGroupedPeer, GroupedReceiveFromASenderWithoutGroupingIsAClearError) {
  ArmWatchdog(60);
  setenv("RERAIL_MAX_RECVS", "8", 1);  // this side offers 8; the peer overrides it with 1
  Pair pair;
  ASSERT_OK(pair.Open({"RERAIL_MAX_RECVS=1"}));
  ASSERT_OK(pair.Wire(0, 1));
  auto& net = pair.ep().net();
  void* rc = pair.recv_comms()[0];
  std::vector<char> buf(8192);
  void* mh = nullptr;
  ASSERT_EQ(net.RegMr(rc, buf.data(), buf.size(), RR_NCCL_PTR_HOST, &mh), rrNcclSuccess);
  void* data[2] = {buf.data(), buf.data() + 4096};
  size_t sizes[2] = {4096, 4096};
  int tags[2] = {1, 2};
  void* mhs[2] = {mh, mh};
  void* req = nullptr;
  EXPECT_EQ(net.Irecv(rc, 2, data, sizes, tags, mhs, nullptr, &req), rrNcclInvalidUsage);
  bool named = false;
  for (const auto& l : nb::LogCapture::Snapshot()) named |= l.text.find("RERAIL_MAX_RECVS") != std::string::npos;
  EXPECT_TRUE(named) << "the error does not name RERAIL_MAX_RECVS";
  EXPECT_EQ(net.DeregMr(rc, mh), rrNcclSuccess);
  ASSERT_OK(pair.CloseAll());
}

}  // namespace
}  // namespace conf
