// NCCL-proxy conformance suite, failures and bad input: a peer killed mid-message, garbage and
// truncated handles, strangers on the listen port, a send larger than the posted receive, bad RERAIL_*
// values. Each must end in an error (or a rejection) within a bound, with a message through the logger,
// never a hang, a crash or a false success.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "conformance_util.h"
#include "pattern.h"
#include "rerail/clock.h"

namespace conf {
namespace {

using nlohmann::json;
using rr::Deadline;
using rr::Status;

class ConformanceFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    ArmWatchdog(100);
    UseShortFailureBounds();
  }
  Pair pair;
};

size_t WarnCount() {
  size_t n = 0;
  for (const auto& l : nb::LogCapture::Snapshot()) n += l.level == 2;
  return n;
}

bool IsPeerGoneCode(rr::Code c) {
  return c == rr::Code::kRemoteError || c == rr::Code::kSystemError;
}

// Receives 64 MiB messages from the peer; kills it once one message arrived; then test() must fail.
TEST_F(ConformanceFaults, PeerKilledWhileReceivingGivesErrorNotHang) {
  ASSERT_OK(pair.Open());
  ASSERT_OK(pair.Wire(0, 1));
  nb::Plan p;
  p.dir = "recv", p.sizes = {64ull << 20}, p.nmsgs = 60, p.seed = 6, p.timeout_ms = 60000;
  ASSERT_OK(pair.peer().Send({{"cmd", "run"}, {"plan", p.Mirror().ToJson()}}));
  constexpr size_t kSize = 64ull << 20;
  constexpr int kWin = 2;
  std::vector<char> buf(kWin * kSize);
  auto& net = pair.ep().net();
  void* rc = pair.recv_comms()[0];
  void* mh = nullptr;
  ASSERT_EQ(net.RegMr(rc, buf.data(), buf.size(), RR_NCCL_PTR_HOST, &mh), rrNcclSuccess);
  nb::ReqQueue q(&net, rc, false, kWin);
  uint64_t next = 0, done_msgs = 0, kill_ns = 0;
  Deadline dl = Deadline::AfterMs(40000), err_dl;
  Status st;
  while (st.ok()) {
    bool posted = true;
    while (posted && !q.full()) {
      st = q.Post(&buf[(next % kWin) * kSize], kSize, 0, mh, next, &posted);
      next += posted;
    }
    bool done = false;
    nb::ReqQueue::Done d{};
    if (st.ok()) st = q.TestOldest(&done, &d);
    if (done) {  // anything reported complete must be complete and exact, before or after the kill
      ASSERT_EQ(d.size, static_cast<int>(kSize)) << "message " << d.msg;
      ASSERT_EQ(nb::Check(&buf[(d.msg % kWin) * kSize], kSize, nb::ContentSeed(p, 0, false), d.msg), kSize)
          << "false success: message " << d.msg << " reported done with wrong bytes after the peer died";
      if (++done_msgs == 1) {
        pair.peer().peer().Kill();
        pair.peer().peer().Wait(5000);
        kill_ns = rr::NowNs();
        err_dl = Deadline::AfterMs(kErrorBoundMs);
      }
    }
    ASSERT_FALSE(kill_ns == 0 && dl.Expired()) << "no message arrived before the kill";
    ASSERT_FALSE(kill_ns != 0 && st.ok() && err_dl.Expired())
        << "test() did not report an error within " << kErrorBoundMs << " ms of the peer's death (hang)";
  }
  ASSERT_NE(kill_ns, 0u) << "error before the peer was killed: " << st.ToString();
  EXPECT_TRUE(IsPeerGoneCode(st.code())) << st.ToString();
  EXPECT_GT(WarnCount(), 0u) << "the failure was not reported through the logger";
  RecordProperty("error_after_kill_ms", std::to_string((rr::NowNs() - kill_ns) / 1000000));
  EXPECT_EQ(net.CloseRecv(rc), rrNcclSuccess);
  pair.recv_comms().clear();
}

