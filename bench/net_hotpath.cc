// net-hotpath: the plugin's per-message cost in one thread, for instruction and system-call counts
// (valgrind --tool=callgrind, strace -c), which a two-process benchmark cannot give load-independently.
//
// One process loads the net plugin, connects one send comm to one of its own receive comms over
// device 0 (RERAIL_TCP_IFNAME=lo: 127.0.0.1), and moves --iters messages of --size bytes through it,
// --window outstanding, driven as NCCL's proxy does (NULL request = retry, only the oldest request of
// each comm tested). Each pass posts what the window allows, then tests the oldest send and the oldest
// receive once. --idle N then calls test() N times on a receive that nothing will complete (the cost
// of NCCL's idle polling), and the receive is completed by one last send.
// --quiet-ms M (with --comms C): C self-connected pairs each move --iters messages, then nothing calls
// the plugin for M ms, as between two collectives; the process's CPU time over that pause is what the
// plugin's own threads spent (IdleSends driving receive comms that owe their senders progress,
// RecvCore::OwesIdleProgress), printed as quiet_cpu_pct (percent of one core).
//
//   net-hotpath [--plugin PATH] [--size BYTES] [--iters N] [--window W] [--idle N] [--comms C --quiet-ms M]
// Prints "msgs=N size=B ns_per_msg=X tests_per_msg=Y refused_per_msg=R idle_ns=Z". Profile only the measured loops:
//   valgrind --tool=callgrind --toggle-collect='*HotLoop*' build/bench/net-hotpath --iters 20000
// (the per-message figure is the Ir of HotLoop over --iters; IdleLoop's over --idle).
#include <CLI/CLI.hpp>

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "proxy_driver.h"
#include "rerail/clock.h"

namespace nb = rr::netbench;
using rr::Status;

namespace {

struct Counts {
  uint64_t tests = 0;
  uint64_t refused = 0;  // isend/irecv calls that returned a NULL request (retry)
};

// The measured loop (callgrind --toggle-collect='*HotLoop*').
__attribute__((noinline)) Status HotLoop(nb::ReqQueue& sq, nb::ReqQueue& rq, std::vector<char>& sbuf,
                                         std::vector<char>& rbuf, size_t size, void* smh, void* rmh,
                                         uint64_t iters, Counts* c) {
  uint64_t rposted = 0, sposted = 0, sdone = 0, rdone = 0;
  const rr::Deadline dl = rr::Deadline::AfterMs(120000);
  while (sdone < iters || rdone < iters) {
    bool posted = true;
    while (rposted < iters && posted) {
      if (rq.full()) break;
      RR_CHECK(rq.Post(rbuf.data(), size, 0, rmh, rposted, &posted));
      rposted += posted;
      c->refused += !posted;
    }
    posted = true;
    while (sposted < iters && posted) {
      if (sq.full()) break;
      RR_CHECK(sq.Post(sbuf.data(), size, 0, smh, sposted, &posted));
      sposted += posted;
      c->refused += !posted;
    }
    bool done = false;
    nb::ReqQueue::Done d{};
    if (sdone < sposted) {
      RR_CHECK(sq.TestOldest(&done, &d));
      ++c->tests;
      sdone += done;
    }
    if (rdone < rposted) {
      RR_CHECK(rq.TestOldest(&done, &d));
      ++c->tests;
      rdone += done;
    }
    if ((c->tests & 0xffff) == 0 && dl.Expired()) return Status::Internal("hot loop timed out");
  }
  return Status::Ok();
}

// test() on a receive nothing completes (callgrind --toggle-collect='*IdleLoop*').
__attribute__((noinline)) Status IdleLoop(nb::ReqQueue& rq, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    bool done = false;
    nb::ReqQueue::Done d{};
    RR_CHECK(rq.TestOldest(&done, &d));
    if (done) return Status::Internal("an idle receive completed");
  }
  return Status::Ok();
}

