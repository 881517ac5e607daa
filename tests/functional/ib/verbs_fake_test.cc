// The fake libibverbs (tests/fakeverbs) enforces what real RC hardware enforces, so rerail's verbs code
// can fail on the host the way it would fail on an HCA. Each test provokes one rule and checks that the
// fake reports it exactly as the verbs do (an errno at post/modify time, or a work completion status),
// with a control case that passes where the rule is respected:
//   QP attribute masks per transition; posting before RTS; send-queue occupancy (unsignalled WRs hold
//   their slot until a later signalled completion is polled); CQ overrun; wire time = poll steps (no
//   byte moves at post time except inline); RNR wait until a receive is posted; MR keys/PD/bounds/access;
//   two devices on one fabric; PSN mismatch; black-hole and ack-only loss; device fatal.
// Needs RERAIL_IB_LIB=<libfakeverbs.so> and FAKEVERBS_DEVICES=3 (ctest ib_fake_verbs_semantics).
#include <arpa/inet.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "../../fakeverbs/fakeverbs.h"
#include "rerail/params.h"
#include "transports/ib/ib_device.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_events.h"
#include "transports/ib/ib_qp.h"

namespace {

using namespace rr::ib;
constexpr int kAccess = vx::kAccessLocalWrite | vx::kAccessRemoteWrite | vx::kAccessRemoteRead;

template <typename F>
F FakeFn(const VerbsLib& lib, const char* name) {
  void* h = dlopen(lib.path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  return h ? reinterpret_cast<F>(dlsym(h, name)) : nullptr;
}

class FakeVerbs : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(rr::Params::Load().ok());
    const VerbsLib& lib = VerbsLib::Default();
    ASSERT_TRUE(lib.loaded()) << lib.Describe();
    set_fault_ = FakeFn<int (*)(const char*, int, int)>(lib, "fakeverbs_set_fault");
    set_port_ = FakeFn<int (*)(const char*, int, int)>(lib, "fakeverbs_set_port_state");
    fatal_ = FakeFn<int (*)(const char*)>(lib, "fakeverbs_device_fatal");
    ASSERT_TRUE(set_fault_ && set_port_ && fatal_) << "not the fake verbs: " << lib.Describe();
    IbOptions o;
    ASSERT_TRUE(IbOptions::FromParams(&o).ok());
    ASSERT_TRUE(DiscoverIb(lib, o, &disc_).ok());
    ASSERT_GE(disc_.ports.size(), 2u) << disc_.why;
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(IbDevice::Open(lib, disc_.ports[i], &dev_[i]).ok());
    a_.assign(1 << 20, 0), b_.assign(1 << 20, 0);
    for (size_t i = 0; i < a_.size(); ++i) a_[i] = static_cast<uint8_t>(i * 13 + 1);
  }

  // A connected QP pair: x on device dx, y on device dy, each with its own CQ.
  void Pair(int dx, int dy, const QpOptions& opt, int cqe = 64) {
    ASSERT_TRUE(IbCq::Create(*dev_[dx], cqe, &cx_).ok());
    ASSERT_TRUE(IbCq::Create(*dev_[dy], cqe, &cy_).ok());
    ASSERT_TRUE(IbQp::Create(*dev_[dx], *cx_, *cx_, opt, &x_).ok());
    ASSERT_TRUE(IbQp::Create(*dev_[dy], *cy_, *cy_, opt, &y_).ok());
    ASSERT_TRUE(x_->Connect(y_->Endpoint()).ok());
    ASSERT_TRUE(y_->Connect(x_->Endpoint()).ok());
    ASSERT_TRUE(IbMr::Register(*dev_[dx], a_.data(), a_.size(), kAccess, &ma_).ok());
    ASSERT_TRUE(IbMr::Register(*dev_[dy], b_.data(), b_.size(), kAccess, &mb_).ok());
  }

