// The IB data path on the sans-I/O core (issue 12 stage 2) over the fake libibverbs: a SendCore and a
// RecvCore in one process, each driven by its IB driver (transports/ib/ib_send_driver.h,
// ib_recv_driver.h) over 2 links (rails fake0->fake2, fake1->fake3) x 2 RC QPs, the handshake handed over
// in-process. Every message is byte-checked when its receive completes, then its buffer is poisoned
// (NCCL reuses it): a poisoned byte that changes later is a write into a completed buffer.
//   * every size (0, 1, 4095, 4096, 4097, several chunks, 4 MiB), eager and written paths;
//   * one failover per failure class, with verified data and failback: WC error (port down, no event
//     consumer), async port event (IbEventMonitor, long QP timeout so no WC error comes first), black hole
//     (stall watchdog), ack-only loss (data lands, the transport's ack is lost: RETRY_EXC_ERR);
//   * a chunk re-sent after its message completed at the receiver (the core's ack still in flight)
//     never lands in the buffer NCCL owns again.
// Needs RERAIL_IB_LIB=<libfakeverbs.so> and FAKEVERBS_DEVICES=4 (ctest ib_fake_driver).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../../fakeverbs/fakeverbs.h"
#include "core/core.h"
#include "rerail/clock.h"
#include "rerail/log.h"
#include "rerail/params.h"
#include "transports/ib/ib_device.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_events.h"
#include "transports/ib/ib_mr_cache.h"
#include "transports/ib/ib_recv_driver.h"
#include "transports/ib/ib_send_driver.h"

