// rerail's verbs objects (IbDevice, IbCq, IbMr, IbQp) against a real verbs stack: run inside the rxe
// guest (tests/functional/ib_rxe.cmake, scripts/rxe-guest.sh), two RC QPs on the first discovered port
// connected to each other. What the data path of issue 12 relies on:
//   * RDMA WRITEs land at the remote offset, and a WRITE_WITH_IMM after them completes at the receiver
//     (consuming one posted receive) with the immediate, the plain writes' bytes already in place;
//   * inline writes, RDMA READ back;
//   * a bad rkey: REM_ACCESS_ERR, the QP is in ERR, later WRs flush; Reset + Connect revives it (failback);
//   * a peer QP moved to ERR drops what arrives: the writer gets RETRY_EXC_ERR after timeout x retries;
//   * the async-event thread reports PORT_ERR / PORT_ACTIVE when the port's netdev goes down / up, a
//     write posted while the port is down completes in error, and the QPs reconnect after the heal;
//   * MrCache: one regMr registers the buffers on every rail (rxe0, rxe1); writes on each rail's QPs
//     use that rail's keys from the one handle;
//   * figures (printed, not asserted): write bandwidth, time to RETRY_EXC_ERR, event and error latency.
// Without a device (this host's kernel has no RDMA) every test is skipped. The same tests run on the
// host over the fake libibverbs (tests/fakeverbs, ctest ib_fake_verbs_rc): there the port is taken
// down through the fake's control API instead of `ip link`.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "rerail/clock.h"
#include "rerail/params.h"
#include "transports/ib/ib_device.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_events.h"
#include "transports/ib/ib_mr_cache.h"
#include "transports/ib/ib_qp.h"

namespace {

using namespace rr::ib;
using Clock = std::chrono::steady_clock;

constexpr size_t kBuf = 8 << 20;
constexpr int kAccess = vx::kAccessLocalWrite | vx::kAccessRemoteWrite | vx::kAccessRemoteRead;

// "fake" over tests/fakeverbs, "rxe" over the guest's kernel stack: the figures say which.
const char* Stack() {
  const VerbsLib& lib = VerbsLib::Default();
  return lib.path().find("fakeverbs") != std::string::npos ? "fake" : "rxe";
}

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

class VerbsRc : public ::testing::Test {
 protected:
  void SetUp() override { Build(QpOptions()); }

  void Build(const QpOptions& opt) {
    qa_.reset(), qb_.reset(), ma_.reset(), mb_.reset(), mc_.reset(), ca_.reset(), cb_.reset(), dev_.reset();
    ASSERT_TRUE(rr::Params::Load().ok());
    const VerbsLib& lib = VerbsLib::Default();
    IbOptions o;
    ASSERT_TRUE(IbOptions::FromParams(&o).ok());
    IbDiscovery d;
    ASSERT_TRUE(DiscoverIb(lib, o, &d).ok());
    if (d.ports.empty()) GTEST_SKIP() << "no IB/RoCE port: " << d.why;
    ASSERT_TRUE(IbDevice::Open(lib, d.ports[0], &dev_).ok());
    ASSERT_TRUE(IbCq::Create(*dev_, 256, &ca_).ok());
    ASSERT_TRUE(IbCq::Create(*dev_, 256, &cb_).ok());
    ASSERT_TRUE(IbQp::Create(*dev_, *ca_, *ca_, opt, &qa_).ok());
    ASSERT_TRUE(IbQp::Create(*dev_, *cb_, *cb_, opt, &qb_).ok());
    Connect();
    a_.assign(kBuf, 0), b_.assign(kBuf, 0), c_.assign(kBuf, 0);
    for (size_t i = 0; i < kBuf; ++i) a_[i] = static_cast<uint8_t>(i * 7 + (i >> 13));
    ASSERT_TRUE(IbMr::Register(*dev_, a_.data(), kBuf, kAccess, &ma_).ok());
    ASSERT_TRUE(IbMr::Register(*dev_, b_.data(), kBuf, kAccess, &mb_).ok());
    ASSERT_TRUE(IbMr::Register(*dev_, c_.data(), kBuf, kAccess, &mc_).ok());
  }

