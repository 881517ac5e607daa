// The fake libibverbs across processes (FAKEVERBS_WIRE, tests/fakeverbs/fake_host.cc): this process is
// the requester, a child process (this binary with --wire-child, fresh, so it joins the fabric as
// another host) the responder, each with fake0 of its own host. Each test provokes one RC rule across
// the processes, with a control case where the rule is respected:
//   WRITE / WRITE_WITH_IMM / SEND / READ land while the responder does not poll (its HCA thread executes
//   them; the receives complete after their bytes); RNR waits for a late receive (rnr_retry 7) or ends
//   in RNR_RETRY_EXC_ERR; a bad rkey is REM_ACCESS_ERR and moves the responder QP to ERR; a PSN ahead
//   of the responder's, a black hole at the responder's port and a dead responder end in
//   RETRY_EXC_ERR; a PSN behind it is a duplicate (acknowledged, not executed); ack-only loss at the
//   responder lands the data but fails the requester; a dead process's host index is reclaimed; faults
//   written into the running responder's FAKEVERBS_CONTROL FIFO take effect (black hole, port down / up
//   with their async events, heal) and bad commands are refused; txloss at the responder is one-way.
// Needs RERAIL_IB_LIB=<libfakeverbs.so> (ctest ib_fake_verbs_wire); the fabric's directory is made here
// (FAKEVERBS_WIRE, inherited by the children) and removed at exit.
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../../fakeverbs/fakeverbs.h"
#include "rerail/params.h"
#include "transports/ib/ib_device.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_qp.h"

namespace {

using namespace rr::ib;
constexpr int kAccess = vx::kAccessLocalWrite | vx::kAccessRemoteWrite | vx::kAccessRemoteRead;
constexpr size_t kBuf = 1 << 20;
constexpr size_t kRecvArea = 900000;  // the responder's receives: 4 KiB each from here
std::string g_self;                   // this binary, for the child

uint8_t Pat(int seed, size_t i) { return static_cast<uint8_t>(i * 31 + seed * 7 + (i >> 9)); }

// What the two processes exchange to connect one QP each.
struct Hello {
  QpEndpoint ep;
  uint64_t addr;  // the registered buffer
  uint32_t rkey;
  uint32_t pad;
};

bool ReadFull(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r, n -= static_cast<size_t>(r);
  }
  return true;
}

bool ReadLine(int fd, std::string* line) {
  line->clear();
  for (char ch; ReadFull(fd, &ch, 1);) {
    if (ch == '\n') return true;
    *line += ch;
  }
  return false;
}

void WriteLine(int fd, const std::string& s) {
  std::string l = s + "\n";
  (void)!write(fd, l.data(), l.size());
}

