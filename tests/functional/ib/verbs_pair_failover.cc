// Lossless failover at the verbs level between two hosts, with rerail's verbs objects: run in both
// guests of `scripts/rxe-guest.sh --pair --rails 2` (RXE_ROLE=a|b, RXE_PEER).
//
//   b writes K chunks of 64 KiB into a's buffer, alternating rails, each as one signalled
//   WRITE_WITH_IMM (imm = chunk index); a counts the chunks whose immediate arrived. When a has seen
//   half of them it takes its own rail-0 netdev down: from b's side packets on rail 0 vanish (its
//   carrier stays up), so b's rail-0 writes end in RETRY_EXC_ERR (then flushes). b then re-posts every
//   chunk of rail 0 that has no successful completion on rail 1 — the rule issue 12 states: a write
//   that completed successfully is placed; every other one is written again, same bytes, same offset.
//   a finishes when every chunk index arrived (duplicates are harmless) and checks every byte.
//
// The memory registration is one MrCache handle over both rails. The QP endpoints and the buffer's
// address and per-rail rkeys travel over a TCP socket on rail 1 (the handshake of a future IB link).
// Prints FIGURE lines (failover time, re-sent chunks); exit 0 only if every byte is right.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rerail/params.h"
#include "transports/ib/ib_device.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_mr_cache.h"
#include "transports/ib/ib_qp.h"

namespace {

using namespace rr::ib;
using Clock = std::chrono::steady_clock;

constexpr int kRails = 2;
constexpr uint32_t kChunk = 64 << 10;
constexpr uint32_t kChunks = 384;  // 24 MiB
constexpr int kWindow = 8;         // outstanding writes per rail
constexpr uint16_t kPort = 18600;

struct Hello {
  QpEndpoint ep[kRails];
  uint64_t addr;
  uint32_t rkey[kRails];
};

uint8_t Pattern(uint32_t k, uint32_t j) { return static_cast<uint8_t>(k * 131 + j * 7 + (j >> 9)); }

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

#define DIE(...)                      \
  do {                                \
    std::fprintf(stderr, "FAIL: ");   \
    std::fprintf(stderr, __VA_ARGS__); \
    std::fprintf(stderr, "\n");       \
    std::exit(1);                     \
  } while (0)
#define OK(st)                                                      \
  do {                                                              \
    rr::Status s_ = (st);                                           \
    if (!s_.ok()) DIE("%s: %s", #st, s_.ToString().c_str());        \
  } while (0)

bool FullIo(int fd, void* p, size_t n, bool wr) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = wr ? write(fd, c, n) : read(fd, c, n);
    if (r <= 0) return false;
    c += r, n -= static_cast<size_t>(r);
  }
  return true;
}

// a listens, b connects (retrying while a boots); both on rail 1's addresses.
int Handshake(bool is_a, const std::string& peer) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(kPort);
  if (is_a) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sa.sin_addr.s_addr = INADDR_ANY;
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd, 1) != 0) DIE("listen: %s", strerror(errno));
    int c = accept(fd, nullptr, nullptr);
    close(fd);
    return c;
  }
  inet_pton(AF_INET, peer.c_str(), &sa.sin_addr);
  for (int i = 0; i < 300; ++i) {
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) return fd;
    close(fd);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  DIE("connect %s:%u: %s", peer.c_str(), kPort, strerror(errno));
}

struct Rail {
  std::unique_ptr<IbDevice> dev;
  std::unique_ptr<IbCq> cq;
  std::unique_ptr<IbQp> qp;
};