namespace {

using namespace rr::ib;
using rr::net::CoreConfig;
using rr::net::RecvCore;
using rr::net::SendCore;

constexpr uint32_t kChunk = 64 << 10;
constexpr uint64_t kMs = 1000000;

template <typename F>
F FakeFn(const VerbsLib& lib, const char* name) {
  void* h = dlopen(lib.path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  return h ? reinterpret_cast<F>(dlsym(h, name)) : nullptr;
}

// WARN lines are captured and asserted, not printed.
void QuietLogger(int, unsigned long, const char*, int, const char*, ...) {}
std::vector<std::string> g_warns;
struct CaptureWarns : ::testing::Environment {
  void SetUp() override {
    rr::log::SetLogger(QuietLogger);
    rr::log::SetCapture([](rr::log::Level l, const std::string& line) {
      if (l == rr::log::Level::kWarn) g_warns.push_back(line);
    });
  }
  void TearDown() override {
    rr::log::SetCapture(nullptr);
    rr::log::SetLogger(nullptr);
  }
};
const auto* const kCapture = ::testing::AddGlobalTestEnvironment(new CaptureWarns);

bool Warned(const std::string& what) {
  for (const auto& w : g_warns) {
    if (w.find(what) != std::string::npos) return true;
  }
  return false;
}

struct Obs : rr::net::CoreObserver {
  std::vector<std::string> failovers;
  int failbacks = 0;
  void OnFailover(int link, const std::string& why, uint64_t, uint64_t, int, uint64_t, bool) override {
    failovers.push_back(std::to_string(link) + ": " + why);
  }
  void OnFailback(int) override { ++failbacks; }
  bool Saw(const std::string& what) const {
    for (const auto& f : failovers) {
      if (f.find(what) != std::string::npos) return true;
    }
    return false;
  }
  std::string All() const {
    std::string s;
    for (const auto& f : failovers) s += "[" + f + "] ";
    return s;
  }
};

struct Msg {
  size_t size = 0;
  size_t off = 0;  // in the arenas
  int sent = 0, received = 0;
  size_t recv_size = 0;
  bool bytes_ok = false;
  void* slot = nullptr;
};

uint8_t Pattern(size_t m, size_t i) { return static_cast<uint8_t>(m * 131 + i * 7 + (i >> 9) + 1); }
constexpr uint8_t kPoison = 0xee;

class IbDriver : public ::testing::Test, public IbDialer {
 protected:
  void SetUp() override {
    g_warns.clear();
    ASSERT_TRUE(rr::Params::Load().ok());
    const VerbsLib& lib = VerbsLib::Default();
    ASSERT_TRUE(lib.loaded()) << lib.Describe();
    set_fault_ = FakeFn<int (*)(const char*, int, int)>(lib, "fakeverbs_set_fault");
    set_port_ = FakeFn<int (*)(const char*, int, int)>(lib, "fakeverbs_set_port_state");
    ASSERT_TRUE(set_fault_ && set_port_) << "not the fake verbs: " << lib.Describe();
    IbOptions o;
    ASSERT_TRUE(IbOptions::FromParams(&o).ok());
    ASSERT_TRUE(DiscoverIb(lib, o, &disc_).ok());
    ASSERT_GE(disc_.ports.size(), 4u) << "FAKEVERBS_DEVICES=4 expected: " << disc_.why;
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(IbDevice::Open(lib, disc_.ports[i], &dev_[i]).ok());
    sreg_ = std::make_unique<VerbsRegistrar>(std::vector<IbDevice*>{dev_[0].get(), dev_[1].get()});
    rreg_ = std::make_unique<VerbsRegistrar>(std::vector<IbDevice*>{dev_[2].get(), dev_[3].get()});
    smr_ = std::make_unique<MrCache>(sreg_.get());
    rmr_ = std::make_unique<MrCache>(rreg_.get());
  }

  void TearDown() override {
    mon_s_.reset();
    mon_r_.reset();
    for (const char* d : {"fake0", "fake1", "fake2", "fake3"}) {
      if (!set_fault_ || !set_port_) break;
      set_fault_(d, 1, FAKEVERBS_FAULT_NONE);
      set_port_(d, 1, 1);
    }
    sd_.reset();
    rd_.reset();
    send_.reset();
    recv_.reset();
    if (sh_) (void)smr_->Deregister(sh_);
    if (rh_) (void)rmr_->Deregister(rh_);
  }

  // Builds both cores and drivers. qp: timeout / retry of every QP.
  void Start(CoreConfig cfg, uint8_t qp_timeout, int streams = 2, int recv_slots = 32) {
    cfg.chunk = kChunk;
    cfg.loads = nullptr;
    cfg_ = cfg;
    std::vector<SendCore::LinkSpec> specs(2);
    for (int i = 0; i < 2; ++i) specs[i].rail = i, specs[i].nominal_bps = 100e9, specs[i].name = "ib rail " + std::to_string(i);
    now_ = rr::NowNs();
    send_ = std::make_unique<SendCore>(cfg, 0x5eed, specs, &sobs_, now_);
    recv_ = std::make_unique<RecvCore>(cfg, 0x5eed, kChunk, &robs_);
    IbLinkConfig lc;
    lc.streams = streams;
    lc.recv_slots = recv_slots;
    lc.qp.max_send = 64;
    lc.qp.max_recv = 64;
    lc.qp.timeout = qp_timeout;
    lc.qp.retry_cnt = 3;
    rd_ = std::make_unique<IbRecvDriver>(recv_.get(), std::vector<IbDevice*>{dev_[2].get(), dev_[3].get()}, lc);
    sd_ = std::make_unique<IbSendDriver>(send_.get(), std::vector<IbSendLinkSpec>{{dev_[0].get(), 0, 0}, {dev_[1].get(), 1, 1}},
                                         lc, kChunk, this);
  }

  // In-process handshake. deferred_: the hello reaches the receiver only at the sender's next Poll and
  // the answer comes back then (the plugin's TCP bootstrap is asynchronous in the same way).
  rr::Status Dial(uint64_t now, const IbLinkHello& hello, IbLinkHello* answer, bool* answered) override {
    if (deferred_) {
      in_transit_.push_back(hello);
      *answered = false;
      ++deferred_dials_;
      return rr::Status::Ok();
    }
    *answered = true;
    return Counted(rd_->Accept(now, hello, answer));
  }
  // late_answer_ms_: the receiver accepts a hello at once, its answer reaches the sender that much later.
  rr::Status Poll(uint64_t now, int link, IbLinkHello* answer, bool* answered) override {
    *answered = false;
    if (hold_) return rr::Status::Ok();  // the answer is late
    for (auto it = answers_.begin(); it != answers_.end(); ++it) {
      if (it->first.link != link) continue;
      if (std::chrono::steady_clock::now() < it->second) return rr::Status::Ok();
      *answer = it->first;
      *answered = true;
      answers_.erase(it);
      return rr::Status::Ok();
    }
    for (auto it = in_transit_.begin(); it != in_transit_.end(); ++it) {
      if (it->link != link) continue;
      IbLinkHello hello = *it;
      in_transit_.erase(it);
      if (late_answer_ms_ > 0) {
        IbLinkHello a{};
        RR_CHECK(Counted(rd_->Accept(now, hello, &a)));
        answers_.emplace_back(a, std::chrono::steady_clock::now() + std::chrono::milliseconds(late_answer_ms_));
        return rr::Status::Ok();
      }
      *answered = true;
      return Counted(rd_->Accept(now, hello, answer));
    }
    return rr::Status::Ok();
  }
  rr::Status Counted(rr::Status st) {
    if (!st.ok()) ++refused_, refusal_ = st.message();
    return st;
  }

  // Port events of both sides into the drivers (the plugin's IbEventMonitor wiring).
  void Monitor() {
    auto feed = [this](bool sender, const IbEvent& e) {
      if (e.kind != IbEvent::Kind::kPortDown && e.kind != IbEvent::Kind::kPortUp) return;
      bool down = e.kind == IbEvent::Kind::kPortDown;
      if (sender) sd_->OnRailEvent(e.rail, down);
      else rd_->OnRailEvent(e.rail, down);
      ++events_;
    };
    ASSERT_TRUE(IbEventMonitor::Start({dev_[0].get(), dev_[1].get()}, [feed](const IbEvent& e) { feed(true, e); },
                                      &mon_s_).ok());
    ASSERT_TRUE(IbEventMonitor::Start({dev_[2].get(), dev_[3].get()}, [feed](const IbEvent& e) { feed(false, e); },
                                      &mon_r_).ok());
  }

  void Step() {
    now_ = std::max(now_ + 1, rr::NowNs());
    sd_->Progress(now_);
    rd_->Progress(now_);
  }

  void Messages(const std::vector<size_t>& sizes) {
    msgs_.clear();
    size_t total = 0;
    for (size_t s : sizes) {
      Msg m;
      m.size = s;
      m.off = total;
      total += s + 64;  // a gap: a write past a message's end would show in the next one
      msgs_.push_back(m);
    }
    src_.assign(total + 4096, 0);
    dst_.assign(total + 4096, 0x11);
    for (size_t k = 0; k < msgs_.size(); ++k) {
      for (size_t i = 0; i < msgs_[k].size; ++i) src_[msgs_[k].off + i] = Pattern(k, i);
    }
    ASSERT_TRUE(smr_->Register(src_.data(), src_.size(), &sh_).ok());
    ASSERT_TRUE(rmr_->Register(dst_.data(), dst_.size(), &rh_).ok());
  }

  // NCCL-like: isends and irecvs in order, as many as the cores take; steps until every message
  // completed on both sides or `limit_ms` passed. hook(received): faults, called before each step.
  bool Run(uint64_t limit_ms, const std::function<void(int)>& hook = nullptr) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(limit_ms);
    size_t ns = 0, nr = 0;
    int received = 0, sent = 0;
    while (std::chrono::steady_clock::now() < end) {
      if (hook) hook(received);
      for (bool posted = true; ns < msgs_.size() && posted; ) {
        Msg& m = msgs_[ns];
        EXPECT_TRUE(sd_->Isend(now_, src_.data() + m.off, m.size, sh_, &m, &posted).ok());
        ns += posted;
      }
      for (bool posted = true; nr < msgs_.size() && posted; ) {
        Msg& m = msgs_[nr];
        EXPECT_TRUE(rd_->Irecv(now_, dst_.data() + m.off, m.size, rh_, &m, &posted, &m.slot).ok());
        nr += posted;
      }
      Step();
      rr::net::Completion c;
      while (send_->NextCompletion(&c)) ++static_cast<Msg*>(c.owner)->sent, ++sent;
      while (rd_->NextCompletion(&c)) {
        Msg& m = *static_cast<Msg*>(c.owner);
        ++m.received;
        ++received;
        m.recv_size = c.size;
        m.bytes_ok = memcmp(dst_.data() + m.off, src_.data() + m.off, m.size) == 0;
        memset(dst_.data() + m.off, kPoison, m.size);  // NCCL owns the buffer again
        recv_->Release(m.slot);
      }
      if (send_->state() == rr::net::ConnState::kFailed || recv_->state() == rr::net::ConnState::kFailed) return false;
      if (sent == static_cast<int>(msgs_.size()) && received == static_cast<int>(msgs_.size())) return true;
    }
    return false;
  }

  // Keeps stepping (no new messages) until `done` or `ms` passed.
  bool StepUntil(uint64_t ms, const std::function<bool()>& done) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      Step();
      if (done()) return true;
    }
    return done();
  }

  // Every message sent and received exactly once, bytes right at completion, no write afterwards.
  void Verify() {
    for (size_t k = 0; k < msgs_.size(); ++k) {
      const Msg& m = msgs_[k];
      ASSERT_EQ(m.sent, 1) << "message " << k;
      ASSERT_EQ(m.received, 1) << "message " << k;
      ASSERT_EQ(m.recv_size, m.size) << "message " << k;
      ASSERT_TRUE(m.bytes_ok) << "message " << k << " of " << m.size << " bytes corrupted";
      for (size_t i = 0; i < m.size; ++i) {
        ASSERT_EQ(dst_[m.off + i], kPoison) << "message " << k << " byte " << i << " written after completion";
      }
      for (size_t i = m.size; i < m.size + 64; ++i) ASSERT_EQ(dst_[m.off + i], 0x11) << "write past message " << k;
    }
    EXPECT_EQ(send_->state(), rr::net::ConnState::kActive) << send_->status().message();
    EXPECT_EQ(recv_->state(), rr::net::ConnState::kActive) << recv_->status().message();
  }

  // A stream of mixed messages for the failover tests: large (several chunks), small eager, empty.
  static std::vector<size_t> Mixed(int n) {
    std::vector<size_t> s;
    for (int i = 0; i < n; ++i) s.push_back(i % 5 == 3 ? 3000 : i % 11 == 7 ? 0 : (256u << 10) + 17 * i);
    return s;
  }

  bool Healthy(int link) const { return send_->usable(link) && rd_->connected(link) && recv_->alive(link); }

  int (*set_fault_)(const char*, int, int) = nullptr;
  int (*set_port_)(const char*, int, int) = nullptr;
  IbDiscovery disc_;
  std::unique_ptr<IbDevice> dev_[4];
  std::unique_ptr<VerbsRegistrar> sreg_, rreg_;
  std::unique_ptr<MrCache> smr_, rmr_;
  MrHandle *sh_ = nullptr, *rh_ = nullptr;
  CoreConfig cfg_;
  Obs sobs_, robs_;
  std::unique_ptr<SendCore> send_;
  std::unique_ptr<RecvCore> recv_;
  std::unique_ptr<IbSendDriver> sd_;
  std::unique_ptr<IbRecvDriver> rd_;
  std::unique_ptr<IbEventMonitor> mon_s_, mon_r_;
  std::atomic<int> events_{0};
  uint64_t now_ = 0;
  bool deferred_ = false;
  bool hold_ = false;  // deferred_: hellos stay in transit
  int deferred_dials_ = 0;
  int refused_ = 0;  // handshakes the receiver refused, the last one's reason
  std::string refusal_;
  std::vector<IbLinkHello> in_transit_;
  uint64_t late_answer_ms_ = 0;
  std::vector<std::pair<IbLinkHello, std::chrono::steady_clock::time_point>> answers_;  // accepted, on their way back
  std::vector<Msg> msgs_;
  std::vector<uint8_t> src_, dst_;
};

