// fakeverbs — several processes, one fabric (FAKEVERBS_WIRE=<dir>): each process is a host with the
// same devices fake0..N-1 at its own addresses, and a QP whose AV names another host's device sends its
// WRs to that process over a Unix socket, as an RC requester sends packets to a remote HCA.
//
// Hosts. A process claims the first free index h by creating <dir>/host<h>.pid (O_EXCL, its pid inside;
// a file whose pid is dead is stale and reclaimed). While one of its contexts is open it listens on
// <dir>/host<h>.sock and runs the "HCA" thread. Each pair of hosts shares one connection (the later
// host dials the earlier ones when it starts; kHello names it), both ways: requests and the answers
// to them, so descriptors do not come and go with traffic.
//
// Requester (HostLink::Progress, in poll_cq like the in-process wire): sends up to BURST new WRs of a QP
// per step, each with the next PSN (SEND/WRITE carry their bytes, gathered now); completes WRs in order
// on their answers (an answer also acks everything before it, as RC acks are cumulative; a READ's
// answer carries its bytes); re-sends from the oldest unanswered WR each 4.096 us x 2^timeout; fails it
// RETRY_EXC_ERR after (retry_cnt + 1) such tries without an answer (timeout 0: never). The clock does
// not run while the connection still holds unsent bytes (the packet has not left the NIC).
//
// Responder (the HCA thread, without waiting for the application to poll): the checks of the in-process
// wire in the same order — port up and no black hole, QP RTR/RTS and connected back to the sender,
// PSN in sequence (an old PSN is a duplicate: answered again without executing it twice; a later one is
// dropped), rkey/PD/bounds/access (REM_ACCESS_ERR, QP to ERR, IBV_EVENT_QP_ACCESS_ERR), a receive for
// SEND / WRITE_WITH_IMM (else an RNR NAK with min_rnr_timer; the requester retries per rnr_retry),
// SEND length; then the bytes land, the receive completes after them, and the answer goes back.
//
// Faults of this process's ports apply to traffic touching them: black hole drops requests and answers
// in both directions, ack-only loss drops answers (the data lands), one-way loss drops the requests
// this port sends (it still executes and answers others'), a down port answers nothing. A peer
// that died (EOF) is unreachable: its WRs end in RETRY_EXC_ERR.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "fake_fabric.h"
#include "fakeverbs.h"

