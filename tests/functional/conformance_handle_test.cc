// NCCL-proxy conformance suite, connection establishment against bad input: garbage and truncated
// handles given to connect(), and strangers (raw TCP clients without the listen handle's nonce) on the
// listen port. A connection must only ever be made with the peer that holds the handle.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "conformance_util.h"
#include "pattern.h"
#include "rerail/clock.h"

namespace conf {
namespace {

using nlohmann::json;
using rr::Deadline;
using rr::Status;

size_t WarnCount() {
  size_t n = 0;
  for (const auto& l : nb::LogCapture::Snapshot()) n += l.level == 2;
  return n;
}

// Connects with `bad`, polling accept on the real listener meanwhile. The bad handle must end in an
// error — from connect, or from the first send on the comm it returned — and the listener must never
// accept it.
Status TryBadHandle(nb::Endpoint& ep, void* listen_comm, nb::Handle bad, const std::string& what) {
  auto& net = ep.net();
  size_t warns0 = WarnCount();
  Deadline dl = Deadline::AfterMs(kErrorBoundMs);
  void* sc = nullptr;
  rrNcclResult_t r = rrNcclSuccess;
  std::vector<char> byte(64, 1);
  void* mh = nullptr;
  void* req = nullptr;
  for (;;) {
    void* rc = nullptr;
    if (net.Accept(listen_comm, &rc) != rrNcclSuccess) return Status::Internal(what + ": accept failed");
    if (rc != nullptr) return Status::Internal(what + ": the listener ACCEPTED a connection made with it");
    if (sc == nullptr) {
      r = net.Connect(ep.ctx(), ep.dev(), bad.data(), &sc);
      if (r != rrNcclSuccess) break;
      if (sc != nullptr && net.RegMr(sc, byte.data(), byte.size(), RR_NCCL_PTR_HOST, &mh) != rrNcclSuccess)
        return Status::Internal(what + ": regMr failed on the comm connect returned");
    } else if (req == nullptr) {
      r = net.Isend(sc, byte.data(), 1, 0, mh, nullptr, &req);
      if (r != rrNcclSuccess) break;
    } else {
      int done = 0;
      r = net.Test(req, &done, nullptr);
      if (r != rrNcclSuccess) break;
      if (done) return Status::Internal(what + ": a send on a connection made with it was reported done");
    }
    if (dl.Expired())
      return Status::Internal(what + ": no error within " + std::to_string(kErrorBoundMs) + " ms");
    sched_yield();
  }
  if (sc != nullptr) (void)net.CloseSend(sc);
  if (WarnCount() == warns0) return Status::Internal(what + ": rejected without a WARN through the logger");
  fprintf(stderr, "ok: %s -> %s\n", what.c_str(), nb::FromNccl(r, "error").ToString().c_str());
  return Status::Ok();
}

// Connects this process to its own listener, polling connect and accept alternately (each may need
// the other side to make progress), then closes the listen comm.
Status SelfConnect(nb::Endpoint& ep, nb::Handle h, void* lc, void** sc, void** rc) {
  *sc = *rc = nullptr;
  Deadline dl = Deadline::AfterMs(30000);
  while (*sc == nullptr || *rc == nullptr) {
    if (*sc == nullptr) RR_CHECK(nb::FromNccl(ep.net().Connect(ep.ctx(), ep.dev(), h.data(), sc), "connect"));
    if (*rc == nullptr) RR_CHECK(nb::FromNccl(ep.net().Accept(lc, rc), "accept"));
    if (dl.Expired()) return Status::Internal("self-connect timed out");
    sched_yield();
  }
  return nb::FromNccl(ep.net().CloseListen(lc), "closeListen");
}

// Runs in a child process: inside a private network namespace when possible, so a handle that happens
// to decode to some address can never send a packet off this host.
int GarbageHandlesChild(bool isolated) {
  if (isolated) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    ifreq ifr{};
    strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    ioctl(s, SIOCGIFFLAGS, &ifr);
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) return fprintf(stderr, "cannot bring lo up\n"), 1;
    close(s);
  }
  std::unique_ptr<nb::Endpoint> ep;
  Status st = nb::Endpoint::Open(PluginPath(), 0, &ep);
  if (!st.ok()) return fprintf(stderr, "open: %s\n", st.ToString().c_str()), 1;
  nb::Handle good;
  void* lc = nullptr;
  if (!(st = ep->Listen(&good, &lc)).ok()) return fprintf(stderr, "listen: %s\n", st.ToString().c_str()), 1;
  size_t last = 0;  // last non-zero byte: zeroing from below it must change what the handle says
  for (size_t i = 0; i < good.size(); ++i) last = good[i] != 0 ? i : last;
  std::vector<std::pair<std::string, nb::Handle>> bad;
  nb::Handle h{};
  bad.push_back({"all-zero handle", h});
  for (size_t keep : {size_t{4}, last / 2, last}) {
    h = good;
    std::fill(h.begin() + keep, h.end(), 0);
    bad.push_back({"handle truncated to " + std::to_string(keep) + " bytes", h});
  }
  h = good;
  h[last] = static_cast<char>(h[last] ^ 0x5a);
  bad.push_back({"handle with its last meaningful byte altered", h});
  if (isolated) {
    for (uint64_t seed : {1, 2, 3}) {
      for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<char>(nb::Mix(seed, i));
      bad.push_back({"random handle #" + std::to_string(seed), h});
    }
  } else {
    fprintf(stderr,
            "note: no private network namespace; random-byte handles skipped (could name any address)\n");
  }
  for (auto& [what, hb] : bad) {
    st = TryBadHandle(*ep, lc, hb, what);
    if (!st.ok()) return fprintf(stderr, "FAIL: %s\n", st.ToString().c_str()), 1;
  }
  // The genuine peer is unaffected by all of the above.
  void *sc = nullptr, *rc = nullptr;
  st = SelfConnect(*ep, good, lc, &sc, &rc);
  if (!st.ok())
    return fprintf(stderr, "FAIL: genuine connection after bad handles: %s\n", st.ToString().c_str()), 1;
  // One process plays both ends: one thread sends on sc while another receives on rc.
  nb::Plan tx;
  tx.dir = "send", tx.sizes = {1, 4096, 100000}, tx.nmsgs = 6, tx.timeout_ms = 30000;
  nb::Plan rx = tx.Mirror();
  nb::PlanResult res_tx, res_rx;
  Status st_rx;
  std::thread t([&] { st_rx = nb::RunPlan(ep->net(), rx, {}, {rc}, &res_rx); });
  st = nb::RunPlan(ep->net(), tx, {sc}, {}, &res_tx);
  t.join();
  if (!st.ok() || !st_rx.ok())
    return fprintf(stderr, "FAIL: traffic after bad handles: %s / %s\n", st.ToString().c_str(),
                   st_rx.ToString().c_str()),
           1;
  (void)ep->net().CloseSend(sc);
  (void)ep->net().CloseRecv(rc);
  return 0;
}