const std::vector<size_t> kSizes = {0, 1, 4095, 4096, 4097, 3 * kChunk + 123, 4u << 20, 1, 0, kChunk};

// Every size over 2 rails x 2 QPs, eager (copied through bounce buffers) and written in place.
TEST_F(IbDriver, EverySizeExactlyOnceEager) {
  CoreConfig cfg;
  cfg.eager_max = 16384;
  Start(cfg, 14);
  Messages(kSizes);
  ASSERT_TRUE(Run(10000)) << "not delivered: " << sobs_.All();
  Verify();
  EXPECT_GT(sd_->stats().staged, 0u);
  EXPECT_GT(rd_->stats().placed_written, 0u);
  EXPECT_GT(sd_->stats().link_chunks[0], 0u);
  EXPECT_GT(sd_->stats().link_chunks[1], 0u);
  EXPECT_TRUE(sobs_.failovers.empty()) << sobs_.All();
  EXPECT_TRUE(g_warns.empty()) << g_warns.front();
}

TEST_F(IbDriver, EverySizeExactlyOnceWritten) {
  CoreConfig cfg;
  cfg.eager_max = 0;  // every chunk by RDMA WRITE at the published address
  Start(cfg, 14);
  Messages(kSizes);
  ASSERT_TRUE(Run(10000)) << "not delivered: " << sobs_.All();
  Verify();
  EXPECT_EQ(sd_->stats().staged, 0u);
  EXPECT_EQ(rd_->stats().placed_copied, 0u);
  EXPECT_GT(sd_->stats().link_chunks[0], 0u);
  EXPECT_GT(sd_->stats().link_chunks[1], 0u);
  EXPECT_TRUE(sobs_.failovers.empty()) << sobs_.All();
  EXPECT_TRUE(g_warns.empty()) << g_warns.front();
}