namespace fakeverbs {
namespace {

constexpr uint32_t kMagic = 0xfa4e1b01;
constexpr uint8_t kRequest = 1, kAnswer = 2, kHello = 3;  // kHello: first frame of a dialled connection
constexpr int32_t kAnsAck = 0;  // IBV_WC_SUCCESS; other answers are a WC status or kAnsRnr
constexpr int32_t kAnsRnr = -1;
constexpr int kWcRemInvReqErr = 9;
constexpr uint64_t kMaxPayload = 1ull << 31;  // max_msg_sz
constexpr size_t kReadBudget = 8u << 20;      // bytes read from one connection per round (fairness)

// One frame on a host connection: this head, then `payload` bytes.
struct FrameHead {
  uint32_t magic;
  uint8_t type;      // kRequest | kAnswer | kHello
  uint8_t src_host;  // the requester's host and device
  uint8_t src_dev;
  uint8_t dst_dev;   // the responder's device
  uint32_t src_qpn;  // the requester's QP
  uint32_t dst_qpn;  // the responder's QP
  uint32_t psn;
  uint32_t gen;   // the requester QP's gen (answers to an earlier life are ignored)
  uint64_t seq;   // the requester's WR sequence number, echoed in the answer
  int32_t code;   // request: the WR opcode; answer: kAnsAck | kAnsRnr | a WC error status
  uint32_t imm;   // request: the immediate; RNR answer: the responder's min_rnr_timer
  uint32_t rkey;
  uint32_t reserved;
  uint64_t remote_addr;
  uint64_t length;   // request: bytes to write / send / read
  uint64_t payload;  // bytes following the head
};

struct Conn {
  int id = -1;
  int fd = -1;
  int host = -1;  // the host at the other end (an accepted one: once its kHello arrived)
  bool dead = false;
  std::vector<uint8_t> out;  // unsent bytes from out_off
  size_t out_off = 0;
  FrameHead in{};  // the frame being read
  size_t in_have = 0;
  std::vector<uint8_t> body;
  size_t body_have = 0;
};

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::string g_pid_path, g_sock_path;  // this process's claim, removed at exit
std::atomic<uint64_t> g_sent{0}, g_served{0};
std::atomic<uint64_t> g_moved{0};  // requests sent + executed, never reset (FAKEVERBS_FAULT_AT's clock)
int g_host = -1;
// FAKEVERBS_TRACE=1: one stderr line per request and answer (what the fake decided and why).
const bool g_trace = getenv("FAKEVERBS_TRACE") && *getenv("FAKEVERBS_TRACE") == '1';
#define TRACE(...) \
  do {             \
    if (g_trace) fprintf(stderr, "fakeverbs trace: " __VA_ARGS__); \
  } while (0)

void PrintStats() {
  uint64_t sent = g_sent.exchange(0), served = g_served.exchange(0);
  if (sent || served)
    fprintf(stderr, "fakeverbs: host %d (pid %d): %llu requests sent to other hosts, %llu executed for them\n", g_host,
            static_cast<int>(getpid()), static_cast<unsigned long long>(sent), static_cast<unsigned long long>(served));
}

void AtExit() {
  PrintStats();
  if (!g_sock_path.empty()) unlink(g_sock_path.c_str());
  if (!g_pid_path.empty()) unlink(g_pid_path.c_str());
}

// Claims host index h in dir: true if this process now owns it.
bool Claim(const std::string& path) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd >= 0) {
      std::string pid = std::to_string(getpid()) + "\n";
      bool ok = write(fd, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size());
      close(fd);
      return ok;
    }
    if (errno != EEXIST) return false;
    char buf[32] = {0};
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // removed meanwhile: try again
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    long pid = n > 0 ? strtol(buf, nullptr, 10) : 0;
    // An empty file is a claim being written: taken. A live pid (or one we may not signal): taken.
    if (pid <= 0 || kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) return false;
    unlink(path.c_str());  // its owner died without removing it
  }
  return false;
}

bool SockAddr(const std::string& path, sockaddr_un* a) {
  memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  if (path.size() >= sizeof(a->sun_path)) return false;
  memcpy(a->sun_path, path.c_str(), path.size());
  return true;
}

}  // namespace

struct HostLink::Impl {
  Fabric& f;
  std::string dir;
  int host = 0;
  int listen_fd = -1, wake_fd = -1;
  bool running = false;
  std::atomic<bool> stop{false};
  std::thread thread;
  Control* control = nullptr;  // FAKEVERBS_CONTROL, opened at the first Start, never closed
  std::map<int, std::unique_ptr<Conn>> conns;  // by id; closed only by the thread (or Stop after it)
  std::map<int, int> to_host;                  // host -> id of the outgoing connection
  int next_id = 0;

  explicit Impl(Fabric& fab) : f(fab) {}

  std::string SockPath(int h) const { return dir + "/host" + std::to_string(h) + ".sock"; }

  void Wake() {
    uint64_t one = 1;
    ssize_t w = write(wake_fd, &one, sizeof(one));
    (void)w;
  }

  // ---- bytes out ------------------------------------------------------------------------------------