// One fake0 QP with its CQ and a registered 1 MiB buffer, in either process.
struct Side {
  IbDiscovery disc;
  std::unique_ptr<IbDevice> dev;
  std::unique_ptr<IbCq> cq;
  std::unique_ptr<IbQp> qp;
  std::unique_ptr<IbMr> mr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf);

  rr::Status Open(const QpOptions& opt) {
    RR_CHECK(rr::Params::Load());
    IbOptions o;
    RR_CHECK(IbOptions::FromParams(&o));
    RR_CHECK(DiscoverIb(VerbsLib::Default(), o, &disc));
    if (disc.ports.empty()) return rr::Status::Internal("no fake port: " + disc.why);
    RR_CHECK(IbDevice::Open(VerbsLib::Default(), disc.ports[0], &dev));
    RR_CHECK(IbCq::Create(*dev, 64, &cq));
    RR_CHECK(IbQp::Create(*dev, *cq, *cq, opt, &qp));
    return IbMr::Register(*dev, buf.data(), buf.size(), kAccess, &mr);
  }
  Hello Mine() const { return Hello{qp->Endpoint(), reinterpret_cast<uint64_t>(buf.data()), mr->rkey(), 0}; }

  // Completions until n arrived or ms passed.
  std::vector<vx::Wc> Wait(size_t n, int ms) {
    std::vector<vx::Wc> out;
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (out.size() < n && std::chrono::steady_clock::now() < end) {
      vx::Wc wc[16];
      int got = 0;
      if (!cq->Poll(16, wc, &got).ok()) break;
      out.insert(out.end(), wc, wc + got);
      if (got == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return out;
  }
};

// The responder process: connects, then runs the parent's commands on fd 3 (one reply line each):
//   recv N | fault F | check OFF LEN SEED | poll N MS | state | exit.
int ChildMain(int rnr_retry, int psn_skew) {
  const int fd = 3;
  QpOptions opt;
  opt.rnr_retry = static_cast<uint8_t>(rnr_retry);
  Side s;
  rr::Status st = s.Open(opt);
  if (!st.ok()) {
    fprintf(stderr, "wire child: %s\n", st.ToString().c_str());
    return 1;
  }
  for (size_t i = 0; i < kBuf; ++i) s.buf[i] = Pat(99, i);
  Hello mine = s.Mine(), peer{};
  (void)!write(fd, &mine, sizeof(mine));
  if (!ReadFull(fd, &peer, sizeof(peer))) return 1;
  peer.ep.psn = (peer.ep.psn + static_cast<uint32_t>(psn_skew)) & 0xffffff;  // a requester we do not expect
  if (!s.qp->Connect(peer.ep).ok()) return 1;
  WriteLine(fd, "connected");
  auto set_fault = reinterpret_cast<int (*)(const char*, int, int)>(
      dlsym(dlopen(VerbsLib::Default().path().c_str(), RTLD_NOW | RTLD_NOLOAD), "fakeverbs_set_fault"));
  int posted = 0;
  for (std::string line; ReadLine(fd, &line);) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    std::ostringstream out;
    if (cmd == "recv") {
      int n = 0;
      in >> n;
      bool ok = true;
      for (int k = 0; k < n; ++k, ++posted)
        ok = ok && s.qp->PostRecv(100 + posted, s.buf.data() + kRecvArea + 4096 * posted, 4096, s.mr->lkey()).ok();
      out << (ok ? "ok" : "post_recv failed");
    } else if (cmd == "fault") {
      int f = 0;
      in >> f;
      out << (set_fault && set_fault("fake0", 1, f) == 0 ? "ok" : "no fault control");
    } else if (cmd == "check") {
      size_t off = 0, len = 0;
      int seed = 0;
      in >> off >> len >> seed;
      size_t bad = len;
      for (size_t i = 0; i < len && bad == len; ++i)
        if (s.buf[off + i] != Pat(seed, i)) bad = i;
      out << (bad == len ? "ok" : "differs at " + std::to_string(bad));
    } else if (cmd == "poll") {
      size_t n = 0;
      int ms = 0;
      in >> n >> ms;
      for (const vx::Wc& w : s.Wait(n, ms))
        out << "wc " << w.status << " " << w.opcode << " " << w.byte_len << " " << w.imm_data << " ";
      out << "end";
    } else if (cmd == "state") {
      out << s.qp->QueryState();
    } else if (cmd == "port") {  // fake0's port state (enum ibv_port_state)
      vx::PortAttr a{};
      out << (s.dev->lib().query_port(s.dev->context(), 1, &a) == 0 ? std::to_string(a.state) : "query failed");
    } else if (cmd == "event") {  // the next async event of fake0's context (2 s at most)
      pollfd p{reinterpret_cast<const vx::ContextHead*>(s.dev->context())->async_fd, POLLIN, 0};
      vx::AsyncEvent e{};
      if (poll(&p, 1, 2000) == 1 && s.dev->lib().get_async_event(s.dev->context(), &e) == 0) {
        out << e.event_type;
        s.dev->lib().ack_async_event(&e);
      } else {
        out << "none";
      }
    } else if (cmd == "exit") {
      _exit(0);
    } else {
      out << "unknown command " << cmd;
    }
    WriteLine(fd, out.str());
  }
  return 0;
}