int RunA(std::vector<Rail>& rails, std::vector<uint8_t>& buf) {
  std::vector<bool> seen(kChunks, false);
  uint32_t distinct = 0, dup = 0;
  bool cut = false;
  auto t0 = Clock::now(), tcut = t0;
  while (distinct < kChunks) {
    if (Ms(t0, Clock::now()) > 120000) DIE("a: only %u of %u chunks after 120 s", distinct, kChunks);
    bool idle = true;
    for (int r = 0; r < kRails; ++r) {
      vx::Wc wc[32];
      int n = 0;
      OK(rails[r].cq->Poll(32, wc, &n));
      for (int i = 0; i < n; ++i) {
        idle = false;
        if (wc[i].status != vx::kWcSuccess) continue;  // rail 0's receives flush after the cut
        uint32_t k = ntohl(wc[i].imm_data);
        if (k >= kChunks) DIE("a: immediate %u out of range", k);
        if (seen[k]) ++dup;
        else seen[k] = true, ++distinct;
      }
    }
    if (!cut && distinct >= kChunks / 2) {
      cut = true;
      tcut = Clock::now();
      std::string nd = rails[0].dev->port().netdev;
      if (std::system(("/usr/bin/ip link set " + nd + " down").c_str()) != 0) DIE("a: ip link set %s down", nd.c_str());
      std::printf("a: %u/%u chunks in, rail 0 (%s) taken down\n", distinct, kChunks, nd.c_str());
    }
    if (idle) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  uint32_t bad = 0;
  for (uint32_t k = 0; k < kChunks; ++k)
    for (uint32_t j = 0; j < kChunk; ++j)
      if (buf[static_cast<size_t>(k) * kChunk + j] != Pattern(k, j)) {
        if (bad++ < 5) std::printf("a: chunk %u byte %u wrong\n", k, j);
        break;
      }
  std::printf("FIGURE pair failover: a got all %u chunks (%u duplicate immediates) %.0f ms after the cut; %u chunks wrong\n",
              kChunks, dup, Ms(tcut, Clock::now()), bad);
  return bad == 0 ? 0 : 1;
}

int RunB(std::vector<Rail>& rails, const std::vector<uint8_t>& buf, const MrHandle* mine, const Hello& peer) {
  std::vector<int> done(kChunks, 0);  // 1: a successful completion
  std::vector<int> owner(kChunks, -1);
  std::vector<uint32_t> queue;        // chunks to (re)post, in order
  for (uint32_t k = 0; k < kChunks; ++k) queue.push_back(k);
  bool rail_ok[kRails] = {true, true};
  int inflight[kRails] = {0, 0};
  uint32_t completed = 0, resent = 0;
  auto t0 = Clock::now(), terr = t0, tresume = t0;
  bool failed_over = false;
  size_t next = 0;
  while (completed < kChunks) {
    if (Ms(t0, Clock::now()) > 120000) DIE("b: %u of %u chunks completed after 120 s", completed, kChunks);
    // Post: chunk k goes to rail k % 2 while both live, else to a live rail.
    while (next < queue.size()) {
      uint32_t k = queue[next];
      int r = (rail_ok[0] && rail_ok[1]) ? static_cast<int>(k % 2) : (rail_ok[0] ? 0 : 1);
      if (!rail_ok[r] || inflight[r] >= kWindow) break;
      size_t off = static_cast<size_t>(k) * kChunk;
      OK(rails[r].qp->PostWrite(k, buf.data() + off, kChunk, mine->keys[r].lkey, peer.addr + off, peer.rkey[r], true, k, true));
      owner[k] = r;
      ++inflight[r];
      ++next;
      if (failed_over && tresume == t0) tresume = Clock::now();
    }
    for (int r = 0; r < kRails; ++r) {
      vx::Wc wc[32];
      int n = 0;
      OK(rails[r].cq->Poll(32, wc, &n));
      for (int i = 0; i < n; ++i) {
        uint32_t k = static_cast<uint32_t>(wc[i].wr_id);
        --inflight[r];
        if (wc[i].status == vx::kWcSuccess) {
          if (!done[k]) done[k] = 1, ++completed;
          continue;
        }
        if (rail_ok[r]) {
          rail_ok[r] = false;
          terr = Clock::now();
          std::printf("b: rail %d failed: chunk %u %s after %.0f ms\n", r, k,
                      WcStatusName(rails[r].dev->lib(), wc[i].status).c_str(), Ms(t0, terr));
          if (r == 1 || !rail_ok[1]) DIE("b: rail %d failed too; no rail left", r);
        }
      }
    }
    // Once rail 0 has failed and drained (every WR completed: the error, then flushes), re-queue each of
    // its chunks that never completed successfully; they go to rail 1 at the same offset.
    if (!rail_ok[0] && !failed_over && inflight[0] == 0) {
      failed_over = true;
      for (uint32_t k = 0; k < kChunks; ++k)
        if (owner[k] == 0 && !done[k]) queue.push_back(k), ++resent;
      std::printf("b: re-posting %u chunk(s) of rail 0 on rail 1\n", resent);
    }
  }
  std::printf("FIGURE pair failover: b resumed on rail 1 %.0f ms after rail 0's first error; %u chunks re-sent; %s\n",
              failed_over ? Ms(terr, tresume) : 0.0, resent, failed_over ? "failed over" : "NO FAILURE SEEN");
  return failed_over ? 0 : 1;
}

}  // namespace