  void Connect() {
    QpEndpoint ea = qa_->Endpoint(), eb = qb_->Endpoint();
    rr::Status s = qa_->Connect(eb);
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = qb_->Connect(ea);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(qa_->QueryState(), vx::kQpsRts);
  }

  // Waits for n completions on cq (bounded); fails the test on timeout.
  std::vector<vx::Wc> Wait(IbCq& cq, int n, int timeout_ms = 10000) {
    std::vector<vx::Wc> out;
    auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (static_cast<int>(out.size()) < n && Clock::now() < end) {
      vx::Wc wc[16];
      int got = 0;
      rr::Status s = cq.Poll(16, wc, &got);
      EXPECT_TRUE(s.ok()) << s.ToString();
      out.insert(out.end(), wc, wc + got);
      if (got == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    EXPECT_EQ(static_cast<int>(out.size()), n) << "completions within " << timeout_ms << " ms";
    return out;
  }

  uint64_t A(size_t off) const { return reinterpret_cast<uint64_t>(a_.data() + off); }
  uint64_t B(size_t off) const { return reinterpret_cast<uint64_t>(b_.data() + off); }

  std::unique_ptr<IbDevice> dev_;
  std::unique_ptr<IbCq> ca_, cb_;
  std::unique_ptr<IbQp> qa_, qb_;
  std::vector<uint8_t> a_, b_, c_;
  std::unique_ptr<IbMr> ma_, mb_, mc_;
};

TEST_F(VerbsRc, WritesLandThenImmediateCompletes) {
  const uint32_t len = (1 << 20) + 3, tail = 4096;
  ASSERT_TRUE(qb_->PostRecv(77).ok());
  // The bulk as plain unsignalled writes at offset 100, then the tail with the immediate.
  ASSERT_TRUE(qa_->PostWrite(1, a_.data(), len, ma_->lkey(), B(100), mb_->rkey(), false, 0, false).ok());
  ASSERT_TRUE(qa_->PostWrite(2, a_.data() + len, tail, ma_->lkey(), B(100 + len), mb_->rkey(), true, 0xC0FFEE, true).ok());
  auto sa = Wait(*ca_, 1);
  ASSERT_EQ(sa.size(), 1u);
  EXPECT_EQ(sa[0].status, vx::kWcSuccess) << WcStatusName(dev_->lib(), sa[0].status);
  EXPECT_EQ(sa[0].wr_id, 2u);
  EXPECT_EQ(sa[0].opcode, vx::kWcRdmaWrite);
  auto rb = Wait(*cb_, 1);
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(rb[0].status, vx::kWcSuccess) << WcStatusName(dev_->lib(), rb[0].status);
  EXPECT_EQ(rb[0].opcode, vx::kWcRecvRdmaWithImm);
  EXPECT_EQ(rb[0].wr_id, 77u);
  EXPECT_TRUE(rb[0].wc_flags & vx::kWcWithImm);
  EXPECT_EQ(ntohl(rb[0].imm_data), 0xC0FFEEu);
  EXPECT_EQ(rb[0].byte_len, tail);
  EXPECT_EQ(rb[0].qp_num, qb_->qpn());
  EXPECT_EQ(memcmp(b_.data() + 100, a_.data(), len + tail), 0) << "bytes landed at the offset, before the immediate";
  EXPECT_EQ(b_[99], 0);
  EXPECT_EQ(b_[100 + len + tail], 0);
}

TEST_F(VerbsRc, InlineWriteAndReadBack) {
  uint8_t small[48];
  for (int i = 0; i < 48; ++i) small[i] = static_cast<uint8_t>(0xA0 + i);
  ASSERT_TRUE(qa_->PostWrite(5, small, sizeof(small), 0, B(4096), mb_->rkey(), false, 0, true, /*inline*/ true).ok());
  memset(small, 0, sizeof(small));  // inline: copied at post time
  auto s = Wait(*ca_, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, vx::kWcSuccess) << WcStatusName(dev_->lib(), s[0].status);
  for (int i = 0; i < 48; ++i) ASSERT_EQ(b_[4096 + i], 0xA0 + i) << i;
  // RDMA READ (the flush and landed-data probes): b's bytes into c.
  ASSERT_TRUE(qa_->PostRead(6, c_.data(), 48, mc_->lkey(), B(4096), mb_->rkey()).ok());
  s = Wait(*ca_, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, vx::kWcSuccess);
  EXPECT_EQ(s[0].opcode, vx::kWcRdmaRead);
  EXPECT_EQ(memcmp(c_.data(), b_.data() + 4096, 48), 0);
}

TEST_F(VerbsRc, BadRkeyErrorsFlushesAndResetRevives) {
  ASSERT_TRUE(qa_->PostWrite(9, a_.data(), 4096, ma_->lkey(), B(0), mb_->rkey() ^ 0x5a5a00, false, 0, true).ok());
  auto s = Wait(*ca_, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, vx::kWcRemAccessErr) << WcStatusName(dev_->lib(), s[0].status);
  EXPECT_EQ(s[0].wr_id, 9u);
  EXPECT_EQ(qa_->QueryState(), vx::kQpsErr);
  // Later WRs on the failed QP flush (unsignalled ones too) or are refused at post time.
  rr::Status p = qa_->PostWrite(10, a_.data(), 64, ma_->lkey(), B(0), mb_->rkey(), false, 0, false);
  if (p.ok()) {
    auto f = Wait(*ca_, 1);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f[0].status, vx::kWcWrFlushErr) << WcStatusName(dev_->lib(), f[0].status);
    EXPECT_EQ(f[0].wr_id, 10u);
  }
  EXPECT_EQ(b_[0], 0) << "nothing landed through the bad key";
  // Failback: both ends back to RESET and connected again with new PSNs.
  ASSERT_TRUE(qa_->Reset().ok());
  ASSERT_TRUE(qb_->Reset().ok());
  int n = 0;
  vx::Wc junk[16];
  ASSERT_TRUE(cb_->Poll(16, junk, &n).ok());  // b may have seen the access error's flush
  Connect();
  ASSERT_TRUE(qb_->PostRecv(11).ok());
  ASSERT_TRUE(qa_->PostWrite(12, a_.data(), 8192, ma_->lkey(), B(0), mb_->rkey(), true, 42, true).ok());
  s = Wait(*ca_, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, vx::kWcSuccess) << WcStatusName(dev_->lib(), s[0].status);
  auto r = Wait(*cb_, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(ntohl(r[0].imm_data), 42u);
  EXPECT_EQ(memcmp(b_.data(), a_.data(), 8192), 0);
}

TEST_F(VerbsRc, PeerInErrorGivesRetryExceeded) {
  QpOptions opt;
  opt.timeout = 14;  // 4.096 us x 2^14 = 67 ms per try
  opt.retry_cnt = 3;
  Build(opt);
  ASSERT_TRUE(qb_->PostRecv(1).ok());
  ASSERT_TRUE(qb_->PostRecv(2).ok());
  ASSERT_TRUE(qb_->ToError().ok());
  auto f = Wait(*cb_, 2);  // posted receives flush
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].status, vx::kWcWrFlushErr);
  auto t0 = Clock::now();
  ASSERT_TRUE(qa_->PostWrite(3, a_.data(), 4096, ma_->lkey(), B(0), mb_->rkey(), true, 1, true).ok());
  auto s = Wait(*ca_, 1, 20000);
  auto t1 = Clock::now();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, vx::kWcRetryExcErr) << WcStatusName(dev_->lib(), s[0].status);
  std::printf("FIGURE %s RETRY_EXC_ERR after %.0f ms (timeout 14 = 67 ms/try, retry_cnt 3)\n", Stack(), Ms(t0, t1));
  EXPECT_EQ(b_[0], 0) << "nothing landed in a QP in ERR";
}