class VerbsWire : public ::testing::Test {
 protected:
  // Starts the responder process; peer_ = what it sent to connect to it.
  // control: the child's FAKEVERBS_CONTROL (that process only; this one reads no commands).
  void Spawn(int child_rnr_retry = 7, int child_psn_skew = 0, const std::string& control = "") {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      dup2(sv[1], 3);  // clears FD_CLOEXEC on 3
      if (!control.empty()) setenv("FAKEVERBS_CONTROL", control.c_str(), 1);
      std::string r = std::to_string(child_rnr_retry), p = std::to_string(child_psn_skew);
      execl(g_self.c_str(), g_self.c_str(), "--wire-child", r.c_str(), p.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(sv[1]);
    fd_ = sv[0];
    ASSERT_TRUE(ReadFull(fd_, &peer_, sizeof(peer_))) << "the responder did not start";
  }

  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    close(fd_);
    fd_ = -1;
  }

  // Starts the responder and connects to it (requester QP options `opt`).
  void Start(const QpOptions& opt, int child_rnr_retry = 7, int child_psn_skew = 0, const std::string& control = "") {
    Spawn(child_rnr_retry, child_psn_skew, control);
    ASSERT_TRUE(side_.Open(opt).ok());
    for (size_t i = 0; i < kBuf; ++i) side_.buf[i] = Pat(1, i);
    Hello mine = side_.Mine();
    ASSERT_EQ(write(fd_, &mine, sizeof(mine)), static_cast<ssize_t>(sizeof(mine)));
    ASSERT_TRUE(side_.qp->Connect(peer_.ep).ok());
    ASSERT_EQ(Cmd(""), "connected");
  }

  void TearDown() override {
    if (pid_ > 0) Kill();
  }

  // Sends a command line ("" = none) and returns the responder's reply line.
  std::string Cmd(const std::string& c) {
    if (!c.empty()) WriteLine(fd_, c);
    std::string r;
    return ReadLine(fd_, &r) ? r : "responder gone";
  }

  rr::Status Write(uint64_t id, size_t off, size_t len, size_t roff, bool imm = false, uint32_t rkey_delta = 0) {
    return side_.qp->PostWrite(id, side_.buf.data() + off, static_cast<uint32_t>(len), side_.mr->lkey(),
                               peer_.addr + roff, peer_.rkey + rkey_delta, imm, 7, true);
  }

  Side side_;
  Hello peer_{};
  pid_t pid_ = -1;
  int fd_ = -1;
};

// The host index of a fake port, from its link-local GID (fe80::<GUID>, GUID = base + host * 64 + dev).
int HostOf(const QpEndpoint& ep) {
  uint64_t guid = 0;
  for (int i = 8; i < 16; ++i) guid = guid << 8 | ep.gid.raw[i];
  return static_cast<int>((guid - 0x0002c90300fa0000ull) / 64);
}

std::string Statuses(const std::vector<vx::Wc>& w) {
  std::string s;
  for (const vx::Wc& c : w) s += std::to_string(c.status) + " ";
  return s;
}

