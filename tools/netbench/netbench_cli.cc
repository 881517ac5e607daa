// `rerail-perf netbench` (formerly rerail-netbench) — loopback throughput and latency of a net plugin
// between two processes.
//
// The process spawns a copy of itself as the peer (--peer, commanded over a socketpair), both load the
// plugin, and they connect one send and one recv comm each way exactly as NCCL's proxy would. Then:
//   * throughput: --iters messages of --size bytes, --window outstanding (NCCL_STEPS = 8), one way;
//   * latency: --lat-iters ping-pong round trips of --lat-size bytes;
//   * the latency reference (raw_pingpong.h): the same ping-pong over one raw TCP connection whose ends
//     spin on non-blocking sockets, no plugin (run first, before the plugin is loaded).
// Output: a human line per figure and, last, one machine-readable line:
//   RESULT bw_GBps=<x> lat_us=<mean half round trip, as sockperf reports> lat_p50_us=<median> rtt_us=<y>
//          raw_lat_us=<reference, mean half round trip> raw_lat_p50_us=<median>
// The plugin's knobs (RERAIL_TCP_STREAMS, ...) come from the environment both processes inherit.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <thread>

#include "netbench_cli.h"
#include "oob.h"
#include "peer.h"
#include "plan.h"
#include "proxy_driver.h"
#include "raw_pingpong.h"

using nlohmann::json;
using rr::Status;
namespace nb = rr::netbench;

namespace {

struct Options {
  std::string plugin;
  uint64_t size = 64ull << 20;
  uint64_t iters = 48;
  int window = 8;
  uint64_t lat_size = 8;
  uint64_t lat_iters = 20000;
  std::string lat_dump;
  std::vector<std::string> peer_env;  // NAME=value for the peer process only
  bool bw = true, lat = true, raw = true;
  bool verbose = false;
};

int Die(const char* what, const Status& s) {
  std::fprintf(stderr, "rerail-perf netbench: %s: %s\n", what, s.ToString().c_str());
  for (const auto& l : nb::LogCapture::Take())
    if (l.level == 2) std::fprintf(stderr, "  plugin WARN: %s\n", l.text.c_str());
  return 1;
}

// One send and one recv comm in each direction between this process and the peer.
Status Wire(nb::Endpoint& ep, nb::PeerClient& peer, void** send_comm, void** recv_comm) {
  json r;
  nb::Handle h;
  void* lc = nullptr;
  RR_CHECK(ep.Listen(&h, &lc));
  RR_CHECK(peer.Send({{"cmd", "connect"}, {"handles", {nb::ToHex(h)}}}));
  RR_CHECK(ep.Accept(lc, recv_comm, 30000));
  RR_CHECK(peer.Reply(&r, 30000));
  RR_CHECK(peer.Call({{"cmd", "listen"}, {"n", 1}}, &r, 30000));
  nb::Handle ph;
  if (!nb::FromHex(r.at("handles").at(0).get<std::string>(), &ph))
    return Status::Internal("bad handle from peer");
  RR_CHECK(ep.Connect(ph, send_comm, 30000));
  return peer.Reply(&r, 30000);
}

Status Bandwidth(nb::Endpoint& ep, nb::PeerClient& peer, void* sc, const Options& o, double* gbps) {
  nb::Plan p;
  p.dir = "send", p.sizes = {o.size}, p.window = o.window, p.verify = false, p.timeout_ms = 300000;
  for (uint64_t n : {uint64_t{4}, o.iters}) {  // a short warm-up run, then the measured one
    p.nmsgs = n;
    json r;
    RR_CHECK(peer.Send({{"cmd", "run"}, {"plan", p.Mirror().ToJson()}}));
    nb::PlanResult res;
    Status s = nb::RunPlan(ep.net(), p, {sc}, {}, &res);
    Status pr = peer.Reply(&r, 300000);
    RR_CHECK(s);
    RR_CHECK(pr);
    *gbps = static_cast<double>(res.bytes_sent) / res.seconds * 1e-9;
  }
  return Status::Ok();
}

void PrintRtt(const char* what, const Options& o, const nb::RttStats& rtt) {
  std::printf("%s: %llu B ping-pong, %llu round trips: rtt mean %.2f us (one-way %.2f), median %.2f us (one-way %.2f), "
              "p90 %.2f, p99 %.2f, max %.1f us\n",
              what, static_cast<unsigned long long>(o.lat_size), static_cast<unsigned long long>(o.lat_iters),
              rtt.mean_us, rtt.mean_us / 2, rtt.p50_us, rtt.p50_us / 2, rtt.p90_us, rtt.p99_us, rtt.max_us);
}

int Main(const Options& o) {
  nb::LogCapture::SetEcho(o.verbose);
  nb::RttStats raw;
  if (o.raw) {  // before the plugin and its threads exist: the reference forks
    Status s = nb::RawTcpPingPong(o.lat_size, o.lat_iters / 10 + 1, o.lat_iters, 120000, &raw);
    if (!s.ok()) return Die("raw TCP reference", s);
    PrintRtt("raw TCP reference (non-blocking, both ends spinning)", o, raw);
  }
  if (!o.bw && !o.lat) {
    std::printf("RESULT raw_lat_us=%.3f raw_lat_p50_us=%.3f\n", raw.mean_us / 2, raw.p50_us / 2);
    return 0;
  }
  nb::PeerClient peer;
  json r;
  Status s = peer.Spawn("/proc/self/exe", {"netbench", "--peer"}, o.peer_env);
  if (s.ok()) s = peer.Call({{"cmd", "open"}, {"plugin", o.plugin}, {"dev", 0}}, &r, 30000);
  if (!s.ok()) return Die("peer", s);
  std::unique_ptr<nb::Endpoint> ep;
  s = nb::Endpoint::Open(o.plugin, 0, &ep);
  if (!s.ok()) return Die("open plugin", s);
  rrNcclNetProperties_v12_t props;
  (void)ep->net().GetProperties(0, &props);
  std::printf("# plugin %s (ABI v%d), device 0 = %s\n", ep->net().Path().c_str(), ep->net().Version(),
              props.name ? props.name : "?");
  void *sc = nullptr, *rc = nullptr;
  s = Wire(*ep, peer, &sc, &rc);
  if (!s.ok()) return Die("connect", s);
  double gbps = 0;
  nb::RttStats rtt;
  if (o.bw) {
    s = Bandwidth(*ep, peer, sc, o, &gbps);
    if (!s.ok()) return Die("throughput", s);
    std::printf("throughput: %llu x %llu B, window %d: %.3f GB/s\n", static_cast<unsigned long long>(o.iters),
                static_cast<unsigned long long>(o.size), o.window, gbps);
  }
  if (o.lat) {
    uint64_t warm = o.lat_iters / 10 + 1;
    s = peer.Send({{"cmd", "pingpong"},
                   {"size", o.lat_size},
                   {"warmup", warm},
                   {"iters", o.lat_iters},
                   {"initiator", false}});
    if (s.ok()) s = nb::PingPong(ep->net(), sc, rc, o.lat_size, warm, o.lat_iters, true, 120000, &rtt);
    Status pr = peer.Reply(&r, 120000);
    if (s.ok()) s = pr;
    if (!s.ok()) return Die("latency", s);
    PrintRtt("latency", o, rtt);
    if (!o.lat_dump.empty()) {
      std::ofstream f(o.lat_dump);
      for (uint64_t v : rtt.in_order) f << v << '\n';
      if (!f) return Die("latency", Status::InvalidArg("cannot write " + o.lat_dump));
    }
  }
  (void)peer.Call({{"cmd", "close"}}, &r, 30000);
  (void)ep->net().CloseSend(sc);
  (void)ep->net().CloseRecv(rc);
  (void)peer.Call({{"cmd", "finalize"}}, &r, 30000);
  (void)peer.Call({{"cmd", "exit"}}, &r, 10000);
  peer.peer().Wait(10000);
  std::printf("RESULT bw_GBps=%.4f lat_us=%.3f lat_p50_us=%.3f rtt_us=%.3f", gbps, rtt.mean_us / 2,
              rtt.p50_us / 2, rtt.mean_us);
  if (o.raw) std::printf(" raw_lat_us=%.3f raw_lat_p50_us=%.3f", raw.mean_us / 2, raw.p50_us / 2);
  std::printf("\n");
  return 0;
}

}  // namespace