  void TryWrite(Conn* c) {
    while (!c->dead && c->out_off < c->out.size()) {
      ssize_t n = send(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c->out_off += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else if (!(n < 0 && errno == EINTR)) {
        c->dead = true;  // the other host is gone: what was queued is lost
      }
    }
    if (c->dead || c->out_off == c->out.size()) {
      c->out.clear();
      c->out_off = 0;
    } else if (c->out_off > (1u << 20) && c->out_off * 2 > c->out.size()) {
      c->out.erase(c->out.begin(), c->out.begin() + static_cast<long>(c->out_off));
      c->out_off = 0;
    }
  }

  void Queue(Conn* c, const FrameHead& h, const uint8_t* payload) {
    const auto* hp = reinterpret_cast<const uint8_t*>(&h);
    c->out.insert(c->out.end(), hp, hp + sizeof(h));
    if (h.payload) c->out.insert(c->out.end(), payload, payload + h.payload);
  }

  bool Pending(const Conn* c) const { return c && !c->dead && c->out_off < c->out.size(); }

  // The connection to host h, dialled now if there is none (null: nobody listens there now).
  Conn* ConnTo(int h) {
    auto it = to_host.find(h);
    if (it != to_host.end()) {
      Conn* c = conns[it->second].get();
      if (!c->dead) return c;
      return nullptr;  // the thread reaps it; the next step dials again
    }
    sockaddr_un a;
    if (!running || !SockAddr(SockPath(h), &a)) return nullptr;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return nullptr;
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(fd);
      return nullptr;
    }
    int buf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->host = h;
    c->id = next_id++;
    Conn* raw = c.get();
    conns[raw->id] = std::move(c);
    to_host[h] = raw->id;
    FrameHead hello{};
    hello.magic = kMagic;
    hello.type = kHello;
    hello.src_host = static_cast<uint8_t>(host);
    Queue(raw, hello, nullptr);
    TryWrite(raw);
    Wake();  // the thread polls it from now on
    return raw;
  }

  // ---- requester ------------------------------------------------------------------------------------

  void Rewind(Qp* q) {
    q->emitted = 0;
    if (!q->sq.empty()) q->sq_psn = q->sq.front().psn;
  }

  void FailFront(Qp* q, int status) {
    SendOp op = std::move(q->sq.front());
    q->sq.pop_front();
    if (q->emitted > 0) q->emitted--;
    FailOp(f, q, op, status);
  }

  // The first k WRs on the wire are acknowledged.
  void Acked(Qp* q, size_t k, Clock::time_point now) {
    for (size_t i = 0; i < k; ++i) {
      if (q->sq.front().signaled) SendCompletion(f, q, q->sq.front(), vx::kWcSuccess);
      q->sq.pop_front();
    }
    q->emitted -= k;
    if (k && !q->sq.empty()) q->sq.front().first_try = q->sq.front().sent_at = now;  // the QP made progress
  }

  // The bytes a WR carries (SEND / WRITE), checking its local SGEs; false: LOC_PROT_ERR.
  bool Gather(Qp* q, const SendOp& op, std::vector<uint8_t>* bytes) {
    const bool read = op.wr.opcode == vx::kWrRdmaRead;
    if (op.is_inline) {
      *bytes = op.inline_data;
      return true;
    }
    bytes->clear();
    for (const vx::Sge& s : op.sge) {
      uint8_t* p = Resolve(f.lkeys, s.lkey, q->pd, s.addr, s.length, read ? vx::kAccessLocalWrite : 0);
      if (!p && s.length) return false;
      if (!read && s.length) bytes->insert(bytes->end(), p, p + s.length);
    }
    return true;
  }

  // The retry clocks of q's oldest WR on the wire (fails it or rewinds q); false: q sends nothing now.
  bool Timers(Qp* q, const Conn* c, Clock::time_point now) {
    if (q->emitted > 0 && q->timeout != 0) {
      SendOp& front = q->sq.front();
      if (Pending(c)) {
        front.first_try = front.sent_at = now;  // still leaving this host: no ack can be due yet
      } else if (Ms(now - front.first_try) >= DeadPathMs(q)) {
        FailFront(q, vx::kWcRetryExcErr);
        return false;
      } else if (Ms(now - front.sent_at) >= DeadPathMs(q) / (q->retry_cnt + 1)) {
        Rewind(q);  // no answer within one timeout: resend from the oldest unanswered WR
      }
    }
    if (now < q->rnr_until) return false;
    // After a rewind (RNR or timeout) the WRs go again once what was queued before has left: a
    // requester resends from the NAKed PSN, it does not pile copies behind the ones in flight.
    return !(q->emitted == 0 && q->sq.front().sent_at != Clock::time_point{} && Pending(c));
  }

