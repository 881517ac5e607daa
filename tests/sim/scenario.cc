// rerail-simnet: what a seed draws (the swarm), how a scenario prints, and the throughput bench.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "rerail/log.h"
#include "world.h"

namespace rr::sim {

const char* FaultName(FaultKind k) {
  switch (k) {
    case FaultKind::kHole: return "black-hole";
    case FaultKind::kDown: return "link-down";
    case FaultKind::kReset: return "reset";
    case FaultKind::kRate: return "slow";
    case FaultKind::kFlap: return "flap";
    case FaultKind::kPause: return "not-polled";
    case FaultKind::kRailEvent: return "spurious-event";
    case FaultKind::kDeath: return "peer-death";
    case FaultKind::kAllDown: return "all-rails-down";
  }
  return "?";
}

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kSurvive: return "survive";
    case Mode::kTransient: return "transient";
    case Mode::kAllDead: return "all-dead";
    case Mode::kDeath: return "peer-death";
  }
  return "?";
}

namespace {

// Swarm testing: each fault kind is off for the whole seed or gets a weight of its own.
constexpr FaultKind kChaosKinds[] = {FaultKind::kHole, FaultKind::kDown,  FaultKind::kReset,    FaultKind::kRate,
                                     FaultKind::kFlap, FaultKind::kPause, FaultKind::kRailEvent};

uint64_t DrawSize(Rng& r, const net::CoreConfig& c, uint64_t max_size) {
  uint64_t s = 0;
  switch (r.Below(8)) {
    case 0: s = 0; break;
    case 1: s = r.Range(1, 64); break;
    case 2: s = c.chunk - 1 + r.Below(3); break;
    case 3: s = r.Below(c.eager_max + 2); break;
    case 4:
    case 5: s = r.LogUniform(1, 256 << 10); break;
    case 6: s = r.LogUniform(256 << 10, std::max<uint64_t>(max_size, 256 << 10)); break;
    default: s = static_cast<uint64_t>(c.chunk) * r.Range(1, 4); break;
  }
  return std::min(s, max_size);
}

}  // namespace

