// One simulated host for the net plugin fault tests: loads libnccl-net-rerail.so, listens, prints its
// handle, reads the peer's handle from stdin, connects both ways, then streams verified messages in
// both directions (window 8 each way, as NCCL's proxy) for a given time and ends each direction with
// a 0-byte message. Buffers are registered (regMr) as NCCL does, so it runs over RERAIL_TRANSPORT=ib too.
// Prints one RESULT line. Run inside a host namespace by test_net_faults, and over the fake verbs by
// tests/faults/ib_fake_faults.sh.
//
//   net_fault_peer <plugin.so> <duration_ms> <msg_bytes>
// A completed receive buffer is poisoned once checked and the poison checked again just before it is
// re-posted (and 200 ms after the end): a change meanwhile is a late write into memory NCCL owns again
// (late=, also counted in bad).
// Env FAULT_PEER_PAUSE=AT_MS:LEN_MS: at AT_MS the peer stops calling the plugin for LEN_MS (NCCL
// leaving a comm unpolled), then carries on.
// Env FAULT_PEER_HANG_MS=N: the run counts as hung (hang=1) when not finished N ms after its duration.
// Env FAULT_PEER_RECV_AHEAD=N: at most N receives posted at once (default 8). NCCL re-posts a slot only
// once the GPU consumed it, so its sender can run several messages ahead of the posted receives.
// Env FAULT_PEER_LAST=send|recv: one message instead of a stream. After set-up and 400 ms of warm-up
// messages (every standby link up on both sides) the peer prints READY
// and waits for GO on stdin; the sender sends one verified message of msg_bytes and tests it for up
// to duration_ms (hang=1 when it never completes); the receiver receives and checks it, then never
// calls the plugin again (NCCL has nothing more to receive on that comm) until duration_ms passed.
// Env FAULT_PEER_LAST_BYTES=N: the size of that one message (default msg_bytes; 0: an end-of-stream
// marker, which completes on the sender as soon as it is written). Env FAULT_PEER_CLOSE_NOW=1: the
// sender closes its send comm as soon as the message completed (NCCL closing right after its last
// send) and prints "CLOSED close_ms=N" (how long closeSend took) after the RESULT line.
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "net_loader.h"
#include "rerail/clock.h"