Status Run(const std::string& plugin, size_t size, uint64_t iters, int window, uint64_t idle) {
  std::unique_ptr<nb::Endpoint> ep;
  RR_CHECK(nb::Endpoint::Open(plugin, 0, &ep));
  void *sc = nullptr, *rc = nullptr;
  RR_CHECK(ep->SelfConnect(&sc, &rc, 30000));
  std::vector<char> sbuf(size + 64, 0x11), rbuf(size + 64, 0);
  void *smh = nullptr, *rmh = nullptr;
  RR_CHECK(nb::FromNccl(ep->net().RegMr(sc, sbuf.data(), sbuf.size(), RR_NCCL_PTR_HOST, &smh), "regMr send"));
  RR_CHECK(nb::FromNccl(ep->net().RegMr(rc, rbuf.data(), rbuf.size(), RR_NCCL_PTR_HOST, &rmh), "regMr recv"));
  nb::ReqQueue sq(&ep->net(), sc, true, window), rq(&ep->net(), rc, false, window);
  Counts c;
  RR_CHECK(HotLoop(sq, rq, sbuf, rbuf, size, smh, rmh, iters / 10 + 1, &c));  // warm-up
  c = Counts{};
  uint64_t t0 = rr::NowNs();
  RR_CHECK(HotLoop(sq, rq, sbuf, rbuf, size, smh, rmh, iters, &c));
  uint64_t t1 = rr::NowNs();
  uint64_t idle_ns = 0;
  if (idle > 0) {
    bool posted = false;
    RR_CHECK(rq.Post(rbuf.data(), size, 0, rmh, 0, &posted));
    if (!posted) return Status::Internal("idle receive not posted");
    uint64_t i0 = rr::NowNs();
    RR_CHECK(IdleLoop(rq, idle));
    idle_ns = (rr::NowNs() - i0) / idle;
    RR_CHECK(sq.Post(sbuf.data(), size, 0, smh, 0, &posted));  // completes the idle receive
    if (!posted) return Status::Internal("closing send not posted");
    const rr::Deadline dl = rr::Deadline::AfterMs(30000);
    for (bool sd = false, rd = false; !sd || !rd;) {
      nb::ReqQueue::Done d{};
      bool done = false;
      if (!sd) {
        RR_CHECK(sq.TestOldest(&done, &d));
        sd = done;
      }
      if (!rd) {
        RR_CHECK(rq.TestOldest(&done, &d));
        rd = done;
      }
      if (dl.Expired()) return Status::Internal("the idle receive never completed");
    }
  }
  std::printf("msgs=%llu size=%zu ns_per_msg=%.0f tests_per_msg=%.2f refused_per_msg=%.2f idle_ns=%llu\n",
              static_cast<unsigned long long>(iters), size, static_cast<double>(t1 - t0) / static_cast<double>(iters),
              static_cast<double>(c.tests) / static_cast<double>(iters), static_cast<double>(c.refused) / static_cast<double>(iters),
              static_cast<unsigned long long>(idle_ns));
  RR_CHECK(nb::FromNccl(ep->net().DeregMr(sc, smh), "deregMr send"));
  RR_CHECK(nb::FromNccl(ep->net().DeregMr(rc, rmh), "deregMr recv"));
  // The receiver first: it writes the acks it held back, which a closing send comm waits for.
  RR_CHECK(nb::FromNccl(ep->net().CloseRecv(rc), "closeRecv"));
  RR_CHECK(nb::FromNccl(ep->net().CloseSend(sc), "closeSend"));
  return ep->Finalize();
}