// Sends 64 MiB messages to the peer; kills it after one completed; sends posted after its death must
// never complete successfully and test() must fail within the bound.
TEST_F(ConformanceFaults, PeerKilledWhileSendingGivesErrorNotFalseSuccess) {
  ASSERT_OK(pair.Open());
  ASSERT_OK(pair.Wire(1, 0));
  nb::Plan p;
  p.dir = "send", p.sizes = {64ull << 20}, p.nmsgs = 60, p.seed = 8, p.timeout_ms = 60000;
  ASSERT_OK(pair.peer().Send({{"cmd", "run"}, {"plan", p.Mirror().ToJson()}}));
  constexpr size_t kSize = 64ull << 20;
  constexpr int kWin = 2;
  std::vector<char> buf(kWin * kSize, 0x5c);
  auto& net = pair.ep().net();
  void* sc = pair.send_comms()[0];
  void* mh = nullptr;
  ASSERT_EQ(net.RegMr(sc, buf.data(), buf.size(), RR_NCCL_PTR_HOST, &mh), rrNcclSuccess);
  nb::ReqQueue q(&net, sc, true, kWin);
  uint64_t next = 0, first_after_kill = UINT64_MAX, kill_ns = 0;
  Deadline dl = Deadline::AfterMs(40000), err_dl;
  Status st;
  while (st.ok()) {
    bool posted = true;
    while (st.ok() && posted && !q.full()) {
      st = q.Post(&buf[(next % kWin) * kSize], kSize, 0, mh, next, &posted);
      if (posted && kill_ns != 0 && first_after_kill == UINT64_MAX) first_after_kill = next;
      next += posted;
    }
    bool done = false;
    nb::ReqQueue::Done d{};
    if (st.ok()) st = q.TestOldest(&done, &d);
    if (done && kill_ns == 0) {
      pair.peer().peer().Kill();
      pair.peer().peer().Wait(5000);  // reaped: its sockets are closed before we post again
      kill_ns = rr::NowNs();
      err_dl = Deadline::AfterMs(kErrorBoundMs);
    }
    ASSERT_FALSE(done && d.msg >= first_after_kill)
        << "false success: send " << d.msg << " posted after the peer died was reported done";
    ASSERT_FALSE(kill_ns == 0 && dl.Expired()) << "no send completed before the kill";
    ASSERT_FALSE(kill_ns != 0 && st.ok() && err_dl.Expired())
        << "test() did not report an error within " << kErrorBoundMs << " ms of the peer's death (hang)";
  }
  ASSERT_NE(kill_ns, 0u) << "error before the peer was killed: " << st.ToString();
  EXPECT_TRUE(IsPeerGoneCode(st.code())) << st.ToString();
  EXPECT_GT(WarnCount(), 0u) << "the failure was not reported through the logger";
  EXPECT_EQ(net.CloseSend(sc), rrNcclSuccess);
  pair.send_comms().clear();
}

// NCCL's receive proxy posts irecv only when the GPU freed the slot and makes no plugin call on an
// idle comm meanwhile; a sender may wait seconds (longer than any stall or give-up bound) without
// that being a failure. Both orders: receiver late, then sender late.
TEST_F(ConformanceFaults, LatePostingIsNotAFailure) {
  ASSERT_OK(pair.Open());
  ASSERT_OK(pair.Wire(1, 1));
  const uint64_t late_ms = kGiveupMs + 1500;
  nb::Plan p;
  p.dir = "send", p.sizes = {64ull << 20, 1}, p.nmsgs = 4, p.seed = 21;
  nb::Plan peer_late = p.Mirror();
  peer_late.delay_ms = late_ms;  // the peer receives late
  json r;
  ASSERT_OK(pair.peer().Send({{"cmd", "run"}, {"plan", peer_late.ToJson()}}));
  nb::PlanResult res;
  Status s = nb::RunPlan(pair.ep().net(), p, pair.send_comms(), pair.recv_comms(), &res);
  Status pr = pair.peer().Reply(&r, 60000);
  ASSERT_OK(s) << "sender, with the receiver " << late_ms << " ms late";
  ASSERT_OK(pr) << "receiver that posted " << late_ms << " ms late";
  p.delay_ms = late_ms;  // this side sends late; the peer has its receives posted and polls
  p.dir = "send";
  ASSERT_OK(pair.Run(p)) << "sender " << late_ms << " ms late";
  ASSERT_OK(pair.CloseAll());
}