  void SendRequest(Conn* c, const Qp* q, const SendOp& op, const std::vector<uint8_t>& bytes) {
    const bool read = op.wr.opcode == vx::kWrRdmaRead;
    FrameHead h{};
    h.magic = kMagic;
    h.type = kRequest;
    h.src_host = static_cast<uint8_t>(host);
    h.src_dev = static_cast<uint8_t>(DevOf(q)->index);
    h.dst_dev = static_cast<uint8_t>(q->dest_index);
    h.src_qpn = q->head.qp_num;
    h.dst_qpn = q->dest_qpn;
    h.psn = op.psn;
    h.gen = q->gen;
    h.seq = op.seq;
    h.code = op.wr.opcode;
    h.imm = op.wr.imm_data;
    h.rkey = op.wr.rdma.rkey;
    h.remote_addr = op.wr.rdma.remote_addr;
    h.length = read ? Total(op.sge) : bytes.size();
    h.payload = read ? 0 : bytes.size();
    Queue(c, h, bytes.data());
    Device* d = DevOf(q);
    d->tx_requests++;
    d->tx_bytes += h.payload;
    g_sent++;
    g_moved++;
    TRACE("host %d qp %u -> host %d qp %u: op %d psn %u seq %llu len %llu\n", host, h.src_qpn, q->dest_host, h.dst_qpn,
          h.code, h.psn, static_cast<unsigned long long>(h.seq), static_cast<unsigned long long>(h.length));
  }

  void Progress(Qp* q, Clock::time_point now) {
    if (q->sq.empty()) return;
    Device* ld = DevOf(q);
    if (!PortUp(ld)) return FailFront(q, vx::kWcLocQpOpErr);
    Conn* c = nullptr;
    if (auto it = to_host.find(q->dest_host); it != to_host.end()) c = conns[it->second].get();
    if (!Timers(q, c, now)) return;
    std::vector<uint8_t> bytes;
    for (int n = 0; n < f.burst && q->emitted < q->sq.size(); ++n) {
      SendOp& op = q->sq[q->emitted];
      if (!Gather(q, op, &bytes)) {
        if (q->emitted == 0) FailFront(q, vx::kWcLocProtErr);  // in order: only once it is the oldest
        break;
      }
      op.psn = q->sq_psn;
      q->sq_psn = (q->sq_psn + 1) & 0xffffff;
      if (op.sent_at == Clock::time_point{}) op.first_try = now;
      op.sent_at = now;
      q->emitted++;
      // Black hole or one-way loss out of this port: it leaves and is lost.
      if (ld->port.fault == FAKEVERBS_FAULT_DROP_DATA || ld->port.fault == FAKEVERBS_FAULT_DROP_OUT) continue;
      if (c == nullptr || c->dead) c = ConnTo(q->dest_host);
      if (c == nullptr) continue;  // nobody at that host: lost, the retry clock runs
      SendRequest(c, q, op, bytes);
    }
    if (c && Pending(c)) {
      TryWrite(c);
      if (Pending(c)) Wake();  // the thread writes the rest when the socket has room
    }
  }

  // An answer to one of our requests (the thread, mu held).
  void OnAnswer(const FrameHead& h, const std::vector<uint8_t>& body) {
    auto it = f.qps.find(h.dst_qpn);
    if (it == f.qps.end()) return;
    Qp* q = it->second;
    if (q->gen != h.gen || q->head.state != vx::kQpsRts) return;
    Device* ld = DevOf(q);
    if (!PortUp(ld) || ld->port.fault != FAKEVERBS_FAULT_NONE) return;  // lost at our port
    size_t k = 0;
    while (k < q->emitted && q->sq[k].seq != h.seq) ++k;
    TRACE("host %d qp %u: answer %d seq %llu (%s)\n", host, q->head.qp_num, h.code, static_cast<unsigned long long>(h.seq),
          k == q->emitted ? "not on the wire" : "taken");
    if (k == q->emitted) return;  // a duplicate answer, or one to WRs since resent
    Clock::time_point now = Clock::now();
    Acked(q, k, now);  // an answer to WR k acknowledges the ones before it
    SendOp& op = q->sq.front();
    if (h.code == kAnsRnr) {
      if (!op.rnr) op.rnr = true, op.rnr_since = now;
      op.first_try = now;  // the responder answered: the transport retry clock starts again
      if (q->rnr_retry != 7 && Ms(now - op.rnr_since) >= RnrMs(q->rnr_retry, static_cast<int>(h.imm)))
        return FailFront(q, vx::kWcRnrRetryExcErr);
      Rewind(q);
      q->rnr_until = now + std::chrono::microseconds(static_cast<int64_t>(1000 * RnrMs(0, static_cast<int>(h.imm))));
      return;
    }
    if (h.code != kAnsAck) return FailFront(q, h.code);
    uint32_t byte_len = 0;
    if (op.wr.opcode == vx::kWrRdmaRead) {  // the response's bytes land in our SGEs now
      if (body.size() != Total(op.sge)) return;
      size_t off = 0;
      for (const vx::Sge& s : op.sge) {
        uint8_t* p = Resolve(f.lkeys, s.lkey, q->pd, s.addr, s.length, vx::kAccessLocalWrite);
        if (!p && s.length) return FailFront(q, vx::kWcLocProtErr);
        if (s.length) memcpy(p, body.data() + off, s.length);
        off += s.length;
      }
      byte_len = static_cast<uint32_t>(body.size());
    }
    if (op.signaled) SendCompletion(f, q, op, vx::kWcSuccess, byte_len);
    q->sq.pop_front();
    q->emitted--;
    if (!q->sq.empty()) q->sq.front().first_try = q->sq.front().sent_at = now;
  }