// Events as the monitor thread delivers them.
class EventLog {
 public:
  void Add(const IbEvent& e) {
    std::lock_guard<std::mutex> g(mu_);
    ev_.push_back(e);
  }
  // The first event of `kind` on `port`, waiting up to timeout_ms; false if none came.
  bool WaitFor(IbEvent::Kind kind, int port, int timeout_ms, IbEvent* out) {
    auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < end) {
      {
        std::lock_guard<std::mutex> g(mu_);
        for (const IbEvent& e : ev_)
          if (e.kind == kind && e.port == port) return *out = e, true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }

 private:
  std::mutex mu_;
  std::vector<IbEvent> ev_;
};

// Takes the port of `dev` down or up: through the fake's control API when the loaded library is
// tests/fakeverbs, else `ip link set <netdev>` (root and a RoCE netdev needed: the rxe guest).
class PortSwitch {
 public:
  explicit PortSwitch(const IbDevice& dev) : dev_(dev) {
    void* h = dlopen(dev.lib().path().c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (h) fake_ = reinterpret_cast<int (*)(const char*, int, int)>(dlsym(h, "fakeverbs_set_port_state"));
  }
  bool usable() const {
    return fake_ || (geteuid() == 0 && !dev_.port().netdev.empty() && access("/usr/bin/ip", X_OK) == 0);
  }
  std::string what() const { return fake_ ? "fakeverbs_set_port_state(" + dev_.port().dev + ")" : "ip link set " + dev_.port().netdev; }
  bool Set(bool up) {
    if (fake_) return fake_(dev_.port().dev.c_str(), dev_.port().port, up ? 1 : 0) == 0;
    return std::system(("/usr/bin/ip link set " + dev_.port().netdev + (up ? " up" : " down")).c_str()) == 0;
  }

 private:
  const IbDevice& dev_;
  int (*fake_)(const char*, int, int) = nullptr;
};

TEST_F(VerbsRc, PortDownEventErrorsAndHeal) {
  PortSwitch sw(*dev_);
  const std::string nd = sw.what();
  if (!sw.usable()) GTEST_SKIP() << "needs root, a RoCE netdev and ip (or the fake verbs)";
  EventLog log;
  std::unique_ptr<IbEventMonitor> mon;
  ASSERT_TRUE(IbEventMonitor::Start({dev_.get()}, [&](const IbEvent& e) { log.Add(e); }, &mon).ok());
  const int port = dev_->port().port;

  auto t0 = Clock::now();
  uint64_t t0ns = rr::NowNs();
  ASSERT_TRUE(sw.Set(false));
  IbEvent down;
  ASSERT_TRUE(log.WaitFor(IbEvent::Kind::kPortDown, port, 5000, &down)) << "no PORT_ERR within 5 s of " << nd << " down";
  EXPECT_EQ(down.dev, dev_->port().dev);
  EXPECT_EQ(down.type, vx::kEventPortErr);
  std::printf("FIGURE %s PORT_ERR event %.1f ms after '%s' down (%s)\n", Stack(), (down.at_ns - t0ns) / 1e6, nd.c_str(),
              down.name.c_str());

  // A write posted on the dead port completes in error (or is refused at post time).
  ASSERT_TRUE(qb_->PostRecv(1).ok());
  auto tp = Clock::now();
  rr::Status p = qa_->PostWrite(2, a_.data(), 4096, ma_->lkey(), B(0), mb_->rkey(), true, 7, true);
  if (p.ok()) {
    auto s = Wait(*ca_, 1, 30000);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_NE(s[0].status, vx::kWcSuccess) << "a write through a down port succeeded";
    std::printf("FIGURE %s write on a down port: %s after %.0f ms\n", Stack(), WcStatusName(dev_->lib(), s[0].status).c_str(),
                Ms(tp, Clock::now()));
  } else {
    std::printf("FIGURE %s write on a down port refused at post: %s\n", Stack(), p.ToString().c_str());
  }

  uint64_t tup = rr::NowNs();
  ASSERT_TRUE(sw.Set(true));
  IbEvent up;
  ASSERT_TRUE(log.WaitFor(IbEvent::Kind::kPortUp, port, 10000, &up)) << "no PORT_ACTIVE within 10 s of " << nd << " up";
  std::printf("FIGURE %s PORT_ACTIVE event %.1f ms after '%s' up; down->up cycle %.0f ms\n", Stack(),
              (up.at_ns - tup) / 1e6, nd.c_str(), Ms(t0, Clock::now()));
  mon.reset();

  // Failback after the heal: both QPs through RESET and connected again; data flows.
  ASSERT_TRUE(qa_->Reset().ok());
  ASSERT_TRUE(qb_->Reset().ok());
  int n = 0;
  vx::Wc junk[16];
  ASSERT_TRUE(ca_->Poll(16, junk, &n).ok());
  ASSERT_TRUE(cb_->Poll(16, junk, &n).ok());
  Connect();
  ASSERT_TRUE(qb_->PostRecv(3).ok());
  ASSERT_TRUE(qa_->PostWrite(4, a_.data(), 65536, ma_->lkey(), B(0), mb_->rkey(), true, 9, true).ok());
  auto s = Wait(*ca_, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, vx::kWcSuccess) << WcStatusName(dev_->lib(), s[0].status);
  auto r = Wait(*cb_, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(ntohl(r[0].imm_data), 9u);
  EXPECT_EQ(memcmp(b_.data(), a_.data(), 65536), 0);
}

TEST_F(VerbsRc, OneRegistrationServesEveryRail) {
  IbOptions o;
  ASSERT_TRUE(IbOptions::FromParams(&o).ok());
  IbDiscovery d;
  ASSERT_TRUE(DiscoverIb(dev_->lib(), o, &d).ok());
  if (d.ports.size() < 2) GTEST_SKIP() << "needs two rails (rxe-guest.sh --rails 2)";
  std::unique_ptr<IbDevice> dev1;
  ASSERT_TRUE(IbDevice::Open(dev_->lib(), d.ports[1], &dev1).ok());
  std::vector<IbDevice*> rails = {dev_.get(), dev1.get()};
  VerbsRegistrar reg(rails);
  MrCache cache(&reg);
  MrHandle *src = nullptr, *dst = nullptr;
  ASSERT_TRUE(cache.Register(a_.data() + 5, kBuf - 5, &src).ok());
  ASSERT_TRUE(cache.Register(b_.data(), kBuf, &dst).ok());
  ASSERT_EQ(src->keys.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    // A QP pair on rail r (loopback on that device) writes 64 KiB at its own offset with rail r's keys.
    std::unique_ptr<IbCq> cq;
    std::unique_ptr<IbQp> x, y;
    ASSERT_TRUE(IbCq::Create(*rails[r], 64, &cq).ok());
    ASSERT_TRUE(IbQp::Create(*rails[r], *cq, *cq, QpOptions(), &x).ok());
    ASSERT_TRUE(IbQp::Create(*rails[r], *cq, *cq, QpOptions(), &y).ok());
    ASSERT_TRUE(x->Connect(y->Endpoint()).ok());
    ASSERT_TRUE(y->Connect(x->Endpoint()).ok());
    size_t off = 4096 + r * 65536;
    ASSERT_TRUE(x->PostWrite(r, a_.data() + off, 65536, src->keys[r].lkey, B(off), dst->keys[r].rkey, false, 0, true).ok());
    auto s = Wait(*cq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, vx::kWcSuccess) << "rail " << r << ": " << WcStatusName(dev_->lib(), s[0].status);
    EXPECT_EQ(memcmp(b_.data() + off, a_.data() + off, 65536), 0) << "rail " << r;
  }
  EXPECT_EQ(b_[0], 0);
  ASSERT_TRUE(cache.Deregister(src).ok());
  ASSERT_TRUE(cache.Deregister(dst).ok());
  EXPECT_EQ(cache.entries(), 0u);
}

TEST_F(VerbsRc, WriteBandwidthFigure) {
  const uint32_t chunk = 1 << 20;
  const int n = 48, sig_every = 8;
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    uint32_t off = static_cast<uint32_t>((i % 8) * chunk);
    bool sig = (i + 1) % sig_every == 0;
    ASSERT_TRUE(qa_->PostWrite(i, a_.data() + off, chunk, ma_->lkey(), B(off), mb_->rkey(), false, 0, sig).ok());
    if (sig) {
      ASSERT_EQ(Wait(*ca_, 1).size(), 1u);  // bounds the send queue
    }
  }
  auto t1 = Clock::now();
  double mb = static_cast<double>(n) * chunk / 1e6;
  std::printf("FIGURE %s RDMA WRITE %d x 1 MiB loopback: %.1f MB/s (%.0f ms)\n", Stack(), n, mb / (Ms(t0, t1) / 1e3), Ms(t0, t1));
  EXPECT_EQ(memcmp(b_.data(), a_.data(), 8 * chunk), 0);
}

}  // namespace