// A receiver whose proxy thread is descheduled for seconds (oversubscribed host) while a message is in
// flight is slow, not dead: the message must still arrive intact and no error may reach NCCL. Runs with
// the plugin's default bounds (this case does not shorten them).
TEST(ConformanceSlowPeer, ReceiverStalledMidMessageIsNotAFailure) {
  ArmWatchdog(100);
  Pair pair;
  ASSERT_OK(pair.Open());
  ASSERT_OK(pair.Wire(0, 1));
  constexpr size_t kSize = 64ull << 20;
  nb::Plan p;
  p.dir = "recv", p.sizes = {kSize}, p.nmsgs = 1, p.seed = 55;
  ASSERT_OK(pair.peer().Send({{"cmd", "run"}, {"plan", p.Mirror().ToJson()}}));
  auto& net = pair.ep().net();
  void* rc = pair.recv_comms()[0];
  std::vector<char> buf(kSize);
  void* mh = nullptr;
  ASSERT_EQ(net.RegMr(rc, buf.data(), buf.size(), RR_NCCL_PTR_HOST, &mh), rrNcclSuccess);
  nb::ReqQueue q(&net, rc, false, 1);
  Deadline dl = Deadline::AfterMs(60000);
  for (bool posted = false; !posted;) {
    ASSERT_OK(q.Post(buf.data(), kSize, 0, mh, 0, &posted));
    ASSERT_FALSE(dl.Expired());
  }
  bool done = false;
  nb::ReqQueue::Done d{};
  ASSERT_OK(q.TestOldest(&done, &d));
  usleep(3000 * 1000);  // no plugin call for 3 s while the sender has the message in flight
  while (!done) {
    ASSERT_OK(q.TestOldest(&done, &d)) << "a slow receiver was treated as a failure";
    ASSERT_FALSE(dl.Expired()) << "the message never completed after the receiver resumed";
  }
  EXPECT_EQ(d.size, static_cast<int>(kSize));
  EXPECT_EQ(nb::Check(buf.data(), kSize, nb::ContentSeed(p, 0, false), 0), kSize);
  json r;
  ASSERT_OK(pair.peer().Reply(&r, 30000)) << "the sender saw an error";
  EXPECT_EQ(net.DeregMr(rc, mh), rrNcclSuccess);
  // The handle is gone: a second deregMr is an error, found without reading the freed handle.
  EXPECT_NE(net.DeregMr(rc, mh), rrNcclSuccess) << "a second deregMr of the same handle succeeded";
  ASSERT_OK(pair.CloseAll());
}

// The receiver's own check, against a sender that does not match tags (RERAIL_MAX_RECVS=1); a grouped
// sender refuses such a send itself (ConformanceGrouped.SendLargerThanItsBufferIsRefused...).
TEST_F(ConformanceFaults, SendLargerThanPostedReceiveIsAnError) {
  ASSERT_OK(pair.Open({"RERAIL_MAX_RECVS=1"}));
  ASSERT_OK(pair.Wire(0, 1));
  nb::Plan p;
  p.dir = "recv", p.sizes = {8192}, p.nmsgs = 1, p.timeout_ms = 8000;
  ASSERT_OK(pair.peer().Send({{"cmd", "run"}, {"plan", p.Mirror().ToJson()}}));
  auto& net = pair.ep().net();
  void* rc = pair.recv_comms()[0];
  std::vector<char> buf(4096);
  void* mh = nullptr;
  ASSERT_EQ(net.RegMr(rc, buf.data(), buf.size(), RR_NCCL_PTR_HOST, &mh), rrNcclSuccess);
  nb::ReqQueue q(&net, rc, false, 1);
  size_t warns0 = WarnCount();
  Deadline dl = Deadline::AfterMs(kErrorBoundMs);
  // The error may come from irecv (the message is already there) or from a later test().
  Status st;
  for (bool posted = false; st.ok() && !posted;) {
    st = q.Post(buf.data(), buf.size(), 0, mh, 0, &posted);
    ASSERT_FALSE(st.ok() == true && !posted && dl.Expired()) << "irecv never accepted";
  }
  for (bool done = false; st.ok();) {
    nb::ReqQueue::Done d{};
    st = q.TestOldest(&done, &d);
    ASSERT_FALSE(done) << "an 8192-byte send into a 4096-byte receive was reported done (size " << d.size
                       << ")";
    ASSERT_FALSE(st.ok() && dl.Expired()) << "no error within " << kErrorBoundMs << " ms";
  }
  fprintf(stderr, "oversized send -> %s\n", st.ToString().c_str());
  EXPECT_GT(WarnCount(), warns0) << "no WARN explains the oversized message";
  (void)net.CloseRecv(rc);
  pair.recv_comms().clear();
}