// WC error: the sender's rail 1 port goes down (nobody reads its events): its WRs complete with
// LOC_QP_OP_ERR, the link fails over with every chunk re-sent on rail 0; back up, it fails back.
// The handshake answered later (as over the plugin's TCP bootstrap): links stay connecting until the
// answer is polled, then every size goes through as with the in-process answer.
TEST_F(IbDriver, EverySizeWithDeferredHandshake) {
  CoreConfig cfg;
  cfg.eager_max = 16384;
  deferred_ = true;
  Start(cfg, 14);
  Messages(kSizes);
  ASSERT_TRUE(Run(10000)) << "not delivered: " << sobs_.All();
  Verify();
  EXPECT_GE(deferred_dials_, 2);
  EXPECT_TRUE(in_transit_.empty());
  EXPECT_EQ(sd_->stats().connects, 2u);
  EXPECT_TRUE(sobs_.failovers.empty()) << sobs_.All();
}

TEST_F(IbDriver, FailoverOnWcError) {
  CoreConfig cfg;
  Start(cfg, 10);  // dead path 17 ms
  Messages(Mixed(200));
  bool down = false, up = false;
  ASSERT_TRUE(Run(20000, [&](int received) {
    if (!down && received >= 20) set_port_("fake1", 1, 0), down = true;
    if (down && !up && received >= 120) set_port_("fake1", 1, 1), up = true;
  })) << sobs_.All();
  Verify();
  // Either end may see its WC error first: the receiver's CTS, credits and acks towards the dead
  // port fail too (RETRY_EXC_ERR after the same 17 ms), and its notice can beat the sender's own
  // completion on a slow or loaded machine (seen under TSan). The class under test is the WC error.
  EXPECT_GT(sd_->stats().wc_errors + rd_->stats().wc_errors, 0u);
  EXPECT_TRUE(sobs_.Saw("WC error") || robs_.Saw("WC error")) << sobs_.All() << robs_.All();
  EXPECT_GT(sd_->stats().resent, 0u);
  EXPECT_TRUE(StepUntil(5000, [&] { return Healthy(1); })) << "no failback";
  EXPECT_GE(sobs_.failbacks, 1);
}