  // ---- responder ------------------------------------------------------------------------------------

  // Executes a request in sequence on r; the answer code, with a READ's bytes in *out.
  int32_t Execute(Qp* r, const FrameHead& h, const std::vector<uint8_t>& body, std::vector<uint8_t>* out) {
    const bool read = h.code == vx::kWrRdmaRead;
    const bool send = h.code == vx::kWrSend || h.code == vx::kWrSendWithImm;
    const bool consumes = send || h.code == vx::kWrRdmaWriteWithImm;
    uint8_t* remote = nullptr;
    if (!send) {
      int need = read ? vx::kAccessRemoteRead : vx::kAccessRemoteWrite;
      remote = Resolve(f.rkeys, h.rkey, r->pd, h.remote_addr, h.length, need);
      if ((!remote && h.length) || (r->access & need) != static_cast<unsigned>(need)) {
        EventTo(r->pd->ctx, vx::kEventQpAccessErr, r);
        f.ToError(r);
        return vx::kWcRemAccessErr;
      }
    }
    if (consumes && r->rq.empty()) return kAnsRnr;
    if (send) {
      RecvOp rv = r->rq.front();
      std::vector<uint8_t*> dst;
      int bad = body.size() > Total(rv.sge) ? vx::kWcLocLenErr : 0;
      for (size_t i = 0; !bad && i < rv.sge.size(); ++i) {
        const vx::Sge& s = rv.sge[i];
        dst.push_back(Resolve(f.lkeys, s.lkey, r->pd, s.addr, s.length, vx::kAccessLocalWrite));
        if (!dst.back() && s.length) bad = vx::kWcLocProtErr;
      }
      if (bad) {
        r->rq.pop_front();
        RecvCompletion(f, r, rv, bad, vx::kWcRecv, 0, false, 0, h.src_qpn);
        f.ToError(r);
        return kWcRemInvReqErr;
      }
      size_t off = 0;
      for (size_t i = 0; i < rv.sge.size() && off < body.size(); ++i) {
        size_t n = std::min<size_t>(rv.sge[i].length, body.size() - off);
        memcpy(dst[i], body.data() + off, n);
        off += n;
      }
    } else if (read) {
      out->assign(remote, remote + h.length);
    } else if (h.length) {
      memcpy(remote, body.data(), h.length);
    }
    r->rq_psn = (r->rq_psn + 1) & 0xffffff;
    if (consumes) {  // the receive completes after its bytes
      RecvOp rv = r->rq.front();
      r->rq.pop_front();
      bool imm = h.code == vx::kWrRdmaWriteWithImm || h.code == vx::kWrSendWithImm;
      RecvCompletion(f, r, rv, vx::kWcSuccess, send ? vx::kWcRecv : vx::kWcRecvRdmaWithImm,
                     static_cast<uint32_t>(h.length), imm, h.imm, h.src_qpn);
    }
    Device* d = DevOf(r);
    d->rx_requests++;
    d->rx_bytes += read ? 0 : h.length;
    g_served++;
    g_moved++;
    return kAnsAck;
  }