TEST_F(VerbsWire, WritesSendsAndReadsLandWithoutTheResponderPolling) {
  Start(QpOptions());
  ASSERT_EQ(Cmd("recv 2"), "ok");
  // Inline = copied at post time; the others are read from our buffer when they leave.
  for (size_t i = 0; i < kBuf; ++i) side_.buf[i] = Pat(2, i);
  ASSERT_TRUE(Write(1, 0, 65536, 0).ok());
  ASSERT_TRUE(Write(2, 0, 1000, 70000, /*imm*/ true).ok());
  ASSERT_TRUE(side_.qp->PostSend(3, side_.buf.data(), 100, side_.mr->lkey(), false).ok());
  std::vector<uint8_t> got(4096);
  std::unique_ptr<IbMr> gmr;
  ASSERT_TRUE(IbMr::Register(*side_.dev, got.data(), got.size(), kAccess, &gmr).ok());
  ASSERT_TRUE(side_.qp->PostRead(4, got.data(), 4096, gmr->lkey(), peer_.addr + 200000, peer_.rkey).ok());
  // The responder is blocked on its command channel, not polling: its HCA thread answers.
  auto wc = side_.Wait(4, 5000);
  ASSERT_EQ(wc.size(), 4u) << "completions while the responder does not poll: " << Statuses(wc);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(wc[i].status, vx::kWcSuccess) << i;
    EXPECT_EQ(wc[i].wr_id, i + 1) << "in posting order";
  }
  EXPECT_EQ(wc[3].opcode, vx::kWcRdmaRead);
  EXPECT_EQ(wc[3].byte_len, 4096u);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], Pat(99, 200000 + i)) << "READ byte " << i;
  EXPECT_EQ(Cmd("check 0 65536 2"), "ok") << "RDMA WRITE bytes";
  EXPECT_EQ(Cmd("check 70000 1000 2"), "ok") << "WRITE_WITH_IMM bytes";
  EXPECT_EQ(Cmd("check " + std::to_string(kRecvArea + 4096) + " 100 2"), "ok") << "SEND bytes in the 2nd receive";
  EXPECT_EQ(Cmd("poll 2 2000"), "wc 0 129 1000 " + std::to_string(htonl(7)) + " wc 0 128 100 0 end")
      << "RECV_RDMA_WITH_IMM then RECV, after their bytes";
}

TEST_F(VerbsWire, RnrWaitsForALateReceive) {
  Start(QpOptions());  // rnr_retry 7: the requester retries receiver-not-ready forever
  ASSERT_TRUE(side_.qp->PostSend(1, side_.buf.data(), 64, side_.mr->lkey(), false).ok());
  EXPECT_TRUE(side_.Wait(1, 300).empty()) << "a SEND completed with no receive posted";
  ASSERT_EQ(Cmd("recv 1"), "ok");
  auto wc = side_.Wait(1, 5000);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, vx::kWcSuccess);
  EXPECT_EQ(Cmd("check " + std::to_string(kRecvArea) + " 64 1"), "ok");
}

TEST_F(VerbsWire, RnrRetryExhaustedIsAnError) {
  QpOptions opt;
  opt.rnr_retry = 1;
  Start(opt);
  ASSERT_TRUE(side_.qp->PostSend(1, side_.buf.data(), 64, side_.mr->lkey(), false).ok());
  auto wc = side_.Wait(1, 5000);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, vx::kWcRnrRetryExcErr);
}

TEST_F(VerbsWire, BadRkeyIsRemoteAccessErrorAndTheResponderQpFails) {
  Start(QpOptions());
  ASSERT_TRUE(Write(1, 0, 64, 0).ok());  // control: the right key
  auto wc = side_.Wait(1, 5000);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, vx::kWcSuccess);
  ASSERT_TRUE(Write(2, 0, 64, 0, false, /*rkey_delta*/ 0x100).ok());
  ASSERT_TRUE(Write(3, 0, 64, 0).ok());
  wc = side_.Wait(2, 5000);
  ASSERT_EQ(wc.size(), 2u) << Statuses(wc);
  EXPECT_EQ(wc[0].status, vx::kWcRemAccessErr);
  EXPECT_EQ(wc[1].status, vx::kWcWrFlushErr) << "what follows the error flushes";
  EXPECT_EQ(Cmd("state"), std::to_string(vx::kQpsErr)) << "the responder QP moves to ERR";
}

// The responder expects a PSN 5 below ours: our packets are ahead of sequence, dropped, resent, dropped.
TEST_F(VerbsWire, PsnAheadOfTheResponderIsRetryExceeded) {
  Start(QpOptions(), 7, /*child_psn_skew*/ -5);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(Write(1, 0, 64, 0).ok());
  auto wc = side_.Wait(1, 5000);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, vx::kWcRetryExcErr);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ms, DeadPathMs(14, 3)) << "failed before the retries ran out";
  EXPECT_EQ(Cmd("check 0 64 99"), "ok") << "an out-of-sequence packet must not land";
}

