// NCCL-proxy conformance suite, data path: two real processes load the plugin and drive it exactly as
// NCCL's proxy does (reference §3). Every byte received is checked against content that depends on
// the comm, the message index and the byte offset.
#include <cstring>
#include <set>
#include <thread>

#include "rerail/clock.h"

#include "conformance_util.h"
#include "pattern.h"

namespace conf {
namespace {

using nlohmann::json;

class Conformance : public ::testing::Test {
 protected:
  void SetUp() override { ArmWatchdog(110); }
  Pair pair;
};

nb::Plan Both(std::vector<uint64_t> sizes, uint64_t nmsgs) {
  nb::Plan p;
  p.dir = "both", p.sizes = std::move(sizes), p.nmsgs = nmsgs;
  return p;
}

// The checker itself must catch what the suite claims to catch: a wrong byte anywhere, a message of
// another iteration, another comm's content, bytes shifted by one.
TEST(ConformanceHarness, ContentCheckCatchesCorruption) {
  std::vector<char> a(65537 + 8);
  for (size_t size : {size_t{1}, size_t{7}, size_t{4096}, size_t{65537}}) {
    nb::Fill(a.data(), size, 11, 3);
    ASSERT_EQ(nb::Check(a.data(), size, 11, 3), size);
    EXPECT_NE(nb::Check(a.data(), size, 11, 4), size) << "iteration mix-up not caught, size " << size;
    EXPECT_NE(nb::Check(a.data(), size, 12, 3), size) << "stream mix-up not caught, size " << size;
    if (size > 8) {
      EXPECT_NE(nb::Check(a.data() + 1, size - 1, 11, 3), size - 1) << "offset shift not caught";
    }
    for (size_t off : {size_t{0}, size / 2, size - 1}) {
      a[off] ^= 0x10;
      EXPECT_EQ(nb::Check(a.data(), size, 11, 3), off) << "flipped byte not located, size " << size;
      a[off] ^= 0x10;
    }
  }
}

TEST_F(Conformance, PropertiesFollowTheReference) {
  ASSERT_OK(pair.Open());
  auto& net = pair.ep().net();
  std::set<std::string> names;
  for (int d = 0; d < pair.ep().ndev(); ++d) {
    rrNcclNetProperties_v12_t p;
    ASSERT_EQ(net.GetProperties(d, &p), rrNcclSuccess);
    ASSERT_NE(p.name, nullptr);
    EXPECT_GT(strlen(p.name), 0u);
    EXPECT_TRUE(names.insert(p.name).second) << "device name " << p.name << " is not unique";
    EXPECT_TRUE(p.ptrSupport & RR_NCCL_PTR_HOST);
    EXPECT_GE(p.maxComms, 1);
    EXPECT_GE(p.maxRecvs, 1);
    EXPECT_EQ(p.netDeviceType, RR_NCCL_NET_DEVICE_HOST);
    EXPECT_EQ(p.netDeviceVersion, 0);
    EXPECT_EQ(p.vProps.ndevs, 1);
    EXPECT_EQ(p.vProps.devs[0], d);
    EXPECT_GT(p.maxP2pBytes, 0u);
    EXPECT_LE(p.maxP2pBytes, RR_NCCL_MAX_NET_SIZE_BYTES);
    EXPECT_GE(p.maxMultiRequestSize, 1);
    EXPECT_GE(p.latency, 0.0f);
  }
  rrNcclNetProperties_v12_t bad;
  EXPECT_NE(net.GetProperties(pair.ep().ndev(), &bad), rrNcclSuccess)
      << "getProperties on a device index past devices() must fail";
  EXPECT_NE(net.GetProperties(-1, &bad), rrNcclSuccess) << "getProperties(-1) must fail";
}

TEST_F(Conformance, SizesAreByteExactBothWays) {
  ASSERT_OK(pair.Open());
  ASSERT_OK(pair.Wire(1, 1));
  // Each size alone, several iterations (content differs per iteration), both directions at once.
  for (uint64_t size :
       {0ull, 1ull, 7ull, 4095ull, 4096ull, 65537ull, 1ull << 20, 64ull << 20, 256ull << 20}) {
    nb::Plan p = Both({size}, size >= (64ull << 20) ? 2 : 5);
    p.seed = 100 + size;
    ASSERT_OK(pair.Run(p)) << "size " << size;
  }
  // Buffers not aligned to anything inside the registered region.
  nb::Plan p = Both({1, 7, 4095, 65537, 1 << 20}, 10);
  p.offset = 3, p.seed = 7;
  ASSERT_OK(pair.Run(p)) << "misaligned buffers";
  ASSERT_OK(pair.CloseAll());
}

TEST_F(Conformance, LargerReceiveBufferReportsSentSize) {
  ASSERT_OK(pair.Open());
  ASSERT_OK(pair.Wire(1, 1));
  nb::Plan p = Both({0, 1, 7, 4095, 4096, 65537, 1 << 20}, 14);
  p.cap_extra = 4096 + 13;  // receive capacity > message; bytes past the message must stay untouched
  ASSERT_OK(pair.Run(p));
  p.preset = 1;  // *request = 0x1 (NCCL's optional-completion hint) before irecv
  ASSERT_OK(pair.Run(p)) << "with the 0x1 hint";
  p.preset = 2;  // a stale request value before irecv must be ignored
  ASSERT_OK(pair.Run(p)) << "with a stale request value";
  p.null_sizes = true, p.preset = 0;  // NCCL passes sizes == NULL in some tests
  ASSERT_OK(pair.Run(p)) << "with sizes == NULL";
  ASSERT_OK(pair.CloseAll());
}

TEST_F(Conformance, ThousandRandomSizesInOrder) {
  ASSERT_OK(pair.Open());
  ASSERT_OK(pair.Wire(1, 1));
  nb::Plan p;
  p.dir = "both", p.nmsgs = 1000, p.rand_max = 300000, p.seed = 4242, p.window = 8;
  nb::PlanResult res;
  ASSERT_OK(pair.Run(p, &res));
  EXPECT_EQ(res.messages, 2000u);
  ASSERT_OK(pair.CloseAll());
}

TEST_F(Conformance, FullWindowInBothDirectionsAtOnce) {
  ASSERT_OK(pair.Open());
  ASSERT_OK(pair.Wire(1, 1));
  // The peer keeps 8 sends and 8 receives in flight; so does this side, posting all 16 before the
  // first test() (the proxy posts a whole window before the oldest completes).
  constexpr int kWin = 8;
  constexpr size_t kSize = 1 << 20;
  nb::Plan p = Both({kSize}, kWin);
  p.seed = 99;
  ASSERT_OK(pair.peer().Send({{"cmd", "run"}, {"plan", p.Mirror().ToJson()}}));
  auto& net = pair.ep().net();
  std::vector<char> sbuf(kWin * kSize), rbuf(kWin * kSize);
  void *smh = nullptr, *rmh = nullptr;
  void* sc = pair.send_comms()[0];
  void* rc = pair.recv_comms()[0];
  ASSERT_EQ(net.RegMr(sc, sbuf.data(), sbuf.size(), RR_NCCL_PTR_HOST, &smh), rrNcclSuccess);
  ASSERT_EQ(net.RegMr(rc, rbuf.data(), rbuf.size(), RR_NCCL_PTR_HOST, &rmh), rrNcclSuccess);
  nb::ReqQueue sq(&net, sc, true, kWin), rq(&net, rc, false, kWin);
  rr::Deadline dl = rr::Deadline::AfterMs(30000);
  for (int m = 0; m < kWin; ++m) nb::Fill(&sbuf[m * kSize], kSize, nb::ContentSeed(p, 0, true), m);
  while (sq.outstanding() + rq.outstanding() < 2 * kWin) {  // post everything, retrying NULL requests
    int m = static_cast<int>(rq.outstanding());
    bool posted = false;
    if (m < kWin) {
      ASSERT_OK(rq.Post(&rbuf[m * kSize], kSize, 0, rmh, m, &posted));
    }
    m = static_cast<int>(sq.outstanding());
    if (m < kWin) {
      ASSERT_OK(sq.Post(&sbuf[m * kSize], kSize, 0, smh, m, &posted));
    }
    ASSERT_FALSE(dl.Expired()) << "plugin refused to take a full window of 8 each way";
  }
  int sdone = 0, rdone = 0;
  while (sdone < kWin || rdone < kWin) {
    bool done = false;
    nb::ReqQueue::Done d{};
    ASSERT_OK(sq.TestOldest(&done, &d));
    sdone += done;
    ASSERT_OK(rq.TestOldest(&done, &d));
    if (done) {
      EXPECT_EQ(d.size, static_cast<int>(kSize));
      EXPECT_EQ(nb::Check(&rbuf[d.msg * kSize], kSize, nb::ContentSeed(p, 0, false), d.msg), kSize)
          << "message " << d.msg;
      ++rdone;
    }
    ASSERT_FALSE(dl.Expired()) << "window did not drain: " << sdone << " sends, " << rdone << " recvs done";
  }
  json r;
  ASSERT_OK(pair.peer().Reply(&r, 30000));
  EXPECT_EQ(net.DeregMr(sc, smh), rrNcclSuccess);
  EXPECT_EQ(net.DeregMr(rc, rmh), rrNcclSuccess);
  // NCCL_NET_MAX_REQUESTS: a comm must take up to 32 in flight (NULL-request retry is allowed).
  nb::Plan p32 = Both({4096, 1, 65537}, 96);
  p32.window = 32;
  ASSERT_OK(pair.Run(p32)) << "window of 32";
  ASSERT_OK(pair.CloseAll());
}

TEST_F(Conformance, ManyCommsInterleavedOnOneProgressThread) {
  ASSERT_OK(pair.Open());
  constexpr int kComms = 12;
  ASSERT_OK(pair.Wire(kComms, kComms));
  nb::Plan p;
  p.dir = "both", p.nmsgs = 40, p.rand_max = 70000, p.seed = 5150;
  p.comms.clear();
  for (int c = 0; c < kComms; ++c) p.comms.push_back(c);
  nb::PlanResult res;
  ASSERT_OK(pair.Run(p, &res));
  EXPECT_EQ(res.messages, 2u * kComms * 40);
  ASSERT_OK(pair.CloseAll());
}

TEST_F(Conformance, CloseAndReconnect) {
  ASSERT_OK(pair.Open());
  int fds0 = nb::CountOpenFds(), threads0 = nb::CountThreads();
  for (int round = 0; round < 8; ++round) {
    ASSERT_OK(pair.Wire(1, 1)) << "round " << round;
    nb::Plan p = Both({1, 65537, 4096}, 6);
    p.seed = 1000 + round;
    ASSERT_OK(pair.Run(p)) << "round " << round;
    ASSERT_OK(pair.CloseAll()) << "round " << round;
    EXPECT_EQ(nb::CountOpenFds(), fds0) << "descriptors leaked by round " << round;
  }
  // Threads may linger briefly after close; finalize (below, in other cases) must join them.
  EXPECT_LE(nb::CountThreads(), threads0 + 2);
}

TEST_F(Conformance, DescriptorsAndThreadsBackAfterCloseAndFinalize) {
  int fds_before = nb::CountOpenFds(), threads_before = nb::CountThreads();
  {
    ASSERT_OK(pair.Open());
    ASSERT_OK(pair.Wire(3, 3));
    nb::Plan p = Both({4096, 1 << 20}, 8);
    p.comms = {0, 1, 2};
    ASSERT_OK(pair.Run(p));
    ASSERT_OK(pair.CloseAll());
    json r;
    ASSERT_OK(pair.peer().Call({{"cmd", "finalize"}}, &r, 30000));
    ASSERT_OK(pair.ep().Finalize());
  }
  // The peer's channel is one descriptor of ours; the plugin's must all be gone.
  EXPECT_EQ(nb::CountOpenFds(), fds_before + 1) << "plugin descriptors leaked after close + finalize";
  EXPECT_EQ(nb::CountThreads(), threads_before) << "plugin threads still running after finalize";
}

TEST_F(Conformance, SetupOnServiceThreadWhileTrafficOnProgressThread) {
  ASSERT_OK(pair.Open());
  ASSERT_OK(pair.Wire(1, 1));
  // Progress thread: a long stream on comm 0 both ways; the peer runs it on its own second thread.
  nb::Plan p;
  p.dir = "both", p.nmsgs = 3000, p.rand_max = 65536, p.seed = 31337;
  json r;
  ASSERT_OK(pair.peer().Call({{"cmd", "run_async"}, {"plan", p.Mirror().ToJson()}}, &r, 30000));
  std::vector<void*> sc0 = pair.send_comms(), rc0 = pair.recv_comms();
  rr::Status traffic;
  std::thread progress([&] {
    nb::PlanResult res;
    traffic = nb::RunPlan(pair.ep().net(), p, sc0, rc0, &res);
  });
  // Service thread (this one): meanwhile set up 6 more connections each way and register memory,
  // while both processes' progress threads are busy.
  rr::Status setup = pair.Wire(6, 6);
  std::vector<char> scratch(1 << 16);
  for (size_t i = 1; setup.ok() && i < pair.send_comms().size(); ++i) {
    void* mh = nullptr;
    setup = nb::FromNccl(
        pair.ep().net().RegMr(pair.send_comms()[i], scratch.data(), scratch.size(), RR_NCCL_PTR_HOST, &mh),
        "regMr during traffic");
    if (setup.ok()) setup = nb::FromNccl(pair.ep().net().DeregMr(pair.send_comms()[i], mh), "deregMr");
  }
  progress.join();
  ASSERT_OK(setup);
  ASSERT_OK(traffic);
  ASSERT_OK(pair.peer().Call({{"cmd", "wait"}}, &r, 60000));
  // The connections made during traffic carry data too.
  nb::Plan q = Both({1, 4096, 70000}, 9);
  q.comms = {1, 2, 3, 4, 5, 6};
  ASSERT_OK(pair.Run(q));
  ASSERT_OK(pair.CloseAll());
}

}  // namespace
}  // namespace conf