TEST(ConformanceHandles, GarbageAndTruncatedHandlesFailCleanly) {
  ArmWatchdog(100);
  UseShortFailureBounds();
  pid_t pid = fork();  // before this process loads the plugin or starts any thread
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    bool isolated = unshare(CLONE_NEWNET) == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0;
    _exit(GarbageHandlesChild(isolated));
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child crashed (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the FAIL line above";
}

int ConnectRaw(const ListenPort& lp) {
  int fd = socket(lp.v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  sockaddr_storage ss{};
  socklen_t len;
  if (lp.v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6, a->sin6_port = htons(lp.port), a->sin6_addr = in6addr_loopback;
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET, a->sin_port = htons(lp.port), a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof(*a);
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True once the plugin has closed this stranger's connection (EOF or reset), within the bound.
bool ClosedByPeer(int fd, uint64_t bound_ms) {
  Deadline dl = Deadline::AfterMs(bound_ms);
  char buf[4096];
  while (!dl.Expired()) {
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
    usleep(5000);
  }
  return false;
}

TEST(ConformanceHandles, StrangerWithoutTheNonceIsRejectedAndPeerUnaffected) {
  ArmWatchdog(100);
  UseShortFailureBounds();
  Pair pair;
  ASSERT_OK(pair.Open());
  auto& net = pair.ep().net();
  nb::Handle h;
  void* lc = nullptr;
  ASSERT_OK(pair.ep().Listen(&h, &lc));
  std::vector<ListenPort> ports = ListeningPorts();
  ASSERT_FALSE(ports.empty()) << "listen() left no TCP socket in LISTEN state in this process";
  size_t lines0 = nb::LogCapture::Snapshot().size();
  std::vector<int> talkers, idlers;
  for (const auto& lp : ports) {
    int garbage = ConnectRaw(lp), idle = ConnectRaw(lp), burst = ConnectRaw(lp);
    ASSERT_TRUE(garbage >= 0 && idle >= 0 && burst >= 0) << "cannot reach listen port " << lp.port;
    char junk[64];
    for (size_t i = 0; i < sizeof(junk); ++i) junk[i] = static_cast<char>(nb::Mix(77, i));
    ASSERT_EQ(send(garbage, junk, sizeof(junk), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(junk)));
    std::vector<char> ff(300, static_cast<char>(0xff));
    (void)send(burst, ff.data(), ff.size(), MSG_NOSIGNAL);
    close(burst);
    talkers.push_back(garbage), idlers.push_back(idle);
  }
  Deadline quiet = Deadline::AfterMs(1000);
  while (!quiet.Expired()) {
    void* rc = nullptr;
    ASSERT_EQ(net.Accept(lc, &rc), rrNcclSuccess) << "a stranger broke the listener";
    ASSERT_EQ(rc, nullptr) << "accept() returned a comm for a stranger without the nonce";
    sched_yield();
  }
  // The real peer connects while the idle stranger still holds its connection open.
  ASSERT_OK(pair.peer().Send({{"cmd", "connect"}, {"handles", {nb::ToHex(h)}}}));
  void* rc = nullptr;
  ASSERT_OK(pair.ep().Accept(lc, &rc, 30000));
  json r;
  ASSERT_OK(pair.peer().Reply(&r, 30000));
  pair.recv_comms().push_back(rc);
  nb::Plan p;
  p.dir = "recv", p.sizes = {1, 65537, 1 << 20}, p.nmsgs = 6, p.seed = 1234;
  ASSERT_OK(pair.Run(p)) << "the genuine peer was affected by the strangers";
  for (int fd : talkers)
    EXPECT_TRUE(ClosedByPeer(fd, kErrorBoundMs))
        << "the connection of a stranger that sent garbage stayed open";
  EXPECT_GT(nb::LogCapture::Snapshot().size(), lines0) << "strangers were rejected without a log line";
  for (int fd : talkers) close(fd);
  for (int fd : idlers) close(fd);
  ASSERT_OK(pair.CloseAll());
}

// Listens that NCCL closes without accepting (shared comms), devices that do not exist, and a
// handle whose listener is already gone.
TEST(ConformanceHandles, ListenConnectEdgeCases) {
  ArmWatchdog(100);
  UseShortFailureBounds();
  std::unique_ptr<nb::Endpoint> ep;
  ASSERT_OK(nb::Endpoint::Open(PluginPath(), 0, &ep));
  auto& net = ep->net();
  int fds0 = nb::CountOpenFds();
  for (int i = 0; i < 20; ++i) {
    nb::Handle h;
    void* lc = nullptr;
    ASSERT_OK(ep->Listen(&h, &lc));
    ASSERT_EQ(net.CloseListen(lc), rrNcclSuccess);
  }
  EXPECT_EQ(nb::CountOpenFds(), fds0) << "listen + closeListen without accept leaked descriptors";

  nb::Handle h;
  void* lc = nullptr;
  size_t warns0 = WarnCount();
  EXPECT_NE(net.Listen(ep->ctx(), ep->ndev(), h.data(), &lc), rrNcclSuccess)
      << "listen on a device past devices()";
  void* sc = nullptr;
  ASSERT_OK(ep->Listen(&h, &lc));
  EXPECT_NE(net.Connect(ep->ctx(), ep->ndev(), h.data(), &sc), rrNcclSuccess)
      << "connect on a device past devices()";
  EXPECT_GT(WarnCount(), warns0) << "bad device indices were refused without a WARN";

  // The listener is gone before anyone connects: connect must fail within the bound, not poll forever.
  ASSERT_EQ(net.CloseListen(lc), rrNcclSuccess);
  warns0 = WarnCount();
  Status st = ep->Connect(h, &sc, kErrorBoundMs);
  EXPECT_FALSE(st.ok()) << "connect to a closed listener succeeded";
  EXPECT_NE(st.code(), rr::Code::kInternalError)
      << "connect to a closed listener did not fail within " << kErrorBoundMs << " ms: " << st.ToString();
  EXPECT_GT(WarnCount(), warns0) << "the failed connect was not reported through the logger";
  EXPECT_EQ(nb::CountOpenFds(), fds0) << "descriptors leaked by the failed connect";
}

}  // namespace
}  // namespace conf