  // Polls cq `steps` times (each poll is one wire-time step); returns what completed.
  static std::vector<vx::Wc> Steps(IbCq& cq, int steps, rr::Status* st = nullptr) {
    std::vector<vx::Wc> out;
    for (int i = 0; i < steps; ++i) {
      vx::Wc wc[16];
      int n = 0;
      rr::Status s = cq.Poll(16, wc, &n);
      if (!s.ok()) {
        if (st) *st = s;
        return out;
      }
      out.insert(out.end(), wc, wc + n);
    }
    return out;
  }
  // Polls until n completions or `ms` passed (retry timers run on the clock).
  static std::vector<vx::Wc> Wait(IbCq& cq, size_t n, int ms = 5000) {
    std::vector<vx::Wc> out;
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (out.size() < n && std::chrono::steady_clock::now() < end) {
      auto got = Steps(cq, 1);
      out.insert(out.end(), got.begin(), got.end());
      if (got.empty()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return out;
  }

  uint64_t B(size_t off) const { return reinterpret_cast<uint64_t>(b_.data() + off); }

  int (*set_fault_)(const char*, int, int) = nullptr;
  int (*set_port_)(const char*, int, int) = nullptr;
  int (*fatal_)(const char*) = nullptr;
  IbDiscovery disc_;
  std::unique_ptr<IbDevice> dev_[2];
  std::unique_ptr<IbCq> cx_, cy_;
  std::unique_ptr<IbQp> x_, y_;
  std::vector<uint8_t> a_, b_;
  std::unique_ptr<IbMr> ma_, mb_;
};

TEST_F(FakeVerbs, QpAttributeMasksAreChecked) {
  const VerbsLib& lib = dev_[0]->lib();
  std::unique_ptr<IbCq> cq;
  ASSERT_TRUE(IbCq::Create(*dev_[0], 16, &cq).ok());
  vx::QpInitAttr init{};
  init.send_cq = init.recv_cq = cq->cq();
  init.qp_type = vx::kQptRc;
  init.cap = {8, 8, 1, 1, 64};
  vx::Qp* qp = lib.create_qp(dev_[0]->pd(), &init);
  ASSERT_NE(qp, nullptr);
  vx::QpAttr a{};
  a.qp_state = vx::kQpsInit;
  a.port_num = 1;
  a.qp_access_flags = kAccess;
  const int init_mask = vx::kQpState | vx::kQpPkeyIndex | vx::kQpPort | vx::kQpAccessFlags;
  EXPECT_EQ(lib.modify_qp(qp, &a, init_mask & ~vx::kQpPort), EINVAL) << "INIT without PORT";
  EXPECT_EQ(lib.modify_qp(qp, &a, init_mask | vx::kQpSqPsn), EINVAL) << "INIT with an RTS-only attribute";
  a.qp_state = vx::kQpsRtr;
  EXPECT_EQ(lib.modify_qp(qp, &a, vx::kQpState), EINVAL) << "RESET -> RTR skips INIT";
  a.qp_state = vx::kQpsInit;
  a.port_num = 2;
  EXPECT_EQ(lib.modify_qp(qp, &a, init_mask), EINVAL) << "no port 2";
  a.port_num = 1;
  ASSERT_EQ(lib.modify_qp(qp, &a, init_mask), 0);
  vx::QpAttr r{};
  r.qp_state = vx::kQpsRtr;
  r.path_mtu = 5;
  r.dest_qp_num = 1;
  r.max_dest_rd_atomic = 1;
  r.ah_attr.port_num = 1;
  r.ah_attr.is_global = 1;
  const int rtr_mask = vx::kQpState | vx::kQpAv | vx::kQpPathMtu | vx::kQpDestQpn | vx::kQpRqPsn |
                       vx::kQpMaxDestRdAtomic | vx::kQpMinRnrTimer;
  EXPECT_EQ(lib.modify_qp(qp, &r, rtr_mask & ~vx::kQpMinRnrTimer), EINVAL) << "RTR without MIN_RNR_TIMER";
  r.ah_attr.is_global = 0;
  EXPECT_EQ(lib.modify_qp(qp, &r, rtr_mask), EINVAL) << "RoCE AV without a GRH";
  r.ah_attr.is_global = 1;
  EXPECT_EQ(lib.modify_qp(qp, &r, rtr_mask), 0);
  vx::QpAttr s{};
  s.qp_state = vx::kQpsRts;
  s.timeout = 14;
  const int rts_mask = vx::kQpState | vx::kQpTimeout | vx::kQpRetryCnt | vx::kQpRnrRetry | vx::kQpSqPsn | vx::kQpMaxQpRdAtomic;
  EXPECT_EQ(lib.modify_qp(qp, &s, rts_mask & ~vx::kQpSqPsn), EINVAL) << "RTS without SQ_PSN";
  EXPECT_EQ(lib.modify_qp(qp, &s, rts_mask | vx::kQpDestQpn), EINVAL) << "RTS changing DEST_QPN";
  EXPECT_EQ(lib.modify_qp(qp, &s, rts_mask), 0);
  vx::QpAttr q{};
  vx::QpInitAttr qi{};
  ASSERT_EQ(lib.query_qp(qp, &q, vx::kQpState, &qi), 0);
  EXPECT_EQ(q.qp_state, vx::kQpsRts);
  EXPECT_EQ(lib.destroy_qp(qp), 0);
}

TEST_F(FakeVerbs, PostBeforeRtsIsRefused) {
  std::unique_ptr<IbCq> cq;
  std::unique_ptr<IbQp> q;
  ASSERT_TRUE(IbCq::Create(*dev_[0], 16, &cq).ok());
  ASSERT_TRUE(IbQp::Create(*dev_[0], *cq, *cq, QpOptions(), &q).ok());
  EXPECT_FALSE(q->PostWrite(1, a_.data(), 8, 0, 0, 0, false, 0, true, true).ok()) << "send in RESET";
  EXPECT_FALSE(q->PostRecv(1).ok()) << "receive in RESET";
}

TEST_F(FakeVerbs, SendQueueSlotsFreeOnlyWhenASignalledCompletionIsPolled) {
  QpOptions opt;
  opt.max_send = 4;
  Pair(0, 1, opt);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(x_->PostWrite(i, a_.data(), 64, ma_->lkey(), B(64 * i), mb_->rkey(), false, 0, false).ok());
  ASSERT_TRUE(x_->PostWrite(3, a_.data(), 64, ma_->lkey(), B(192), mb_->rkey(), false, 0, true).ok());
  rr::Status full = x_->PostWrite(4, a_.data(), 64, ma_->lkey(), B(256), mb_->rkey(), false, 0, true);
  EXPECT_FALSE(full.ok()) << "a fifth WR in a 4-deep send queue";
  EXPECT_NE(full.ToString().find(strerror(ENOMEM)), std::string::npos) << full.ToString();
  EXPECT_TRUE(Steps(*cy_, 3).empty()) << "executed WRs still hold their slots until polled on their CQ";
  EXPECT_FALSE(x_->PostWrite(4, a_.data(), 64, ma_->lkey(), B(256), mb_->rkey(), false, 0, true).ok());
  auto c = Steps(*cx_, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 3u);
  for (int i = 4; i < 8; ++i)
    EXPECT_TRUE(x_->PostWrite(i, a_.data(), 64, ma_->lkey(), B(64 * i), mb_->rkey(), false, 0, i == 7).ok()) << i;
}

TEST_F(FakeVerbs, CqOverrunIsAnError) {
  Pair(0, 1, QpOptions(), /*cqe*/ 4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(x_->PostWrite(i, a_.data(), 64, ma_->lkey(), B(0), mb_->rkey(), false, 0, true).ok());
  rr::Status st;
  EXPECT_EQ(Steps(*cy_, 2).size(), 0u);  // x's four completions fill cx (nobody polls it yet)
  ASSERT_TRUE(x_->PostWrite(4, a_.data(), 64, ma_->lkey(), B(0), mb_->rkey(), false, 0, true).ok());
  Steps(*cy_, 2);  // the fifth completion arrives in a full CQ
  auto got = Steps(*cx_, 1, &st);
  EXPECT_TRUE(got.empty());
  EXPECT_FALSE(st.ok()) << "polling an overrun CQ fails";
}

TEST_F(FakeVerbs, BytesMoveAtWireTimeInOrderAndTheImmediateLast) {
  Pair(0, 1, QpOptions());
  ASSERT_TRUE(y_->PostRecv(50).ok());
  const uint32_t piece = 4096;
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(x_->PostWrite(i, a_.data() + i * piece, piece, ma_->lkey(), B(i * piece), mb_->rkey(), i == 19, 77, i == 19).ok());
  EXPECT_EQ(b_[0], 0) << "nothing moves at post time";
  auto r = Steps(*cy_, 1);
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(memcmp(b_.data(), a_.data(), piece), 0) << "the first step moved the first WRs";
  EXPECT_EQ(b_[19 * piece], 0) << "one step does not move everything";
  std::vector<vx::Wc> got;
  for (int i = 0; i < 10 && got.empty(); ++i) {
    got = Steps(*cy_, 1);
    if (got.empty()) {
      EXPECT_EQ(b_[19 * piece], 0) << "the immediate's bytes before its completion";
    }
  }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].opcode, vx::kWcRecvRdmaWithImm);
  EXPECT_EQ(ntohl(got[0].imm_data), 77u);
  EXPECT_EQ(memcmp(b_.data(), a_.data(), 20 * piece), 0) << "every earlier write landed before the immediate";
}

TEST_F(FakeVerbs, WriteWithImmWaitsForAReceive) {
  Pair(0, 1, QpOptions());  // rnr_retry 7: retried forever
  ASSERT_TRUE(x_->PostWrite(1, a_.data(), 128, ma_->lkey(), B(0), mb_->rkey(), true, 5, true).ok());
  EXPECT_TRUE(Steps(*cx_, 5).empty()) << "no receive posted: receiver not ready";
  EXPECT_EQ(b_[0], 0);
  ASSERT_TRUE(y_->PostRecv(9).ok());
  auto s = Steps(*cx_, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, vx::kWcSuccess);
  auto r = Steps(*cy_, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 9u);
  EXPECT_EQ(memcmp(b_.data(), a_.data(), 128), 0);
}

TEST_F(FakeVerbs, KeysBoundsAndAccessAreChecked) {
  Pair(0, 1, QpOptions());
  std::unique_ptr<IbMr> ro;  // on fake1, local write only: no remote access
  ASSERT_TRUE(IbMr::Register(*dev_[1], b_.data() + 8192, 4096, vx::kAccessLocalWrite, &ro).ok());
  std::unique_ptr<IbMr> bad;
  EXPECT_FALSE(IbMr::Register(*dev_[1], b_.data(), 64, vx::kAccessRemoteWrite, &bad).ok()) << "REMOTE_WRITE needs LOCAL_WRITE";
  struct Case {
    const char* what;
    uint32_t lkey, rkey;
    uint64_t raddr;
    uint32_t len;
    int status;
  } cases[] = {
      {"rkey of the other device's MR", ma_->lkey(), ma_->rkey(), reinterpret_cast<uint64_t>(a_.data()), 64,
       vx::kWcRemAccessErr},
      {"lkey used as rkey", ma_->lkey(), mb_->lkey(), B(0), 64, vx::kWcRemAccessErr},
      {"past the end of the MR", ma_->lkey(), mb_->rkey(), B(b_.size() - 32), 64, vx::kWcRemAccessErr},
      {"MR without REMOTE_WRITE", ma_->lkey(), ro->rkey(), B(8192), 64, vx::kWcRemAccessErr},
      {"bad lkey", ma_->lkey() ^ 0x7f0000, mb_->rkey(), B(0), 64, vx::kWcLocProtErr},
      {"good", ma_->lkey(), mb_->rkey(), B(0), 64, vx::kWcSuccess},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(x_->Reset().ok());
    ASSERT_TRUE(y_->Reset().ok());
    ASSERT_TRUE(x_->Connect(y_->Endpoint()).ok());
    ASSERT_TRUE(y_->Connect(x_->Endpoint()).ok());
    ASSERT_TRUE(x_->PostWrite(1, a_.data(), c.len, c.lkey, c.raddr, c.rkey, false, 0, false).ok());
    ASSERT_TRUE(x_->PostWrite(2, a_.data(), 8, ma_->lkey(), B(0), mb_->rkey(), false, 0, false).ok());
    auto s = Steps(*cx_, 2);
    if (c.status == vx::kWcSuccess) {
      EXPECT_TRUE(s.empty()) << c.what << ": unsignalled successes complete silently";
      EXPECT_EQ(memcmp(b_.data(), a_.data(), 64), 0) << c.what;
      continue;
    }
    ASSERT_EQ(s.size(), 2u) << c.what << ": the error completes although unsignalled, then the flush";
    EXPECT_EQ(s[0].status, c.status) << c.what;
    EXPECT_EQ(s[1].status, vx::kWcWrFlushErr) << c.what;
    EXPECT_EQ(x_->QueryState(), vx::kQpsErr) << c.what;
    EXPECT_EQ(b_[0], 0) << c.what;
  }
}

TEST_F(FakeVerbs, PsnMismatchIsADeadPath) {
  QpOptions opt;
  opt.timeout = 8;  // 4.096 us x 256 x 4 = 4 ms
  opt.retry_cnt = 3;
  Pair(0, 1, opt);
  QpEndpoint ex = x_->Endpoint();
  ex.psn = (ex.psn + 5) & 0xffffff;  // y expects another PSN than x sends
  ASSERT_TRUE(y_->Reset().ok());
  ASSERT_TRUE(y_->Connect(ex).ok());
  ASSERT_TRUE(x_->PostWrite(1, a_.data(), 64, ma_->lkey(), B(0), mb_->rkey(), false, 0, true).ok());
  auto s = Wait(*cx_, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, vx::kWcRetryExcErr);
  EXPECT_EQ(b_[0], 0);
}

TEST_F(FakeVerbs, BlackHoleAndAckLoss) {
  QpOptions opt;
  opt.timeout = 8;
  opt.retry_cnt = 3;
  Pair(0, 1, opt);
  const char* d1 = disc_.ports[1].dev.c_str();
  ASSERT_EQ(set_fault_(d1, 1, FAKEVERBS_FAULT_DROP_DATA), 0);
  ASSERT_TRUE(y_->PostRecv(1).ok());
  ASSERT_TRUE(x_->PostWrite(2, a_.data(), 256, ma_->lkey(), B(0), mb_->rkey(), true, 3, true).ok());
  auto s = Wait(*cx_, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, vx::kWcRetryExcErr) << "black hole";
  EXPECT_EQ(b_[0], 0) << "nothing arrived";
  EXPECT_TRUE(Steps(*cy_, 1).empty()) << "the receiver saw nothing";

  ASSERT_EQ(set_fault_(d1, 1, FAKEVERBS_FAULT_DROP_ACKS), 0);
  ASSERT_TRUE(x_->Reset().ok());
  ASSERT_TRUE(y_->Reset().ok());
  ASSERT_TRUE(x_->Connect(y_->Endpoint()).ok());
  ASSERT_TRUE(y_->Connect(x_->Endpoint()).ok());
  ASSERT_TRUE(y_->PostRecv(4).ok());
  ASSERT_TRUE(x_->PostWrite(5, a_.data(), 256, ma_->lkey(), B(0), mb_->rkey(), true, 6, true).ok());
  s = Wait(*cx_, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, vx::kWcRetryExcErr) << "ack lost: the sender cannot know";
  EXPECT_EQ(memcmp(b_.data(), a_.data(), 256), 0) << "but the data landed";
  auto r = Steps(*cy_, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, vx::kWcSuccess);
  EXPECT_EQ(ntohl(r[0].imm_data), 6u);
  ASSERT_EQ(set_fault_(d1, 1, FAKEVERBS_FAULT_NONE), 0);
}

// A down port: WRs executed on it fail locally at once (LOC_QP_OP_ERR, as rxe does); WRs towards a down
// remote port are retried until the dead-path time (RETRY_EXC_ERR); after the heal the pair reconnects.
TEST_F(FakeVerbs, PortDownLocalAndRemote) {
  QpOptions opt;
  opt.timeout = 8;
  opt.retry_cnt = 3;
  Pair(0, 1, opt);
  struct Case {
    int down;
    int status;
  } cases[] = {{1, vx::kWcRetryExcErr}, {0, vx::kWcLocQpOpErr}, {-1, vx::kWcSuccess}};
  for (const Case& c : cases) {
    if (c.down >= 0) {
      ASSERT_EQ(set_port_(disc_.ports[c.down].dev.c_str(), 1, 0), 0);
    }
    ASSERT_TRUE(x_->PostWrite(1, a_.data(), 64, ma_->lkey(), B(0), mb_->rkey(), false, 0, true).ok());
    auto s = Wait(*cx_, 1);
    ASSERT_EQ(s.size(), 1u) << "port " << c.down << " down";
    EXPECT_EQ(s[0].status, c.status) << "port " << c.down << " down";
    EXPECT_EQ(b_[0] != 0, c.status == vx::kWcSuccess) << "port " << c.down << " down";
    if (c.down >= 0) {
      ASSERT_EQ(set_port_(disc_.ports[c.down].dev.c_str(), 1, 1), 0);
    }
    ASSERT_TRUE(x_->Reset().ok());
    ASSERT_TRUE(y_->Reset().ok());
    ASSERT_TRUE(x_->Connect(y_->Endpoint()).ok());
    ASSERT_TRUE(y_->Connect(x_->Endpoint()).ok());
  }
}

TEST_F(FakeVerbs, DeviceFatal) {
  ASSERT_EQ(disc_.ports.size(), 3u) << "FAKEVERBS_DEVICES=3: fake2 is the one that dies";
  std::unique_ptr<IbDevice> d2;
  ASSERT_TRUE(IbDevice::Open(dev_[0]->lib(), disc_.ports[2], &d2).ok());
  std::mutex mu;
  std::vector<IbEvent> events;
  std::unique_ptr<IbEventMonitor> mon;
  ASSERT_TRUE(IbEventMonitor::Start({d2.get()}, [&](const IbEvent& e) {
    std::lock_guard<std::mutex> g(mu);
    events.push_back(e);
  }, &mon).ok());
  {
    std::unique_ptr<IbCq> cq;
    std::unique_ptr<IbQp> x, y;
    ASSERT_TRUE(IbCq::Create(*d2, 16, &cq).ok());
    ASSERT_TRUE(IbQp::Create(*d2, *cq, *cq, QpOptions(), &x).ok());
    ASSERT_TRUE(IbQp::Create(*d2, *cq, *cq, QpOptions(), &y).ok());
    ASSERT_TRUE(x->Connect(y->Endpoint()).ok());
    ASSERT_TRUE(y->Connect(x->Endpoint()).ok());
    ASSERT_TRUE(y->PostRecv(1).ok());
    ASSERT_EQ(fatal_(disc_.ports[2].dev.c_str()), 0);
    auto f = Steps(*cq, 1);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f[0].status, vx::kWcWrFlushErr);
    EXPECT_FALSE(x->PostWrite(2, a_.data(), 8, 0, 0, 0, false, 0, true, true).ok()) << "posting on a dead device";
  }
  bool seen = false;
  for (int i = 0; i < 2000 && !seen; ++i) {
    {
      std::lock_guard<std::mutex> g(mu);
      for (const IbEvent& e : events) seen |= e.kind == IbEvent::Kind::kDeviceFatal;
    }
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(seen) << "DEVICE_FATAL on the async fd";
  mon.reset();
}

}  // namespace