TEST_F(ConformanceFaults, IflushOnHostMemoryCompletes) {
  ASSERT_OK(pair.Open());
  ASSERT_OK(pair.Wire(0, 1));
  nb::Plan p = nb::Plan();
  p.dir = "recv", p.sizes = {65536}, p.nmsgs = 1;
  ASSERT_OK(pair.Run(p));
  auto& net = pair.ep().net();
  std::vector<char> buf(65536);
  void* mh = nullptr;
  void* rc = pair.recv_comms()[0];
  ASSERT_EQ(net.RegMr(rc, buf.data(), buf.size(), RR_NCCL_PTR_HOST, &mh), rrNcclSuccess);
  void* data = buf.data();
  int size = 65536;
  void* req = nullptr;
  ASSERT_EQ(net.Iflush(rc, 1, &data, &size, &mh, &req), rrNcclSuccess);
  Deadline dl = Deadline::AfterMs(10000);
  for (int done = 0; req != nullptr && !done;) {  // NULL request = nothing to wait for
    ASSERT_EQ(net.Test(req, &done, nullptr), rrNcclSuccess);
    ASSERT_FALSE(dl.Expired()) << "iflush on host memory never completed";
  }
  EXPECT_EQ(net.DeregMr(rc, mh), rrNcclSuccess);
  ASSERT_OK(pair.CloseAll());
}

// NCCL never groups more receives than maxRecvs; if a caller does, the plugin must refuse cleanly.
TEST_F(ConformanceFaults, GroupedReceiveBeyondMaxRecvsIsRefused) {
  ASSERT_OK(pair.Open());
  rrNcclNetProperties_v12_t props;
  ASSERT_EQ(pair.ep().net().GetProperties(0, &props), rrNcclSuccess);
  ASSERT_OK(pair.Wire(0, 1));
  auto& net = pair.ep().net();
  void* rc = pair.recv_comms()[0];
  int n = props.maxRecvs + 1;
  std::vector<char> buf(4096 * n);
  void* mh = nullptr;
  ASSERT_EQ(net.RegMr(rc, buf.data(), buf.size(), RR_NCCL_PTR_HOST, &mh), rrNcclSuccess);
  std::vector<void*> data(n), mhs(n, mh);
  std::vector<size_t> sizes(n, 4096);
  std::vector<int> tags(n, 0);
  for (int i = 0; i < n; ++i) data[i] = &buf[4096 * i];
  void* req = nullptr;
  size_t warns0 = WarnCount();
  rrNcclResult_t r = net.Irecv(rc, n, data.data(), sizes.data(), tags.data(), mhs.data(), nullptr, &req);
  EXPECT_NE(r, rrNcclSuccess) << "irecv with n=" << n << " > maxRecvs=" << props.maxRecvs << " was accepted";
  EXPECT_GT(WarnCount(), warns0) << "the refusal was not explained through the logger";
  EXPECT_EQ(net.DeregMr(rc, mh), rrNcclSuccess);
  ASSERT_OK(pair.CloseAll());
}

struct BadValue {
  const char* env;
  const char* name;
  const char* value;
};

TEST_F(ConformanceFaults, BadRerailValueFailsInitWithInvalidUsage) {
  for (BadValue b : {BadValue{"RERAIL_TCP_STREAMS=abc", "TCP_STREAMS", "abc"},
                     BadValue{"RERAIL_TCP_STREAMS=0", "TCP_STREAMS", "0"},
                     BadValue{"RERAIL_CHUNK_SIZE=12x", "CHUNK_SIZE", "12x"},
                     BadValue{"RERAIL_POLICY=sideways", "POLICY", "sideways"}}) {
    nb::PeerClient peer;
    ASSERT_OK(peer.Spawn(PeerExe(), {}, {b.env}));
    json r;
    Status st = peer.Call({{"cmd", "open"}, {"plugin", PluginPath()}, {"dev", 0}}, &r, 30000);
    EXPECT_EQ(st.code(), rr::Code::kInvalidUsage) << b.env << ": " << st.ToString();
    bool named = false;
    for (const auto& w : r.value("warns", json::array())) {
      std::string t = w.get<std::string>();
      named = named || (t.find(b.name) != std::string::npos && t.find(b.value) != std::string::npos);
    }
    EXPECT_TRUE(named) << b.env << ": no WARN names the variable and its bad value; got " << r.dump();
    (void)peer.Call({{"cmd", "exit"}}, &r, 5000);
  }
}

TEST_F(ConformanceFaults, InterfaceFilterMatchingNothingIsReported) {
  nb::PeerClient peer;
  ASSERT_OK(peer.Spawn(PeerExe(), {}, {"RERAIL_TCP_IFNAME==rrconf-none0"}));
  json r;
  Status st = peer.Call({{"cmd", "open"}, {"plugin", PluginPath()}, {"dev", 0}}, &r, 30000);
  // Either init fails or devices() reports none; never a device that is not there.
  EXPECT_FALSE(st.ok()) << "a device was reported for a filter that matches no interface";
  EXPECT_NE(r.dump().find("rrconf-none0"), std::string::npos) << "no WARN names the filter: " << r.dump();
  (void)peer.Call({{"cmd", "exit"}}, &r, 5000);
}

}  // namespace
}  // namespace conf