int main() {
  const char* role = std::getenv("RXE_ROLE");
  const char* peer = std::getenv("RXE_PEER");
  if (!role || !peer) DIE("run in scripts/rxe-guest.sh --pair (RXE_ROLE, RXE_PEER)");
  bool is_a = std::string(role) == "a";
  OK(rr::Params::Load());
  const VerbsLib& lib = VerbsLib::Default();
  IbOptions o;
  OK(IbOptions::FromParams(&o));
  IbDiscovery d;
  OK(DiscoverIb(lib, o, &d));
  if (d.ports.size() < kRails) DIE("%zu IB port(s): %s", d.ports.size(), d.why.c_str());
  std::vector<Rail> rails(kRails);
  std::vector<IbDevice*> devs;
  QpOptions qo = QpOptions::FromParams();  // RERAIL_IB_TIMEOUT/RETRY_CNT defaults: ~270 ms to RETRY_EXC_ERR
  qo.max_recv = 2 * kChunks;
  for (int r = 0; r < kRails; ++r) {
    OK(IbDevice::Open(lib, d.ports[r], &rails[r].dev));
    OK(IbCq::Create(*rails[r].dev, 4 * kChunks, &rails[r].cq));
    OK(IbQp::Create(*rails[r].dev, *rails[r].cq, *rails[r].cq, qo, &rails[r].qp));
    devs.push_back(rails[r].dev.get());
  }
  std::vector<uint8_t> buf(static_cast<size_t>(kChunks) * kChunk, 0);
  if (!is_a)
    for (uint32_t k = 0; k < kChunks; ++k)
      for (uint32_t j = 0; j < kChunk; ++j) buf[static_cast<size_t>(k) * kChunk + j] = Pattern(k, j);
  VerbsRegistrar reg(devs);
  MrCache cache(&reg);
  MrHandle* h = nullptr;
  OK(cache.Register(buf.data(), buf.size(), &h));

  // The peer's rail-1 address: 10.20.1.x (RXE_PEER is rail 0's).
  std::string p1 = peer;
  p1.replace(p1.find(".0."), 3, ".1.");
  int fd = Handshake(is_a, p1);
  Hello mine{}, theirs{};
  for (int r = 0; r < kRails; ++r) mine.ep[r] = rails[r].qp->Endpoint(), mine.rkey[r] = h->keys[r].rkey;
  mine.addr = reinterpret_cast<uint64_t>(buf.data());
  if (!FullIo(fd, &mine, sizeof(mine), true) || !FullIo(fd, &theirs, sizeof(theirs), false)) DIE("hello exchange");
  for (int r = 0; r < kRails; ++r) OK(rails[r].qp->Connect(theirs.ep[r]));
  if (is_a)  // receives need a QP in INIT or later
    for (int r = 0; r < kRails; ++r)
      for (uint32_t i = 0; i < 2 * kChunks; ++i) OK(rails[r].qp->PostRecv(i));
  char go = 'G';
  if (!FullIo(fd, &go, 1, true) || !FullIo(fd, &go, 1, false)) DIE("ready exchange");  // a's receives are posted
  std::printf("%s: connected %s and %s to %s\n", role, d.ports[0].name.c_str(), d.ports[1].name.c_str(), peer);
  int rc = is_a ? RunA(rails, buf) : RunB(rails, buf, h, theirs);
  char bye = 'B';
  (void)!FullIo(fd, &bye, 1, true);
  (void)!FullIo(fd, &bye, 1, false);  // keep the peer's memory registered until both are done
  close(fd);
  OK(cache.Deregister(h));
  return rc;
}