  // A request from another host (the thread, mu held): answered on `c` unless nothing answers.
  void OnRequest(Conn* c, const FrameHead& h, const std::vector<uint8_t>& body) {
    if (h.dst_dev >= f.devices.size()) return;
    Device* d = f.devices[h.dst_dev];
    if (!PortUp(d) || d->port.fault == FAKEVERBS_FAULT_DROP_DATA) return;  // nothing answers at this port
    auto it = f.qps.find(h.dst_qpn);
    if (it == f.qps.end()) return;
    Qp* r = it->second;
    if (DevOf(r) != d || (r->head.state != vx::kQpsRtr && r->head.state != vx::kQpsRts)) return;
    if (r->dest_host != h.src_host || r->dest_index != h.src_dev || r->dest_qpn != h.src_qpn) return;
    const bool read = h.code == vx::kWrRdmaRead;
    if (h.payload != (read ? 0 : h.length)) return;
    const uint32_t ahead = (h.psn - r->rq_psn) & 0xffffff;
    TRACE("host %d qp %u <- host %d qp %u: op %d psn %u (expected %u)\n", host, r->head.qp_num, h.src_host, h.src_qpn,
          h.code, h.psn, r->rq_psn);
    std::vector<uint8_t> out;
    int32_t code = kAnsAck;
    if (ahead == 0) {
      code = Execute(r, h, body, &out);
    } else if (ahead < 0x800000) {
      return;  // out of sequence (an earlier one was lost or refused): dropped, the requester resends
    } else if (read) {  // a duplicate READ is executed again; other duplicates are only acknowledged
      uint8_t* p = Resolve(f.rkeys, h.rkey, r->pd, h.remote_addr, h.length, vx::kAccessRemoteRead);
      if (!p && h.length) return;
      out.assign(p, p + h.length);
    }
    if (d->port.fault == FAKEVERBS_FAULT_DROP_ACKS) return;  // the data landed, the answer is lost
    FrameHead a{};
    a.magic = kMagic;
    a.type = kAnswer;
    a.src_host = h.src_host;
    a.src_dev = h.src_dev;
    a.dst_dev = h.dst_dev;
    a.src_qpn = h.dst_qpn;
    a.dst_qpn = h.src_qpn;
    a.psn = h.psn;
    a.gen = h.gen;
    a.seq = h.seq;
    a.code = code;
    a.imm = code == kAnsRnr ? r->min_rnr_timer : 0;
    a.payload = out.size();
    Queue(c, a, out.data());
    TryWrite(c);
  }

  // ---- FAKEVERBS_FAULT_AT=<host>:<device>:<down|blackhole|ackloss>:<n> -----------------------------
  // A fault a test arms in every process of a fabric by the environment: the process that is host
  // <host> applies it to its <device> once it has sent + executed <n> requests for other hosts, i.e.
  // mid-stream, with no control channel into it. One stderr line says when it fired.
  std::string fault_dev;
  int fault_kind = -1;  // 0 down, else a fakeverbs_fault
  uint64_t fault_after = 0;
  bool fault_armed = false;  // FAKEVERBS_FAULT_AT and FAKEVERBS_CONTROL: read once, at the first Start

  void ArmFault() {
    const char* v = getenv("FAKEVERBS_FAULT_AT");
    if (!v || !*v) return;
    char dev[32] = {0}, kind[16] = {0};
    int h = -1;
    unsigned long long n = 0;
    if (sscanf(v, "%d:%31[^:]:%15[^:]:%llu", &h, dev, kind, &n) != 4 || !f.FindDevice(dev) ||
        (strcmp(kind, "down") && strcmp(kind, "blackhole") && strcmp(kind, "ackloss"))) {
      fprintf(stderr, "fakeverbs: FAKEVERBS_FAULT_AT=%s: want <host>:<device>:<down|blackhole|ackloss>:<requests>\n", v);
      abort();
    }
    if (h != host) return;
    fault_dev = dev;
    fault_kind = !strcmp(kind, "down") ? 0 : !strcmp(kind, "blackhole") ? FAKEVERBS_FAULT_DROP_DATA : FAKEVERBS_FAULT_DROP_ACKS;
    fault_after = n;
  }