int rr::netbench::CliMain(int argc, char** argv, const std::string& default_plugin) {
  CLI::App app{"rerail-perf netbench: two-process loopback throughput/latency of an NCCL net plugin"};
  app.name("rerail-perf netbench");
  Options o;
  o.plugin = default_plugin;
  bool peer_mode = false;
  std::string only;
  app.add_option("--plugin", o.plugin, "net plugin: path or NCCL_NET_PLUGIN-style name")->capture_default_str();
  app.add_option("--size", o.size, "bytes per throughput message")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  app.add_option("--iters", o.iters, "throughput messages")->check(CLI::Range(1, 100000));
  app.add_option("--window", o.window, "outstanding requests per comm")->check(CLI::Range(1, 32));
  app.add_option("--lat-size", o.lat_size, "bytes per ping-pong message")->check(CLI::Range(0, 1 << 20));
  app.add_option("--lat-iters", o.lat_iters, "ping-pong round trips")->check(CLI::Range(1, 10000000));
  app.add_option("--peer-env", o.peer_env, "NAME=value set in the peer process only (repeatable): e.g. RERAIL_* settings that differ between the two ends")
      ->check([](const std::string& v) {
        const size_t eq = v.find('=');
        return eq == std::string::npos || eq == 0 ? std::string("expected NAME=value, got '" + v + "'") : std::string();
      });
  app.add_option("--lat-dump", o.lat_dump, "write each timed round trip of the plugin's ping-pong (ns, one per line, in order) to this file");
  app.add_option("--only", only, "run only 'bw', 'lat' or 'raw' (the raw TCP latency reference)")
      ->check(CLI::IsMember({"bw", "lat", "raw"}));
  app.add_flag("-v,--verbose", o.verbose, "echo the plugin's log lines");
  app.add_flag("--peer", peer_mode, "internal: run as the commanded peer on fd 3");
  CLI11_PARSE(app, argc, argv);
  if (peer_mode) {
    nb::Oob oob(3);
    return nb::RunPeer(oob);
  }
  if (!only.empty()) o.bw = only == "bw", o.lat = only == "lat", o.raw = only == "raw";
  if (only.empty() && o.lat_size == 0) o.raw = false;  // a TCP ping-pong needs a byte to carry
  return Main(o);
}