namespace {

using rr::netdrv::NetPlugin;
constexpr int kWindow = 8;

void Fill(uint64_t* w, size_t words, uint64_t m) {
  for (size_t j = 0; j < words; ++j) w[j] = (m << 32) ^ (j * 0x9e3779b97f4a7c15ull);
}
size_t MsgSize(uint64_t m, size_t base) { return base - (m % 7) * 8; }  // varying sizes, word multiples

std::string Hex(const unsigned char* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += d[p[i] >> 4], s += d[p[i] & 15];
  return s;
}
bool Unhex(const std::string& s, unsigned char* out, size_t n) {
  if (s.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  return true;
}

struct Stats {
  uint64_t sent = 0, recv = 0, bytes = 0, bad = 0;
  uint64_t late = 0;  // completed buffers changed before the peer re-posted them (also counted in bad)
  double max_gap_ms = 0;
  uint64_t max_gap_end_unix_ms = 0;  // when the longest gap ended (wall clock: scripts match it to their faults)
  int err = 0;
  uint64_t err_after_ms = 0;
  bool hang = false;
};

// The one line the test parses.
void PrintResult(const Stats& st, double rate_mbps) {
  printf("RESULT sent=%" PRIu64 " recv=%" PRIu64 " bytes=%" PRIu64 " bad=%" PRIu64 " maxgap_ms=%.0f err=%d err_after_ms=%" PRIu64
         " hang=%d rate_mbps=%.0f maxgap_end_unix_ms=%" PRIu64 " late=%" PRIu64 "\n",
         st.sent, st.recv, st.bytes, st.bad, st.max_gap_ms, st.err, st.err_after_ms, st.hang ? 1 : 0, rate_mbps,
         st.max_gap_end_unix_ms, st.late);
  fflush(stdout);
}

// One message through the plugin: post it (retrying a NULL request), then test it until done or
// `end`. *size: the received size.
rrNcclResult_t OneMessage(NetPlugin* p, void* comm, bool sender, std::vector<uint64_t>* buf, void* mh, size_t bytes,
                          const rr::Deadline& end, bool* done, int* size) {
  void* q = nullptr;
  rrNcclResult_t r = rrNcclSuccess;
  void* data = buf->data();
  size_t cap = buf->size() * 8;
  int tag = 0, d = 0;
  while (q == nullptr && r == rrNcclSuccess && !end.Expired()) {
    r = sender ? p->Isend(comm, data, bytes, 0, mh, nullptr, &q) : p->Irecv(comm, 1, &data, &cap, &tag, &mh, nullptr, &q);
  }
  while (r == rrNcclSuccess && q != nullptr && !d && !end.Expired()) {
    r = p->Test(q, &d, size);
    if (!d) sched_yield();
  }
  *done = d != 0;
  return r;
}

// FAULT_PEER_LAST: the last message of a job, after which its receiver stops polling. Before it,
// 400 ms of small messages (ended by a 0-byte one) keep both sides polling, so every standby link
// is connected and accepted on both sides whatever the machine's load.
int LastMessage(NetPlugin* p, void* sc, void* rc, bool sender, uint64_t duration_ms, size_t bytes, bool* send_closed) {
  std::vector<uint64_t> buf(bytes / 8);
  size_t last_bytes = bytes;
  if (const char* lb = getenv("FAULT_PEER_LAST_BYTES")) last_bytes = std::min<size_t>(bytes, strtoull(lb, nullptr, 0) & ~size_t(7));
  const char* cn = getenv("FAULT_PEER_CLOSE_NOW");
  bool close_now = sender && cn != nullptr && std::string(cn) == "1";
  void* mh = nullptr;  // NCCL registers every buffer (IB needs it; TCP accepts it)
  if (p->RegMr(sender ? sc : rc, buf.data(), bytes, RR_NCCL_PTR_HOST, &mh) != rrNcclSuccess)
    return fprintf(stderr, "regMr failed\n"), 3;
  rr::Deadline setup = rr::Deadline::AfterMs(10000), warm = rr::Deadline::AfterMs(400);
  for (bool last = false; !last;) {
    bool done = false;
    int size = -1;
    last = sender && warm.Expired();
    if (OneMessage(p, sender ? sc : rc, sender, &buf, mh, last ? 0 : bytes, setup, &done, &size) != rrNcclSuccess || !done) {
      return fprintf(stderr, "warm-up message failed\n"), 3;
    }
    if (!sender) last = size == 0;
  }
  printf("READY\n");
  fflush(stdout);
  std::string word;
  std::cin >> word;
  if (word != "GO") return fprintf(stderr, "expected GO on stdin\n"), 2;
  Stats st;
  uint64_t t0 = rr::NowMs();
  rr::Deadline end = rr::Deadline::AfterMs(duration_ms);
  if (sender) Fill(buf.data(), buf.size(), 0);
  bool done = false;
  int size = -1;
  rrNcclResult_t r = OneMessage(p, sender ? sc : rc, sender, &buf, mh, last_bytes, end, &done, &size);
  if (r != rrNcclSuccess) st.err = r, st.err_after_ms = rr::NowMs() - t0;
  st.hang = r == rrNcclSuccess && !done;
  if (done && sender) st.sent = 1;
  if (done && !sender) {
    std::vector<uint64_t> want(last_bytes / 8);
    Fill(want.data(), want.size(), 0);
    // memcmp of 0 bytes still wants valid pointers, and an empty vector's data() may be null (UBSan).
    st.bad = static_cast<size_t>(size) != last_bytes || (last_bytes > 0 && memcmp(want.data(), buf.data(), last_bytes) != 0);
    st.recv = 1, st.bytes = static_cast<uint64_t>(size);
  }
  if (close_now) {
    p->DeregMr(sc, mh);
    uint64_t c0 = rr::NowMs();
    p->CloseSend(sc);
    *send_closed = true;
    PrintResult(st, 0);
    printf("CLOSED close_ms=%" PRIu64 "\n", rr::NowMs() - c0);
    fflush(stdout);
    while (!end.Expired()) usleep(10000);
    return st.err ? 4 : (st.hang ? 5 : 0);
  }
  PrintResult(st, 0);
  while (!end.Expired()) usleep(10000);  // the receiver stays silent; the sender waits for it to end
  p->DeregMr(sender ? sc : rc, mh);
  return st.err ? 4 : (st.hang ? 5 : (st.bad ? 6 : 0));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s plugin.so duration_ms msg_bytes\n", argv[0]);
    return 2;
  }
  uint64_t duration_ms = strtoull(argv[2], nullptr, 0);
  size_t base = strtoull(argv[3], nullptr, 0) & ~size_t(7);
  std::string err;
  auto p = NetPlugin::Open(argv[1], &err);
  if (!p) return fprintf(stderr, "%s\n", err.c_str()), 2;
  void* ctx = nullptr;
  if (p->Init(&ctx, 1, nullptr, nullptr) != rrNcclSuccess) return 2;
  unsigned char mine[128], theirs[128];
  void* lc = nullptr;
  if (p->Listen(ctx, 0, mine, &lc) != rrNcclSuccess) return 2;
  printf("HANDLE %s\n", Hex(mine, 128).c_str());
  fflush(stdout);
  std::string word, hex;
  std::cin >> word >> hex;
  if (word != "HANDLE" || !Unhex(hex, theirs, 128)) return fprintf(stderr, "bad handle on stdin\n"), 2;
  void *sc = nullptr, *rc = nullptr;
  rr::Deadline setup = rr::Deadline::AfterMs(30000);
  while ((!sc || !rc) && !setup.Expired()) {
    if (!sc && p->Connect(ctx, 0, theirs, &sc) != rrNcclSuccess) return fprintf(stderr, "connect failed\n"), 3;
    if (!rc && p->Accept(lc, &rc) != rrNcclSuccess) return fprintf(stderr, "accept failed\n"), 3;
    if (!sc || !rc) usleep(1000);
  }
  if (!sc || !rc) return fprintf(stderr, "setup timed out\n"), 3;
  p->CloseListen(lc);
  if (const char* last = getenv("FAULT_PEER_LAST")) {
    bool send_closed = false;
    int rcode = LastMessage(p.get(), sc, rc, std::string(last) == "send", duration_ms, base, &send_closed);
    if (!send_closed) p->CloseSend(sc);
    p->CloseRecv(rc);
    p->Finalize(ctx);
    return rcode;
  }

  std::vector<std::vector<uint64_t>> sbuf(kWindow, std::vector<uint64_t>(base / 8)), rbuf = sbuf;
  // Registered as NCCL does (RERAIL_TRANSPORT=ib needs it; TCP accepts it).
  void* smh[kWindow] = {};
  void* rmh[kWindow] = {};
  for (int k = 0; k < kWindow; ++k) {
    if (p->RegMr(sc, sbuf[k].data(), base, RR_NCCL_PTR_HOST, &smh[k]) != rrNcclSuccess ||
        p->RegMr(rc, rbuf[k].data(), base, RR_NCCL_PTR_HOST, &rmh[k]) != rrNcclSuccess)
      return fprintf(stderr, "regMr failed\n"), 3;
  }
  void* sreq[kWindow] = {};
  void* rreq[kWindow] = {};
  uint64_t rseq[kWindow] = {};
  Stats st;
  // The message a slot last completed (+1; 0: none). Until the slot is posted again the buffer is the
  // application's (NCCL's GPU consumes it): the peer overwrites it with a poison pattern once checked,
  // and a change of the poison before the slot is re-posted is a late write of the plugin (the same
  // bytes written again would not show without the poison).
  uint64_t rdone[kWindow] = {};
  auto poison = [&](int k, uint64_t m) {
    for (size_t j = 0; j < MsgSize(m, base) / 8; ++j) rbuf[k][j] = 0xdeadbeef00000000ull ^ (m << 20) ^ j;
  };
  auto late_check = [&](int k) {
    if (!rdone[k]) return;
    uint64_t m = rdone[k] - 1;
    size_t sz = MsgSize(m, base);
    std::vector<uint64_t> seen(rbuf[k]);
    poison(k, m);
    if (memcmp(seen.data(), rbuf[k].data(), sz) != 0) {
      if (!st.late) fprintf(stderr, "net_fault_peer: message %" PRIu64 "'s buffer changed after it completed (late write)\n", m);
      ++st.late, ++st.bad;
    }
    rdone[k] = 0;
  };
  uint64_t next_send = 0, next_post = 0;
  bool send_done = false, recv_done = false, term_posted = false;
  uint64_t t0 = rr::NowMs(), last_recv = 0, first_recv = 0, first_err = 0;
  // FAULT_PEER_HANG_MS: a run still unfinished this long after its duration is a hang (default 60 s).
  uint64_t hang_ms = 60000;
  if (const char* h = getenv("FAULT_PEER_HANG_MS")) hang_ms = strtoull(h, nullptr, 0);
  rr::Deadline hard = rr::Deadline::AfterMs(duration_ms + hang_ms);
  uint64_t pause_at = 0, pause_ms = 0;
  if (const char* pz = getenv("FAULT_PEER_PAUSE")) sscanf(pz, "%" SCNu64 ":%" SCNu64, &pause_at, &pause_ms);
  uint64_t recv_ahead = kWindow;
  if (const char* ra = getenv("FAULT_PEER_RECV_AHEAD")) recv_ahead = std::max<uint64_t>(1, std::min<uint64_t>(kWindow, strtoull(ra, nullptr, 0)));
  while (!(send_done && recv_done)) {
    if (hard.Expired()) { st.hang = true; break; }
    if (pause_ms > 0 && rr::NowMs() - t0 >= pause_at) usleep(pause_ms * 1000), pause_ms = 0;
    bool idle = true;
    bool stop_sending = rr::NowMs() - t0 >= duration_ms;
    // send side
    int ks = static_cast<int>(next_send % kWindow);
    if (!send_done && sreq[ks] == nullptr && !term_posted) {
      size_t sz = stop_sending ? 0 : MsgSize(next_send, base);
      if (sz) Fill(sbuf[ks].data(), sz / 8, next_send);
      void* q = nullptr;
      rrNcclResult_t r = p->Isend(sc, sbuf[ks].data(), sz, 0, smh[ks], nullptr, &q);
      if (r != rrNcclSuccess) { st.err = r; break; }
      if (q) sreq[ks] = q, ++next_send, term_posted = (sz == 0), idle = false;
    }
    for (int k = 0; k < kWindow; ++k) {
      if (!sreq[k]) continue;
      int done = 0;
      rrNcclResult_t r = p->Test(sreq[k], &done, nullptr);
      if (r != rrNcclSuccess) { st.err = r; break; }
      if (done) sreq[k] = nullptr, ++st.sent, idle = false;
    }
    if (st.err) break;
    if (term_posted) {
      bool any = false;
      for (auto* q : sreq) any |= q != nullptr;
      send_done = !any;
    }
    // receive side
    int kr = static_cast<int>(next_post % kWindow);
    if (!recv_done && rreq[kr] == nullptr && next_post - st.recv < recv_ahead) {
      late_check(kr);
      void* data = rbuf[kr].data();
      size_t cap = base;
      int tag = 0;
      void* q = nullptr;
      rrNcclResult_t r = p->Irecv(rc, 1, &data, &cap, &tag, &rmh[kr], nullptr, &q);
      if (r != rrNcclSuccess) { st.err = r; break; }
      if (q) rreq[kr] = q, rseq[kr] = next_post++, idle = false;
    }
    // receives complete in order: test the oldest outstanding one
    int ko = static_cast<int>((st.recv) % kWindow);
    if (!recv_done && rreq[ko]) {
      int done = 0, size = -1;
      rrNcclResult_t r = p->Test(rreq[ko], &done, &size);
      if (r != rrNcclSuccess) { st.err = r; break; }
      if (done) {
        idle = false;
        rreq[ko] = nullptr;
        uint64_t now = rr::NowMs();
        if (last_recv && double(now - last_recv) > st.max_gap_ms) {
          st.max_gap_ms = double(now - last_recv);
          timespec wall;
          clock_gettime(CLOCK_REALTIME, &wall);
          st.max_gap_end_unix_ms = static_cast<uint64_t>(wall.tv_sec) * 1000 + static_cast<uint64_t>(wall.tv_nsec) / 1000000;
        }
        if (!first_recv) first_recv = now;
        last_recv = now;
        if (size == 0) {
          recv_done = true;
        } else {
          std::vector<uint64_t> want(size / 8);
          Fill(want.data(), want.size(), rseq[ko]);
          if (static_cast<size_t>(size) != MsgSize(rseq[ko], base) ||
              memcmp(want.data(), rbuf[ko].data(), size) != 0) {
            ++st.bad;
          }
          st.bytes += size;
          ++st.recv;
          rdone[ko] = rseq[ko] + 1;
          poison(ko, rseq[ko]);
        }
      }
    }
    if (idle) sched_yield();
  }
  if (st.err) first_err = rr::NowMs(), st.err_after_ms = first_err - t0;
  if (!st.err && !st.hang) {  // the last buffers stay the application's: nothing may land in them late
    usleep(200000);
    for (int k = 0; k < kWindow; ++k) late_check(k);
  }
  PrintResult(st, last_recv > first_recv ? st.bytes * 8.0 / ((last_recv - first_recv) * 1e3) : 0.0);
  // Let the peer finish reading our terminator and acks before closing.
  if (!st.err && !st.hang) {
    rr::Deadline linger = rr::Deadline::AfterMs(300);
    while (!linger.Expired()) {
      usleep(1000);
    }
  }
  for (int k = 0; k < kWindow; ++k) p->DeregMr(sc, smh[k]), p->DeregMr(rc, rmh[k]);
  p->CloseSend(sc);
  p->CloseRecv(rc);
  p->Finalize(ctx);
  return st.err ? 4 : (st.hang ? 5 : (st.bad ? 6 : 0));
}