  void MaybeFault() {
    if (fault_kind < 0 || g_moved.load() < fault_after) return;
    Device* d = f.FindDevice(fault_dev.c_str());
    if (fault_kind == 0) {
      f.SetPortState(d, false);
    } else {
      d->port.fault = fault_kind;
    }
    fprintf(stderr, "fakeverbs: host %d: FAKEVERBS_FAULT_AT fired: %s %s after %llu requests\n", host, fault_dev.c_str(),
            fault_kind == 0 ? "port down" : fault_kind == FAKEVERBS_FAULT_DROP_DATA ? "black hole" : "ack loss",
            static_cast<unsigned long long>(g_moved.load()));
    fault_kind = -1;
  }

  // ---- the thread -----------------------------------------------------------------------------------

  // A host dialled us: our requests to it use this connection too (one per pair of hosts, so a
  // process's descriptors do not change with the traffic, as a real HCA's do not).
  void OnHello(Conn* c, int from) {
    c->host = from;
    if (!to_host.count(from)) to_host[from] = c->id;
  }

  // At Start: a connection to every host already in the fabric (the ones that come later dial us).
  void DialAll() {
    for (int h = 0; h < kMaxHosts; ++h) {
      struct stat st;
      if (h != host && stat(SockPath(h).c_str(), &st) == 0) ConnTo(h);
    }
  }