// The responder expects a PSN 5 above ours: to it our packets are duplicates of ones it executed, and
// RC acknowledges a duplicate without executing it again. The requester completes, nothing lands.
TEST_F(VerbsWire, PsnBehindTheResponderIsADuplicateAckedButNotExecuted) {
  Start(QpOptions(), 7, /*child_psn_skew*/ 5);
  ASSERT_TRUE(Write(1, 0, 64, 0).ok());
  auto wc = side_.Wait(1, 5000);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, vx::kWcSuccess);
  EXPECT_EQ(Cmd("check 0 64 99"), "ok") << "a duplicate was executed again";
}

TEST_F(VerbsWire, BlackHoleAtTheResponderIsRetryExceeded) {
  Start(QpOptions());
  ASSERT_EQ(Cmd("fault " + std::to_string(FAKEVERBS_FAULT_DROP_DATA)), "ok");
  ASSERT_TRUE(Write(1, 0, 64, 0).ok());
  auto wc = side_.Wait(1, 5000);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, vx::kWcRetryExcErr);
  EXPECT_EQ(Cmd("check 0 64 99"), "ok") << "nothing lands in a black hole";
}

TEST_F(VerbsWire, AckLossAtTheResponderLandsTheDataButFailsTheRequester) {
  Start(QpOptions());
  ASSERT_EQ(Cmd("fault " + std::to_string(FAKEVERBS_FAULT_DROP_ACKS)), "ok");
  ASSERT_TRUE(Write(1, 0, 64, 0).ok());
  auto wc = side_.Wait(1, 5000);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, vx::kWcRetryExcErr);
  EXPECT_EQ(Cmd("check 0 64 1"), "ok") << "the data landed, only its ack was lost";
  ASSERT_EQ(Cmd("fault 0"), "ok");
}

// Faults injected into the running responder from outside (FAKEVERBS_CONTROL, a FIFO the responder's
// HCA thread reads), as a test script does: each takes effect with the same semantics as the in-process
// control API, and the responder records it in <fifo>.applied.
TEST_F(VerbsWire, ControlChannelFaultsAndHealsARunningProcess) {
  const std::string ctl = std::string(getenv("FAKEVERBS_WIRE")) + "/ctl-" + std::to_string(getpid());
  Start(QpOptions(), 7, 0, ctl);
  ASSERT_TRUE(Write(1, 0, 64, 4096).ok());  // control: no fault
  auto wc = side_.Wait(1, 5000);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, vx::kWcSuccess);
  size_t applied = 0;
  // Writes a command to the FIFO and waits (5 s at most) for its outcome line in <fifo>.applied.
  auto command = [&](const std::string& c) {
    FILE* f = fopen(ctl.c_str(), "w");  // never blocks: the responder holds the FIFO open
    if (!f) return std::string("cannot open ") + ctl;
    fprintf(f, "%s\n", c.c_str());
    fclose(f);
    for (int i = 0; i < 500; ++i) {
      std::ifstream in(ctl + ".applied");
      std::vector<std::string> lines;
      for (std::string l; std::getline(in, l);) lines.push_back(l);
      if (lines.size() > applied) return lines[applied++];
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::string("not applied");
  };
  EXPECT_EQ(command("blackhole fake0"), "blackhole fake0 -> ok");
  ASSERT_TRUE(Write(2, 0, 64, 0).ok());
  wc = side_.Wait(1, 5000);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, vx::kWcRetryExcErr) << "the black hole commanded from outside";
  EXPECT_EQ(Cmd("check 0 64 99"), "ok") << "nothing lands in a black hole";
  EXPECT_EQ(Cmd("check 4096 64 1"), "ok") << "the write before it landed";
  EXPECT_EQ(command("down fake0"), "down fake0 -> ok (PORT_ERR)");
  EXPECT_EQ(Cmd("port"), std::to_string(vx::kPortDown));
  EXPECT_EQ(Cmd("event"), std::to_string(vx::kEventPortErr));
  EXPECT_EQ(command("up fake0"), "up fake0 -> ok (PORT_ACTIVE)");
  EXPECT_EQ(Cmd("port"), std::to_string(vx::kPortActive));
  EXPECT_EQ(Cmd("event"), std::to_string(vx::kEventPortActive));
  EXPECT_EQ(command("down fake0"), "down fake0 -> ok (PORT_ERR)");
  EXPECT_EQ(command("heal fake0"), "heal fake0 -> ok (PORT_ACTIVE)") << "heal clears the black hole and the down port";
  EXPECT_EQ(command("frobnicate fake0"), "frobnicate fake0 -> error: unknown command frobnicate");
  EXPECT_EQ(command("down fake9"), "down fake9 -> error: want down|up|blackhole|ackloss|txloss|heal|fatal <device> or stats");
  std::string stats = command("stats");
  EXPECT_NE(stats.find("fake0 tx_requests="), std::string::npos) << stats;
  EXPECT_NE(stats.find("fake0 tx_requests=0 tx_bytes=0 rx_requests=1 rx_bytes=64"), std::string::npos) << "the one WRITE that landed: " << stats;
}