// Async port event: the receiver's rail 1 port goes down; its IbEventMonitor event drops the link at
// once (no WC error: the QP timeout is long), the sender learns it from the link-down notice.
TEST_F(IbDriver, FailoverOnPortEvent) {
  CoreConfig cfg;
  Start(cfg, 20);  // dead path ~17 s: only the event can fail the link within the test
  Monitor();
  Messages(Mixed(200));
  bool down = false, up = false;
  ASSERT_TRUE(Run(20000, [&](int received) {
    if (!down && received >= 20) {
      int before = events_;
      set_port_("fake3", 1, 0), down = true;
      for (int i = 0; i < 2000 && events_ == before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (down && !up && received >= 120) set_port_("fake3", 1, 1), up = true;
  })) << sobs_.All();
  Verify();
  EXPECT_TRUE(robs_.Saw("link-down event")) << robs_.All();
  EXPECT_TRUE(Warned("(ib fake3 link 1, 2 QPs) failed (link-down event)"));
  EXPECT_TRUE(sobs_.Saw("peer reported the link down")) << sobs_.All();
  // The sender's WRs towards the dead port would need ~17 s to time out: the event failed the link.
  // (The receiver's own posts on its down port may fail LOC_QP_OP_ERR before its monitor thread
  // delivers the event on a loaded machine: that is not asserted either way.)
  EXPECT_EQ(sd_->stats().wc_errors, 0u);
  EXPECT_GT(rd_->stats().guarded, 0u);
  // The comm announces the guarded link on its bootstrap stream too (the notice above travels on the
  // IB links, which may all be failing at once): once, with the dropped incarnation's successor.
  int link = -1;
  uint32_t epoch = 0;
  ASSERT_TRUE(rd_->NextDropped(&link, &epoch));
  EXPECT_EQ(link, 1);
  EXPECT_GE(epoch, 1u);
  EXPECT_TRUE(StepUntil(5000, [&] { return Healthy(1); })) << "no failback";
}

// A hello of another rerail build's handshake version is refused with a message that says so.
TEST_F(IbDriver, AHelloOfAnotherVersionIsRefusedByName) {
  CoreConfig cfg;
  Start(cfg, 10);
  IbLinkHello h{};
  h.magic = kIbHelloMagic;
  h.version = kIbHelloVersion - 1;
  h.streams = 1;
  h.conn_id = 0x5eed;
  IbLinkHello answer{};
  rr::Status st = rd_->Accept(rr::NowNs(), h, &answer);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("version " + std::to_string(kIbHelloVersion - 1)), std::string::npos) << st.message();
}

// The receiver's port of link 1 stays down while the sender's is fine: the sender's failback probes
// (backoff 100 ms, 200 ms, ...) reach the receiver over the handshake path, which does not cross the
// down port. The receiver refuses them while its monitor says the port is down (a QP there would fail
// LOC_QP_OP_ERR: a second failover for one fault) and takes the link back once the port is up.
TEST_F(IbDriver, NoLinkIsAcceptedOnAPortTheMonitorSaysIsDown) {
  CoreConfig cfg;
  Start(cfg, 20);
  Monitor();
  Messages(Mixed(200));
  bool down = false, dropped = false, back_while_down = false;
  auto watch = [&] {
    if (!down) return;
    if (!rd_->connected(1)) dropped = true;
    else if (dropped) back_while_down = true;
  };
  ASSERT_TRUE(Run(20000, [&](int received) {
    watch();
    if (!down && received >= 20) {
      int before = events_;
      set_port_("fake3", 1, 0), down = true;
      for (int i = 0; i < 2000 && events_ == before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  })) << sobs_.All();
  // Long enough for three probes (100 + 200 + 400 ms of backoff).
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1200);
  StepUntil(1200, [&] {
    watch();
    return std::chrono::steady_clock::now() >= until;
  });
  EXPECT_TRUE(dropped) << "the port event did not drop link 1";
  EXPECT_FALSE(back_while_down) << "link 1 was accepted again while its port was down";
  EXPECT_GE(refused_, 1) << "no failback probe reached the receiver while the port was down";
  EXPECT_NE(refusal_.find("fake3 is down"), std::string::npos) << refusal_;
  int before = events_;
  set_port_("fake3", 1, 1);
  for (int i = 0; i < 2000 && events_ == before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(StepUntil(10000, [&] { return Healthy(1); })) << "no failback after the port came up: " << refusal_;
  Verify();
}

// Black hole: everything through fake1 vanishes, no completion ever comes (long QP timeout): the
// stall watchdog fails the link; when the hole closes the link fails back.
TEST_F(IbDriver, FailoverOnBlackHole) {
  CoreConfig cfg;
  cfg.stall_ns = 150 * kMs;
  cfg.heartbeat_ns = 40 * kMs;
  Start(cfg, 20);
  Messages(Mixed(200));
  bool hole = false, healed = false;
  ASSERT_TRUE(Run(20000, [&](int received) {
    if (!hole && received >= 20) set_fault_("fake1", 1, FAKEVERBS_FAULT_DROP_DATA), hole = true;
    if (hole && !healed && received >= 120) set_fault_("fake1", 1, FAKEVERBS_FAULT_NONE), healed = true;
  })) << sobs_.All();
  Verify();
  EXPECT_TRUE(sobs_.Saw("stall") || robs_.Saw("stall")) << sobs_.All() << robs_.All();
  EXPECT_TRUE(Warned("stall: bytes unacknowledged"));
  EXPECT_EQ(sd_->stats().wc_errors, 0u);
  EXPECT_GT(sd_->stats().resent, 0u);
  EXPECT_TRUE(StepUntil(5000, [&] { return Healthy(1); })) << "no failback";
}

// Ack-only loss: data and the receiver's completions land on rail 1 but the transport's acks are
// lost, so the sender's WRs end in RETRY_EXC_ERR although the bytes are there: the link fails over,
// the chunks are sent again, nothing hangs and nothing is written into a completed buffer.
TEST_F(IbDriver, FailoverOnAckLoss) {
  CoreConfig cfg;
  Start(cfg, 10);
  Messages(Mixed(200));
  bool lossy = false, fixed = false;
  ASSERT_TRUE(Run(20000, [&](int received) {
    if (!lossy && received >= 20) set_fault_("fake1", 1, FAKEVERBS_FAULT_DROP_ACKS), lossy = true;
    if (lossy && !fixed && received >= 120) set_fault_("fake1", 1, FAKEVERBS_FAULT_NONE), fixed = true;
  })) << sobs_.All();
  Verify();
  EXPECT_TRUE(sobs_.Saw("retry counter exceeded") || robs_.Saw("retry counter exceeded")) << sobs_.All() << robs_.All();
  EXPECT_TRUE(Warned("retry counter exceeded"));
  EXPECT_GT(sd_->stats().resent, 0u);
  EXPECT_TRUE(StepUntil(5000, [&] { return Healthy(1); })) << "no failback";
}

// The receiver completed a message (NCCL owns the buffer again) while the core's ack is still on its
// way; the sender then loses the link that carried some of its chunks and re-sends them. They must
// reach the receiver as payload it can drop, never as an RDMA write into the buffer.
TEST_F(IbDriver, ResendAfterCompletionNeverWritesTheBuffer) {
  CoreConfig cfg;
  cfg.eager_max = 0;
  Start(cfg, 14);
  Messages({16 * kChunk});
  Msg& m = msgs_[0];
  bool posted = false;
  ASSERT_TRUE(rd_->Irecv(now_, dst_.data() + m.off, m.size, rh_, &m, &posted, &m.slot).ok() && posted);
  ASSERT_TRUE(StepUntil(2000, [&] { return Healthy(0) && Healthy(1); }));
  ASSERT_TRUE(sd_->Isend(now_, src_.data() + m.off, m.size, sh_, &m, &posted).ok() && posted);
  rr::net::Completion c;
  ASSERT_TRUE(StepUntil(5000, [&] { return rd_->NextCompletion(&c); }));
  m.received = 1, m.recv_size = c.size;
  m.bytes_ok = memcmp(dst_.data() + m.off, src_.data() + m.off, m.size) == 0;
  memset(dst_.data() + m.off, kPoison, m.size);
  ASSERT_GT(sd_->stats().link_chunks[1], 0u) << "precondition: chunks on link 1";
  ASSERT_EQ(send_->acked(), 0u) << "precondition: the sender has not seen the ack yet";
  // Link 1 fails at the sender before it polls again (the ack waits in its completion queue).
  send_->OnLinkError(now_, 1, "injected WC error", false);
  sd_->Push(now_);
  recv_->Release(m.slot);
  ASSERT_TRUE(StepUntil(5000, [&] {
    while (send_->NextCompletion(&c)) ++m.sent;
    return m.sent == 1;
  }));
  StepUntil(100, [] { return false; });  // every re-send reaches the receiver
  EXPECT_GT(sd_->stats().resent, 0u);
  EXPECT_GE(rd_->stats().discarded, sd_->stats().resent);
  Verify();
  EXPECT_TRUE(Warned("ib rail 1 failed (injected WC error)"));
  EXPECT_GT(rd_->stats().guarded, 0u);  // the receiver dropped link 1 (the fence) before the re-sends
}

// Eager messages sent before their receives are posted land in bounce buffers, are stashed by the
// core (kStash: copied into its own memory) and placed when the receives come.
TEST_F(IbDriver, EagerBeforeIrecvIsStashed) {
  CoreConfig cfg;
  cfg.eager_max = 16384;
  Start(cfg, 14);
  Messages({1, 0, 4095, 16384});
  ASSERT_TRUE(StepUntil(2000, [&] { return Healthy(0) && Healthy(1); }));
  rr::net::Completion c;
  for (auto& m : msgs_) {
    bool posted = false;
    ASSERT_TRUE(sd_->Isend(now_, src_.data() + m.off, m.size, sh_, &m, &posted).ok() && posted);
  }
  ASSERT_TRUE(StepUntil(2000, [&] {
    while (send_->NextCompletion(&c)) ++static_cast<Msg*>(c.owner)->sent;
    return recv_->stash_bytes() == 1 + 4095 + 16384;
  })) << "stashed " << recv_->stash_bytes();
  for (auto& m : msgs_) {
    bool posted = false;
    ASSERT_TRUE(rd_->Irecv(now_, dst_.data() + m.off, m.size, rh_, &m, &posted, &m.slot).ok() && posted);
  }
  size_t received = 0;
  ASSERT_TRUE(StepUntil(2000, [&] {
    while (rd_->NextCompletion(&c)) {
      Msg& m = *static_cast<Msg*>(c.owner);
      ++m.received, ++received;
      m.recv_size = c.size;
      m.bytes_ok = memcmp(dst_.data() + m.off, src_.data() + m.off, m.size) == 0;
      memset(dst_.data() + m.off, kPoison, m.size);
      recv_->Release(m.slot);
    }
    return received == msgs_.size();
  }));
  Verify();
  EXPECT_EQ(recv_->stash_bytes(), 0u);
  EXPECT_TRUE(g_warns.empty()) << g_warns.front();
}

// A chunk of 8 bytes that travels with its header (eager, or any re-send) is one SEND of 40 + 8 =
// 48 bytes, the length of an IbCredit record: on stream 0 the receiver must tell them apart by the
// first word (found between two rxe guests: an 8-byte all_reduce failed the link with "protocol
// error: bad credit record", then every link, and the collective hung).
TEST_F(IbDriver, EightByteChunkIsNotACreditRecord) {
  CoreConfig cfg;
  cfg.eager_max = 16384;
  Start(cfg, 14);
  Messages(std::vector<size_t>(64, 8));
  ASSERT_TRUE(Run(10000)) << "not delivered: " << sobs_.All() << " / " << robs_.All();
  Verify();
  EXPECT_GT(sd_->stats().staged, 0u);
  EXPECT_TRUE(sobs_.failovers.empty()) << sobs_.All();
  EXPECT_TRUE(g_warns.empty()) << g_warns.front();
}

// The receiver's first SENDs on a new link (the CTS of receives already posted, acks, credits) wait
// until the sender's QPs can take them: the sender moves its QPs to RTR only when the answer reaches it
// (over the TCP bootstrap, at its next progress call), and a SEND that arrives at a QP still in INIT is
// dropped and retried only after the ACK timeout (IB spec) -- RETRY_EXC_ERR on a brand-new link when
// the sender takes longer than timeout x retries. Found over rxe (ib_rxe_conformance: completer retries
// on a fresh rail-1 link). Here the answer reaches the sender 600 ms after the receiver accepted, more
// than the 4 x 67 ms of timeout 14 / retry_cnt 3.
TEST_F(IbDriver, ReceiverSendsNothingBeforeTheSenderIsReady) {
  CoreConfig cfg;
  cfg.eager_max = 16384;
  deferred_ = true;
  late_answer_ms_ = 600;
  Start(cfg, 14);
  Messages(kSizes);
  ASSERT_TRUE(Run(10000)) << "not delivered: " << sobs_.All() << robs_.All();
  // Both links up and quiet for another answer delay: a SEND of the receiver that went out too early
  // would end in RETRY_EXC_ERR meanwhile.
  ASSERT_TRUE(StepUntil(3000, [&] { return answers_.empty() && Healthy(0) && Healthy(1); })) << robs_.All();
  StepUntil(600, [] { return false; });
  Verify();
  EXPECT_EQ(sd_->stats().connects, 2u);
  EXPECT_EQ(rd_->stats().wc_errors, 0u);
  EXPECT_TRUE(sobs_.failovers.empty() && robs_.failovers.empty()) << sobs_.All() << robs_.All();
  EXPECT_TRUE(g_warns.empty()) << g_warns.front();
}

// A connection set up long before its first use (NCCL connects every channel at init; rerail-perf's
// all_reduce connections after a long sendrecv) connects its IB links only once driven: the time it
// sat unused with its links still connecting is no RERAIL_GIVEUP_MS outage (found between two rxe
// guests: the first all_reduce failed at once, "no link (ib rxe0 ...) for RERAIL_GIVEUP_MS").
TEST_F(IbDriver, ConnectionUnusedForLongerThanGiveUpStillConnects) {
  CoreConfig cfg;
  cfg.eager_max = 16384;
  cfg.giveup_ns = 300'000'000;
  deferred_ = hold_ = true;
  Start(cfg, 14);
  for (int i = 0; i < 5; ++i) Step();  // both cores polled with no link working: the sender dialled
  ASSERT_FALSE(Healthy(0) || Healthy(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(450));  // unused
  Step();  // first use: the peer, unused as long, has not answered yet
  hold_ = false;
  Messages({8, 4096, 3 * kChunk});
  ASSERT_TRUE(Run(5000)) << "not delivered: " << send_->status().message() << " / " << recv_->status().message();
  Verify();
  EXPECT_TRUE(sobs_.failovers.empty()) << sobs_.All();
}

// An unpolled peer is not a black hole: with receive credits nothing waits for a receive the peer's
// driver has not re-posted, so neither end's stall watchdog fires while the other one is not polled
// for many times the stall time (heartbeats every 5 ms into 8 receives per stream / 64 per link).
TEST_F(IbDriver, UnpolledPeerIsNotAStall) {
  CoreConfig cfg;
  cfg.eager_max = 16384;
  cfg.stall_ns = 100 * kMs;
  cfg.heartbeat_ns = 5 * kMs;
  Start(cfg, 14, 2, 8);
  Messages({100, 200, 300});
  ASSERT_TRUE(StepUntil(2000, [&] { return Healthy(0) && Healthy(1); }));
  for (auto& m : msgs_) {  // eager: the sender waits for their acks and sends heartbeats meanwhile
    bool posted = false;
    ASSERT_TRUE(sd_->Isend(now_, src_.data() + m.off, m.size, sh_, &m, &posted).ok() && posted);
  }
  auto run = [&](bool sender, bool receiver, uint64_t ms) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      now_ = std::max(now_ + 1, rr::NowNs());
      if (sender) sd_->Progress(now_);
      if (receiver) rd_->Progress(now_);
    }
  };
  run(true, false, 600);  // the receiver's NCCL does not call test()
  run(false, true, 600);  // the sender's does not
  for (auto& m : msgs_) {
    bool posted = false;
    ASSERT_TRUE(rd_->Irecv(now_, dst_.data() + m.off, m.size, rh_, &m, &posted, &m.slot).ok() && posted);
  }
  rr::net::Completion c;
  size_t received = 0;
  ASSERT_TRUE(StepUntil(2000, [&] {
    while (send_->NextCompletion(&c)) ++static_cast<Msg*>(c.owner)->sent;
    while (rd_->NextCompletion(&c)) {
      Msg& m = *static_cast<Msg*>(c.owner);
      ++m.received, ++received;
      m.recv_size = c.size;
      m.bytes_ok = memcmp(dst_.data() + m.off, src_.data() + m.off, m.size) == 0;
      memset(dst_.data() + m.off, kPoison, m.size);
      recv_->Release(m.slot);
    }
    return received == msgs_.size() && send_->acked() == msgs_.size();
  }));
  Verify();
  EXPECT_TRUE(sobs_.failovers.empty() && robs_.failovers.empty()) << sobs_.All() << robs_.All();
  EXPECT_TRUE(g_warns.empty()) << g_warns.front();
}

}  // namespace