  void ReadFrom(Conn* c) {
    size_t budget = kReadBudget;
    while (!c->dead && budget > 0) {
      ssize_t n;
      if (c->in_have < sizeof(FrameHead)) {
        n = recv(c->fd, reinterpret_cast<uint8_t*>(&c->in) + c->in_have, sizeof(FrameHead) - c->in_have, MSG_DONTWAIT);
      } else {
        n = recv(c->fd, c->body.data() + c->body_have, c->body.size() - c->body_have, MSG_DONTWAIT);
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {  // EOF or error: that host is gone
        c->dead = true;
        return;
      }
      budget -= std::min(budget, static_cast<size_t>(n));
      if (c->in_have < sizeof(FrameHead)) {
        c->in_have += static_cast<size_t>(n);
        if (c->in_have < sizeof(FrameHead)) continue;
        if (c->in.magic != kMagic || c->in.payload > kMaxPayload) {
          c->dead = true;  // not our protocol
          return;
        }
        c->body.resize(c->in.payload);
        c->body_have = 0;
      } else {
        c->body_have += static_cast<size_t>(n);
      }
      if (c->body_have < c->body.size()) continue;
      if (c->in.type == kRequest) OnRequest(c, c->in, c->body);
      else if (c->in.type == kAnswer) OnAnswer(c->in, c->body);
      else if (c->in.type == kHello) OnHello(c, c->in.src_host);
      c->in_have = 0;
    }
  }

  void Accept() {
    for (;;) {
      int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      int buf = 4 << 20;
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
      auto c = std::make_unique<Conn>();
      c->fd = fd;
      c->id = next_id++;
      conns[c->id] = std::move(c);
    }
  }

  void Loop() {
    std::vector<pollfd> pf;
    std::vector<int> ids;
    bool busy = false;
    while (!stop.load()) {
      pf.clear(), ids.clear();
      {
        std::lock_guard<std::mutex> g(f.mu);
        pf.push_back(pollfd{wake_fd, POLLIN, 0});
        pf.push_back(pollfd{listen_fd, POLLIN, 0});
        pf.push_back(pollfd{control ? control->fd() : -1, POLLIN, 0});  // fd -1: ignored by poll
        for (auto& [id, c] : conns) {
          pf.push_back(pollfd{c->fd, static_cast<short>(POLLIN | (Pending(c.get()) ? POLLOUT : 0)), 0});
          ids.push_back(id);
        }
      }
      // While WRs wait for answers, wake often enough for their retry timers.
      if (poll(pf.data(), pf.size(), busy ? 2 : 100) < 0 && errno != EINTR) break;
      std::lock_guard<std::mutex> g(f.mu);
      if (pf[0].revents & POLLIN) {
        uint64_t v;
        ssize_t r = read(wake_fd, &v, sizeof(v));
        (void)r;
      }
      if (pf[1].revents & POLLIN) Accept();
      if (pf[2].revents & POLLIN) control->OnReadable();
      for (size_t i = 0; i < ids.size(); ++i) {
        auto it = conns.find(ids[i]);
        if (it == conns.end()) continue;
        Conn* c = it->second.get();
        short ev = pf[i + 3].revents;
        if (ev & (POLLIN | POLLHUP | POLLERR)) ReadFrom(c);
        if (ev & POLLOUT) TryWrite(c);
      }
      Reap();
      MaybeFault();
      busy = ProgressAll();
    }
  }

  // The requester side of every QP towards another host (what poll_cq also runs); true if any has
  // WRs outstanding.
  bool ProgressAll() {
    bool busy = false;
    Clock::time_point now = Clock::now();
    for (auto& [qpn, q] : f.qps) {
      if (q->dest_host < 0 || q->dest_host == host || q->head.state != vx::kQpsRts) continue;
      Progress(q, now);
      busy = busy || !q->sq.empty();
    }
    return busy;
  }

  void Close(int id) {
    Conn* c = conns[id].get();
    if (c->host >= 0 && to_host.count(c->host) && to_host[c->host] == id) to_host.erase(c->host);
    close(c->fd);
    conns.erase(id);
  }

  void Reap() {
    std::vector<int> dead;
    for (auto& [id, c] : conns)
      if (c->dead) dead.push_back(id);
    for (int id : dead) Close(id);
  }
};

HostLink* HostLink::Create(Fabric& f, const std::string& dir, int* host) {
  mkdir(dir.c_str(), 0755);  // the test usually made it; EEXIST is fine
  for (int h = 0; h < kMaxHosts; ++h) {
    std::string pid_path = dir + "/host" + std::to_string(h) + ".pid";
    if (!Claim(pid_path)) continue;
    auto* impl = new Impl(f);
    impl->dir = dir;
    impl->host = h;
    sockaddr_un a;
    if (!SockAddr(impl->SockPath(h), &a)) {
      fprintf(stderr, "fakeverbs: FAKEVERBS_WIRE=%s: socket path too long\n", dir.c_str());
      unlink(pid_path.c_str());
      abort();
    }
    g_pid_path = pid_path;
    g_sock_path = impl->SockPath(h);
    g_host = h;
    atexit(AtExit);
    fprintf(stderr, "fakeverbs: host %d of fabric %s (pid %d)\n", h, dir.c_str(), static_cast<int>(getpid()));
    *host = h;
    return new HostLink(impl);
  }
  // A test double that cannot join its fabric must not silently become a fabric of its own.
  fprintf(stderr, "fakeverbs: FAKEVERBS_WIRE=%s: no free host index (%s)\n", dir.c_str(), strerror(errno));
  abort();
}

void HostLink::Start() {
  Impl& m = *impl_;
  if (m.running) return;
  sockaddr_un a;
  SockAddr(m.SockPath(m.host), &a);
  unlink(a.sun_path);  // ours (we hold the host index); a leftover of an earlier Start
  m.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  m.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (m.listen_fd < 0 || m.wake_fd < 0 || bind(m.listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      listen(m.listen_fd, 64) != 0) {
    fprintf(stderr, "fakeverbs: host %d cannot listen on %s: %s\n", m.host, a.sun_path, strerror(errno));
    abort();
  }
  if (!m.fault_armed) m.ArmFault(), m.control = Control::Open(m.f, m.host), m.fault_armed = true;
  m.stop = false;
  m.running = true;
  {
    std::lock_guard<std::mutex> g(m.f.mu);
    m.DialAll();
  }
  m.thread = std::thread([&m] { m.Loop(); });
}

void HostLink::Stop() {
  Impl& m = *impl_;
  if (!m.running) return;
  m.stop = true;
  m.Wake();
  m.thread.join();
  std::lock_guard<std::mutex> g(m.f.mu);
  std::vector<int> ids;
  for (auto& [id, c] : m.conns) ids.push_back(id);
  for (int id : ids) m.Close(id);
  close(m.listen_fd);
  close(m.wake_fd);
  m.listen_fd = m.wake_fd = -1;
  unlink(m.SockPath(m.host).c_str());
  m.running = false;
  PrintStats();
}

void HostLink::Progress(Qp* q, Clock::time_point now) { impl_->Progress(q, now); }

void HostLink::Kick() {
  if (impl_->running) impl_->Wake();
}

}  // namespace fakeverbs