// txloss is one-way: what the faulted port sends is lost, what it receives still lands and is answered
// (rerail's acks from that port vanish while the data towards it completes).
TEST_F(VerbsWire, TxLossAtTheResponderStillLandsAndAnswersItsRequests) {
  const std::string ctl = std::string(getenv("FAKEVERBS_WIRE")) + "/ctl-tx-" + std::to_string(getpid());
  Start(QpOptions(), 7, 0, ctl);
  FILE* f = fopen(ctl.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fprintf(f, "txloss fake0\n");
  fclose(f);
  std::string applied;
  for (int i = 0; i < 500 && applied.empty(); ++i) {
    std::ifstream in(ctl + ".applied");
    std::getline(in, applied);
    if (applied.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(applied, "txloss fake0 -> ok");
  ASSERT_TRUE(Write(1, 0, 64, 0).ok());
  auto wc = side_.Wait(1, 5000);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, vx::kWcSuccess) << "requests into a txloss port land and are answered";
  EXPECT_EQ(Cmd("check 0 64 1"), "ok");
}

// A process killed without cleaning up leaves its claim (<dir>/host<h>.pid); the next process to join
// finds its pid dead and takes the index again instead of growing the fabric.
TEST_F(VerbsWire, StaleHostIndexIsReclaimed) {
  Spawn();
  const int first = HostOf(peer_.ep);
  Kill();
  Spawn();
  EXPECT_EQ(HostOf(peer_.ep), first) << "the dead process's host index was not reused";
  EXPECT_GE(first, 0);
  EXPECT_LT(first, 2) << "only this process and one child are in the fabric";
}

TEST_F(VerbsWire, DeadResponderIsRetryExceeded) {
  Start(QpOptions());
  ASSERT_TRUE(Write(1, 0, 64, 0).ok());  // control: alive
  auto wc = side_.Wait(1, 5000);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, vx::kWcSuccess);
  Kill();
  ASSERT_TRUE(Write(2, 0, 64, 0).ok());
  wc = side_.Wait(1, 5000);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, vx::kWcRetryExcErr) << "a dead host answers nothing";
}

}  // namespace

namespace {
char g_dir[] = "/tmp/rrwire.XXXXXX";
// Registered before the fake is loaded, so it runs after the fake's own exit handler removed its files.
void RemoveDir() {
  if (DIR* d = opendir(g_dir)) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') unlink((std::string(g_dir) + "/" + e->d_name).c_str());
    closedir(d);
  }
  rmdir(g_dir);
}
}  // namespace

int main(int argc, char** argv) {
  char self[4096] = {0};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) > 0) g_self = self;
  if (argc == 4 && strcmp(argv[1], "--wire-child") == 0) return ChildMain(atoi(argv[2]), atoi(argv[3]));
  if (mkdtemp(g_dir) == nullptr) return 2;
  atexit(RemoveDir);
  setenv("FAKEVERBS_WIRE", g_dir, 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