// --quiet-ms: `comms` pairs, `iters` messages each, then `quiet_ms` without a call into the plugin.
Status RunQuiet(const std::string& plugin, size_t size, uint64_t iters, int window, int comms, uint64_t quiet_ms) {
  std::unique_ptr<nb::Endpoint> ep;
  RR_CHECK(nb::Endpoint::Open(plugin, 0, &ep));
  struct Pair {
    void *sc = nullptr, *rc = nullptr, *smh = nullptr, *rmh = nullptr;
    std::vector<char> sbuf, rbuf;
  };
  std::vector<Pair> pairs(static_cast<size_t>(comms));
  for (Pair& p : pairs) {
    RR_CHECK(ep->SelfConnect(&p.sc, &p.rc, 30000));
    p.sbuf.assign(size + 64, 0x11);
    p.rbuf.assign(size + 64, 0);
    RR_CHECK(nb::FromNccl(ep->net().RegMr(p.sc, p.sbuf.data(), p.sbuf.size(), RR_NCCL_PTR_HOST, &p.smh), "regMr send"));
    RR_CHECK(nb::FromNccl(ep->net().RegMr(p.rc, p.rbuf.data(), p.rbuf.size(), RR_NCCL_PTR_HOST, &p.rmh), "regMr recv"));
    nb::ReqQueue sq(&ep->net(), p.sc, true, window), rq(&ep->net(), p.rc, false, window);
    Counts c;
    RR_CHECK(HotLoop(sq, rq, p.sbuf, p.rbuf, size, p.smh, p.rmh, iters, &c));
  }
  timespec c0{}, c1{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  uint64_t t0 = rr::NowNs();
  usleep(static_cast<useconds_t>(quiet_ms * 1000));
  uint64_t wall = rr::NowNs() - t0;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  double cpu = static_cast<double>(c1.tv_sec - c0.tv_sec) * 1e9 + static_cast<double>(c1.tv_nsec - c0.tv_nsec);
  std::printf("comms=%d msgs_each=%llu quiet_ms=%llu quiet_cpu_ms=%.3f quiet_cpu_pct=%.3f\n", comms,
              static_cast<unsigned long long>(iters), static_cast<unsigned long long>(quiet_ms), cpu / 1e6,
              100.0 * cpu / static_cast<double>(wall));
  for (Pair& p : pairs) {
    RR_CHECK(nb::FromNccl(ep->net().DeregMr(p.sc, p.smh), "deregMr send"));
    RR_CHECK(nb::FromNccl(ep->net().DeregMr(p.rc, p.rmh), "deregMr recv"));
    RR_CHECK(nb::FromNccl(ep->net().CloseRecv(p.rc), "closeRecv"));
    RR_CHECK(nb::FromNccl(ep->net().CloseSend(p.sc), "closeSend"));
  }
  return ep->Finalize();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"net-hotpath: one-thread per-message cost of a net plugin (for callgrind / strace)"};
  std::string plugin = NET_HOTPATH_DEFAULT_PLUGIN;
  uint64_t size = 8, iters = 20000, idle = 0;
  int window = 1;
  int comms = 1;
  uint64_t quiet_ms = 0;
  app.add_option("--plugin", plugin, "net plugin: path or NCCL_NET_PLUGIN-style name")->capture_default_str();
  app.add_option("--size", size, "bytes per message")->check(CLI::Range(uint64_t{0}, uint64_t{1} << 30));
  app.add_option("--iters", iters, "messages")->check(CLI::Range(uint64_t{1}, uint64_t{100000000}));
  app.add_option("--window", window, "outstanding requests per comm")->check(CLI::Range(1, 8));
  app.add_option("--idle", idle, "idle test() calls to time after the messages")->check(CLI::Range(uint64_t{0}, uint64_t{100000000}));
  app.add_option("--comms", comms, "with --quiet-ms: self-connected pairs")->check(CLI::Range(1, 1024));
  app.add_option("--quiet-ms", quiet_ms, "after the messages, a pause without plugin calls; prints the CPU spent in it")
      ->check(CLI::Range(uint64_t{0}, uint64_t{600000}));
  CLI11_PARSE(app, argc, argv);
  Status s = quiet_ms > 0 ? RunQuiet(plugin, size, iters, window, comms, quiet_ms) : Run(plugin, size, iters, window, idle);
  if (!s.ok()) {
    std::fprintf(stderr, "net-hotpath: %s\n", s.ToString().c_str());
    for (const auto& l : nb::LogCapture::Take())
      if (l.level == 2) std::fprintf(stderr, "  plugin WARN: %s\n", l.text.c_str());
    return 1;
  }
  return 0;
}