Scenario Draw(uint64_t seed, const Options& opt) {
  Rng r(seed);
  Scenario sc;
  sc.seed = seed;
  Rng gr(seed ^ 0x67726f7570656421ull);
  sc.group = gr.OneIn(3) ? 1 + static_cast<int>(gr.Below(8)) : 0;
  sc.core.grouped = sc.group > 0;
  Rng pr(seed ^ 0x6e63636c706f6c6cull);
  sc.nccl_polling = !pr.OneIn(4);
  int nr = 1 + static_cast<int>(r.Below(8));
  bool equal = r.OneIn(2);
  uint64_t rate0 = r.LogUniform(100'000'000, 400'000'000'000), delay0 = r.LogUniform(1 * kUs, 25 * kMs);
  for (int i = 0; i < nr; ++i) {
    RailSpec rs;
    rs.bps = equal ? rate0 : r.LogUniform(100'000'000, 400'000'000'000);
    rs.delay_ns = equal || r.OneIn(2) ? delay0 : r.LogUniform(1 * kUs, 25 * kMs);
    sc.rails.push_back(rs);
  }
  uint64_t rtt = 0, rate_sum = 0;
  for (auto& rs : sc.rails) rtt = std::max(rtt, 2 * rs.delay_ns), rate_sum += rs.bps;
  sc.streams = 1 + static_cast<int>(r.Below(4));
  net::CoreConfig& c = sc.core;
  c.chunk = r.OneIn(4) ? static_cast<uint32_t>(r.Range(4096, 1 << 20)) : 1u << r.Range(12, 20);
  c.policy = r.OneIn(2) ? net::Policy::kStripe : net::Policy::kFailover;
  c.eager_max = r.OneIn(4) ? 0 : r.LogUniform(64, 64 << 10);
  c.eager_pool = std::max<size_t>(c.eager_max, r.LogUniform(64 << 10, 4 << 20));
  c.stall_ns = r.LogUniform(std::max<uint64_t>(20 * kMs, 8 * rtt), 2 * kSec);
  c.heartbeat_ns = c.stall_ns / r.Range(2, 8);
  c.giveup_ns = std::max<uint64_t>(kSec, c.stall_ns * r.Range(10, 40));
  c.backoff_min_ns = r.LogUniform(10 * kMs, 500 * kMs);
  c.backoff_max_ns = r.LogUniform(c.backoff_min_ns, 5 * kSec);
  c.connect_grace_ns = r.LogUniform(10 * kMs, kSec);
  sc.sndbuf = r.LogUniform(16 << 10, 16 << 20);
  sc.rcvbuf = r.LogUniform(16 << 10, 16 << 20);
  sc.quantum = (16u << 10) << (2 * r.Below(3));
  int ncomms = 1 + static_cast<int>(r.Below(4));
  uint64_t total = 0, nmsgs = 0;
  for (int k = 0; k < ncomms; ++k) {
    CommSpec cs;
    cs.from = r.OneIn(3) ? 1 : 0;
    cs.window = 1 + static_cast<int>(r.Below(8));
    cs.primary = static_cast<int>(r.Below(nr));
    int n = static_cast<int>(r.Range(4, 32));
    for (int j = 0; j < n; ++j) cs.sizes.push_back(DrawSize(r, c, opt.max_size)), total += cs.sizes.back();
    nmsgs += n;
    cs.slack = r.OneIn(2) ? 0 : r.Range(1, 4096);
    sc.comms.push_back(cs);
  }
  uint64_t est = total * 8 * kSec / rate_sum + nmsgs * rtt;  // the workload's time on a healthy fabric
  uint64_t u = r.Below(20);
  sc.mode = u < 14 ? Mode::kSurvive : u < 16 ? Mode::kTransient : u < 18 ? Mode::kAllDead : Mode::kDeath;
  sc.perturb = r.OneIn(4);
  sc.start_at = kMs + 4 * rtt;
  if (sc.mode == Mode::kAllDead || sc.mode == Mode::kDeath) {
    sc.dead_at = sc.start_at + r.Below(std::max<uint64_t>(est, kMs));
    Fault f;
    f.at = sc.dead_at;
    f.dur = kForever;
    if (sc.mode == Mode::kAllDead) {
      f.kind = FaultKind::kAllDown;
      f.hosts = static_cast<int>(r.Below(4));
      f.event_delay = r.Below(5 * kMs);
    } else {
      f.kind = FaultKind::kDeath;
      f.host = static_cast<int>(r.Below(2));
    }
    sc.faults.push_back(f);
    return sc;
  }
  uint64_t chaos = std::clamp<uint64_t>(est / 100 * r.Range(20, 150), 5 * kMs, 5 * kSec);
  if (sc.mode == Mode::kTransient) chaos = std::min(chaos, c.giveup_ns / 2);
  sc.heal_at = sc.start_at + chaos;
  sc.safe_rail = sc.mode == Mode::kSurvive ? static_cast<int>(r.Below(nr)) : -1;
  uint64_t weight[7], wsum = 0;
  for (auto& w : weight) w = r.OneIn(3) ? 0 : r.Range(1, 10), wsum += w;
  int nfaults = wsum == 0 ? 0 : static_cast<int>(r.Below(16));
  for (int i = 0; i < nfaults; ++i) {
    uint64_t pick = r.Below(wsum);
    int kind = 0;
    while (pick >= weight[kind]) pick -= weight[kind++];
    Fault f;
    f.kind = kChaosKinds[kind];
    f.at = sc.start_at + r.Below(chaos);
    f.dur = std::min(r.LogUniform(100 * kUs, chaos), sc.heal_at - f.at);
    if (sc.mode == Mode::kTransient) f.dur = std::min(f.dur, c.giveup_ns / 4);
    if (f.kind == FaultKind::kPause) {
      f.comm = static_cast<int>(r.Below(ncomms));
      f.side = static_cast<int>(r.Below(2));
      f.dur = std::min(r.LogUniform(kMs, 5 * kSec), sc.heal_at - f.at);
      sc.faults.push_back(f);
      continue;
    }
    if (sc.safe_rail >= 0 && nr == 1) continue;  // the only rail is the safe one
    do f.rail = static_cast<int>(r.Below(nr));
    while (f.rail == sc.safe_rail);
    f.dirs = static_cast<int>(r.Range(1, 3));
    f.hosts = static_cast<int>(r.Below(4));
    f.event_delay = r.Below(5 * kMs);
    if (f.kind == FaultKind::kReset) f.dur = 0;
    if (f.kind == FaultKind::kRate) {  // never below 10 Mbit/s
      static constexpr uint32_t kDen[] = {2, 4, 10, 100};
      f.den = std::max<uint32_t>(1, std::min<uint32_t>(kDen[r.Below(4)], static_cast<uint32_t>(sc.rails[f.rail].bps / 10'000'000)));
    }
    if (f.kind == FaultKind::kFlap) f.period = r.LogUniform(100 * kUs, std::max<uint64_t>(200 * kUs, f.dur / 2));
    if (f.kind == FaultKind::kRailEvent) f.hosts = static_cast<int>(r.Range(1, 3));
    // Survive mode: some rails stay dead after the chaos phase (VOPR's liveness phase keeps some
    // failures for good); the rest must still finish within the final bound.
    bool dead_for_good = f.kind == FaultKind::kHole || f.kind == FaultKind::kDown;
    if (sc.mode == Mode::kSurvive && dead_for_good && r.OneIn(6)) f.dur = kForever;
    sc.faults.push_back(f);
  }
  return sc;
}

std::string Scenario::Describe() const {
  std::ostringstream o;
  o << "seed " << seed << ": mode " << ModeName(mode) << ", " << rails.size() << " rail(s)";
  if (safe_rail >= 0) o << " (safe rail " << safe_rail << ")";
  o << ", " << streams << " stream(s), chunk " << core.chunk << ", policy "
    << (core.policy == net::Policy::kStripe ? "stripe" : "failover") << ", eager " << core.eager_max << "/"
    << core.eager_pool << ", stall " << core.stall_ns / kMs << " ms, heartbeat " << core.heartbeat_ns / kMs
    << " ms, giveup " << core.giveup_ns / kMs << " ms, backoff " << core.backoff_min_ns / kMs << ".."
    << core.backoff_max_ns / kMs << " ms, sndbuf " << sndbuf << ", rcvbuf " << rcvbuf << ", quantum " << quantum
    << (perturb ? ", perturbed" : "") << (group > 0 ? ", grouped receives of " + std::to_string(group) : std::string())
    << (nccl_polling ? ", NCCL polling" : ", every comm polled")
    << "\n";
  for (size_t i = 0; i < rails.size(); ++i) {
    char b[120];
    snprintf(b, sizeof(b), "  rail %zu: %.3f Gbit/s, RTT %.1f us\n", i, rails[i].bps / 1e9, 2 * rails[i].delay_ns / 1e3);
    o << b;
  }
  for (size_t k = 0; k < comms.size(); ++k) {
    uint64_t total = 0, biggest = 0;
    for (uint64_t s : comms[k].sizes) total += s, biggest = std::max(biggest, s);
    o << "  comm " << k << ": " << (comms[k].from == 0 ? "A->B" : "B->A") << ", window " << comms[k].window
      << ", primary rail " << comms[k].primary << ", " << comms[k].sizes.size() << " messages, " << total
      << " bytes (largest " << biggest << "), slack " << comms[k].slack << "\n";
  }
  for (const Fault& f : faults) {
    char b[200];
    snprintf(b, sizeof(b), "  fault %s at %.3f ms for %.3f ms: rail %d dirs %d hosts %d delay %.3f ms comm %d side %d 1/%u period %.3f ms\n",
             FaultName(f.kind), f.at / 1e6, f.dur >= kForever ? -1.0 : f.dur / 1e6 /* -1: for good */, f.rail, f.dirs, f.hosts,
             f.event_delay / 1e6, f.comm, f.side, f.den, f.period / 1e6);
    o << b;
  }
  char b[120];
  snprintf(b, sizeof(b), "  chaos %.3f .. %.3f ms", start_at / 1e6, heal_at >= kForever ? -1.0 : heal_at / 1e6);
  o << b;
  if (dead_at < kForever) snprintf(b, sizeof(b), ", dead at %.3f ms", dead_at / 1e6), o << b;
  return o.str();
}

std::string ReproLine(uint64_t seed, const Options& opt) {
  std::ostringstream o;
  o << "build/tests/sim/rerail-simnet --seed " << seed;
  if (opt.max_size != Options{}.max_size) o << " --max-size " << opt.max_size;
  o << " --verbose";
  return o.str();
}

namespace {
void Quiet(int, unsigned long, const char*, int, const char*, ...) {}
}  // namespace

Result Run(const Scenario& sc, bool verbose) {
  // The core logs through rerail's logger: silent here; verbose runs trace the observer's events.
  log::SetLogger(Quiet);
  World w(sc, verbose);
  Result r = w.Go();
  log::SetLogger(nullptr);
  return r;
}

BenchPoint Bench(int rails, uint64_t bps, uint64_t delay_ns, uint64_t size, uint64_t span_ns, net::Policy policy,
                 int streams, uint32_t chunk, uint64_t sndbuf, int comms, uint32_t last_div) {
  Scenario sc;
  sc.seed = 1;
  sc.rails.assign(rails, RailSpec{bps, delay_ns});
  sc.rails.back().bps = bps / last_div;  // X,X,X,X/4: the last rail slower
  sc.streams = streams;
  sc.core.policy = policy;
  sc.core.chunk = chunk;
  sc.sndbuf = sndbuf;
  sc.rcvbuf = sndbuf * 3 / 2;
  sc.quantum = 64 << 10;
  sc.copy_bytes = false;
  sc.safe_rail = 0;
  double link_sum = static_cast<double>(bps) * (rails - 1) + static_cast<double>(bps / last_div);
  uint64_t n = static_cast<uint64_t>(link_sum / 8 * (static_cast<double>(span_ns) / 1e9) / static_cast<double>(size)) + 24;
  for (int k = 0; k < comms; ++k) {  // NCCL channels: each comm's primary on its own rail
    CommSpec cs;
    cs.window = 8;
    cs.primary = k % rails;
    cs.sizes.assign(n / comms + 16, size);
    sc.comms.push_back(cs);
  }
  sc.bench_skip = 16;  // the first 16 messages' worth of bytes ramp the estimates up
  BenchPoint p;
  p.link_sum_bps = link_sum;
  p.res = Run(sc, getenv("RERAIL_SIM_DEBUG") != nullptr);
  if (p.res.bench_ns > 0) {
    p.goodput_bps = static_cast<double>(p.res.bench_bytes) * 8e9 / static_cast<double>(p.res.bench_ns);
  }
  return p;
}

PerfPoint PerfBench(PerfColl coll, int rails, uint64_t bps, uint64_t delay_ns, uint32_t last_div, uint64_t size,
                    int warmup, int iters, const net::CoreConfig& core, int streams, int channels,
                    uint64_t quantum) {
  Scenario sc;
  sc.seed = 1;
  sc.rails.assign(rails, RailSpec{bps, delay_ns});
  sc.rails.back().bps = bps / last_div;
  sc.streams = streams;
  sc.core = core;
  sc.sndbuf = 4 << 20;  // Linux's autotuning ceilings (tcp_wmem / tcp_rmem max): RERAIL_TCP_SOCKBUF=0
  sc.rcvbuf = 6 << 20;
  sc.quantum = quantum;
  sc.copy_bytes = false;
  sc.safe_rail = 0;
  bool ring = coll == PerfColl::kAllReduce;
  // rerail-perf: ring slices of 2 x 512 KiB steps in 8 / 2 slots, p2p slices of one 128 KiB step in 8.
  // Each channel moves 1 / channels of the data over its own connections (primary: its device).
  uint64_t slice = ring ? 1 << 20 : 128 << 10, per_channel = size / channels;
  int slots = ring ? 4 : 8;
  size_t per_iter = ring ? per_channel / (4 << 20) * 6 : per_channel / slice;  // primitives per stream
  size_t slices = ring ? per_iter / 6 * 4 : per_iter;  // slices each connection carries per iteration
  int total = warmup + iters;
  for (int ch = 0; ch < channels; ++ch) {
    for (int from = 0; from < 2; ++from) {  // comm 2 ch: rank 0 -> rank 1; comm 2 ch + 1: rank 1 -> rank 0
      CommSpec cs;
      cs.from = from;
      cs.window = slots;
      cs.primary = ch % rails;  // channel c uses device c mod ndev on both ranks
      cs.sizes.assign(slices * total, slice);
      sc.comms.push_back(cs);
    }
    for (int h = 0; h < 2; ++h) {
      int send = 2 * ch + h, recv = 2 * ch + 1 - h;
      if (ring) {  // all_reduce, 2 ranks, per 4 MiB loop: send 2 slices, recv-reduce-send 2, recv 2
        EngineSpec e{h, send, recv, {}, per_iter};
        const uint8_t loop[] = {kPrimSend, kPrimSend, kPrimRecv | kPrimSend, kPrimRecv | kPrimSend, kPrimRecv, kPrimRecv};
        for (size_t i = 0; i < per_iter * total / 6; ++i) e.prims.insert(e.prims.end(), loop, loop + 6);
        sc.engines.push_back(e);
      } else {  // sendrecv: a send stream and a receive stream per rank
        sc.engines.push_back(EngineSpec{h, send, -1, std::vector<uint8_t>(per_iter * total, kPrimSend), per_iter});
        sc.engines.push_back(EngineSpec{h, -1, recv, std::vector<uint8_t>(per_iter * total, kPrimRecv), per_iter});
      }
    }
  }
  PerfPoint p;
  p.link_sum_bps = static_cast<double>(bps) * (rails - 1) + static_cast<double>(bps / last_div);
  p.res = Run(sc, getenv("RERAIL_SIM_DEBUG") != nullptr);
  uint64_t worst = 0;
  for (const auto& ends : p.res.iter_end_ns) {
    if (ends.size() < static_cast<size_t>(total) || warmup < 1) return p;
    worst = std::max(worst, ends[total - 1] - ends[warmup - 1]);
  }
  if (worst > 0) p.busbw_bps = static_cast<double>(size) * 8e9 * iters / static_cast<double>(worst);
  return p;
}

}  // namespace rr::sim
