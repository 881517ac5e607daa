// rerail-simnet: runs seeds of the deterministic network simulator (sim.h) against the real core.
//   rerail-simnet --seed S [--verbose]       one seed, its scenario and (verbose) its event trace
//   rerail-simnet --seeds N [--from S]       a swarm; every 64th seed is run twice (determinism)
//   rerail-simnet --bench                    throughput of one connection vs the link sum
//   rerail-simnet --perf [--perf-channels C] rerail-perf sendrecv / all_reduce -C 1 (C) vs the link sum
// Exit status: 0 all seeds held every oracle, 1 a violation (seed and repro line printed), 2 usage.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include <malloc.h>

#include <CLI/CLI.hpp>

#include "sim.h"

namespace {

using rr::sim::kMs;
using rr::sim::kUs;

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int RunBench() {
  struct Point {
    const char* name;
    int rails;
    uint64_t bps;
    uint64_t delay;
    uint64_t span;
    uint32_t last_div = 1;
  };
  // Spans hold ~50-100 messages in the measured phase (the figure moves by about one message, 1-2 %).
  const Point pts[] = {
      {"200 Mbit/s x4, RTT 0.1 ms (netns)", 4, 200'000'000, 50 * kUs, 6000 * kMs},
      {"1 Gbit/s x4, RTT 0.1 ms (netns)", 4, 1'000'000'000, 50 * kUs, 3000 * kMs},
      {"25 Gbit/s x4, RTT 10 us", 4, 25'000'000'000, 5 * kUs, 600 * kMs},
      {"100 Gbit/s x4, RTT 4 us", 4, 100'000'000'000, 2 * kUs, 300 * kMs},
      {"400 Gbit/s x4, RTT 2 us", 4, 400'000'000'000, 1 * kUs, 150 * kMs},
      {"400 Gbit/s x4, RTT 10 us", 4, 400'000'000'000, 5 * kUs, 150 * kMs},
      {"200 Mbit/s x3 + 50 Mbit/s, RTT 0.1 ms", 4, 200'000'000, 50 * kUs, 6000 * kMs, 4},
      {"1 Gbit/s x3 + 250 Mbit/s, RTT 0.1 ms", 4, 1'000'000'000, 50 * kUs, 3000 * kMs, 4},
      {"25 Gbit/s x3 + 6.25 Gbit/s, RTT 10 us", 4, 25'000'000'000, 5 * kUs, 600 * kMs, 4},
  };

  printf("# window 8, 64 MiB messages, 128 KiB chunks, 4 MiB socket buffers, no faults; goodput / link sum\n");
  printf("# %-38s %-9s %-5s %-7s %11s %11s %7s %7s\n", "rails", "policy", "comms", "streams", "link sum", "goodput", "ratio",
         "wall s");
  struct Run {
    rr::net::Policy policy;
    int comms, streams;
  };
  const Run runs[] = {{rr::net::Policy::kStripe, 1, 1}, {rr::net::Policy::kStripe, 1, 4}, {rr::net::Policy::kFailover, 1, 1},
                      {rr::net::Policy::kStripe, 4, 1}, {rr::net::Policy::kFailover, 4, 1}};
  int idx = -1, only = getenv("RERAIL_SIM_BENCH") ? atoi(getenv("RERAIL_SIM_BENCH")) : -1;  // one point
  for (const Point& p : pts) {
    for (const Run& r : runs) {
      if (only >= 0 && ++idx != only) continue;
      double t0 = WallSeconds();
      auto b = rr::sim::Bench(p.rails, p.bps, p.delay, 64 << 20, p.span, r.policy, r.streams, 128 * 1024, 4 << 20, r.comms,
                              p.last_div);
      printf("  %-38s %-9s %-5d %-7d %9.2f G %9.2f G %7.3f %7.2f%s\n", p.name,
             r.policy == rr::net::Policy::kStripe ? "stripe" : "failover", r.comms, r.streams, b.link_sum_bps / 1e9,
             b.goodput_bps / 1e9, b.goodput_bps / b.link_sum_bps, WallSeconds() - t0,
             b.res.ok ? "" : ("  VIOLATION " + b.res.violation).c_str());
      fflush(stdout);
    }
  }
  return 0;
}

// rerail-perf -N 2 -C 1 (or -C `channels`) over 4 rails (scripts/bench-rails.sh, BENCH_CHANNELS): busbw over the
// link sum (X,X,X,X/4: the sum is 3.25 X), with the floors (0.95 x 4X, 0.9 x 3.25X).
int RunPerfBench(uint64_t delay_ns, uint64_t size, int iters, int channels, uint64_t quantum) {
  struct Point {
    const char* name;
    uint64_t bps;
    uint32_t last_div;
  };
  const Point pts[] = {{"200 Mbit/s x4", 200'000'000, 1}, {"200 Mbit/s x3 + X/4", 200'000'000, 4},
                       {"500 Mbit/s x4", 500'000'000, 1}, {"500 Mbit/s x3 + X/4", 500'000'000, 4},
                       {"1 Gbit/s x4", 1'000'000'000, 1}, {"1 Gbit/s x3 + X/4", 1'000'000'000, 4}};
  printf("# rerail-perf -N 2 -C %d (%d connection(s) per peer and direction), 4 rails, RTT %.0f us, %" PRIu64
         " MiB, 1 warm-up + %d iterations; production core defaults (stripe, %u KiB chunks, 2 streams)\n",
         channels, channels, 2 * delay_ns / 1e3, size >> 20, iters, rr::net::CoreConfig{}.chunk >> 10);
  printf("# wire round-robin segment %" PRIu64 " KiB\n", quantum >> 10);
  printf("# %-22s %-10s %10s %10s %7s %6s %7s\n", "rails", "coll", "link sum", "busbw", "ratio", "floor", "wall s");
  int idx = -1, only = getenv("RERAIL_SIM_BENCH") ? atoi(getenv("RERAIL_SIM_BENCH")) : -1;
  for (const Point& p : pts) {
    for (auto coll : {rr::sim::PerfColl::kSendRecv, rr::sim::PerfColl::kAllReduce}) {
      if (only >= 0 && ++idx != only) continue;
      double t0 = WallSeconds();
      auto b = rr::sim::PerfBench(coll, 4, p.bps, delay_ns, p.last_div, size, 1, iters, rr::net::CoreConfig{}, 2, channels, quantum);
      printf("  %-22s %-10s %8.3f G %8.3f G %7.3f %6.2f %7.2f%s\n", p.name,
             coll == rr::sim::PerfColl::kSendRecv ? "sendrecv" : "all_reduce", b.link_sum_bps / 1e9, b.busbw_bps / 1e9,
             b.busbw_bps / b.link_sum_bps, p.last_div == 1 ? 0.95 : 0.9, WallSeconds() - t0,
             b.res.ok ? "" : ("  VIOLATION " + b.res.violation).c_str());
      fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rerail-simnet: deterministic network simulation of rerail's sans-I/O core"};
  uint64_t seed = 0, from = 1, seeds = 0;
  bool verbose = false, bench = false, keep_going = false;
  rr::sim::Options opt;
  auto* one = app.add_option("--seed", seed, "run this one seed (prints its scenario)");
  app.add_option("--seeds", seeds, "run this many seeds");
  app.add_option("--from", from, "first seed of --seeds (default 1)");
  app.add_option("--max-size", opt.max_size, "largest message the swarm draws, bytes (up to 1 GiB)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  app.add_flag("--verbose", verbose, "trace faults, link failures, failbacks and errors in virtual time");
  app.add_flag("--keep-going", keep_going, "do not stop at the first violation");
  app.add_flag("--bench", bench, "throughput figures: one connection vs the link sum");
  bool perf = false;
  uint64_t perf_rtt_us = 100, perf_size = 64 << 20;
  int perf_iters = 3, perf_channels = 1;
  uint64_t perf_quantum = 64 << 10;
  app.add_flag("--perf", perf, "rerail-perf sendrecv / all_reduce -C 1 figures over 4 rails at 0.2-1 Gbit/s");
  app.add_option("--perf-rtt-us", perf_rtt_us, "--perf: round-trip time of every rail (default 100)");
  app.add_option("--perf-size", perf_size, "--perf: bytes per collective (default 64 MiB, a multiple of 4 MiB)");
  app.add_option("--perf-iters", perf_iters, "--perf: timed iterations (default 3)");
  app.add_option("--perf-channels", perf_channels, "--perf: rerail-perf -C (default 1)")->check(CLI::Range(1, 16));
  app.add_option("--perf-quantum", perf_quantum, "--perf: the wires' round-robin segment, bytes (default 65536)")
      ->check(CLI::Range(uint64_t{1024}, uint64_t{64} << 20));
  CLI11_PARSE(app, argc, argv);
  // Seeds allocate and free megabytes of buffers: keep them in the heap instead of fresh mmaps
  // (page faults were a third of the run time).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  opt.verbose = verbose;
  if (bench) return RunBench();
  if (perf) return RunPerfBench(perf_rtt_us * kUs / 2, perf_size, perf_iters, perf_channels, perf_quantum);
  if (one->count() > 0) from = seed, seeds = 1;
  if (seeds == 0) {
    fprintf(stderr, "rerail-simnet: give --seed S, --seeds N or --bench\n");
    return 2;
  }
  double t0 = WallSeconds(), last = t0;
  uint64_t bad = 0, events = 0, bytes = 0, failovers = 0, errors = 0, dups = 0, resent = 0, worst = 0, mode_n[4] = {};
  uint64_t done = 0, trace = 0;
  for (uint64_t s = from; s < from + seeds; ++s) {
    rr::sim::Scenario sc = rr::sim::Draw(s, opt);
    if (seeds == 1) printf("%s\n", sc.Describe().c_str());
    rr::sim::Result r = rr::sim::Run(sc, verbose);
    if (r.ok && s % 64 == 0) {  // determinism: a rerun must take the very same path
      rr::sim::Result again = rr::sim::Run(sc, false);
      if (again.trace_hash != r.trace_hash || again.events != r.events) {
        r.ok = false;
        r.violation = "nondeterminism: a rerun of the seed took another path";
      }
    }
    ++done;
    trace = trace * 0x100000001b3ull ^ r.trace_hash;  // one figure for "same paths as before a refactor"
    ++mode_n[static_cast<int>(sc.mode)];
    events += r.events, bytes += r.bytes, failovers += r.failovers, errors += r.errors, dups += r.dup_bytes;
    resent += r.resent_bytes;
    worst = std::max(worst, r.worst_latency_ns);
    if (!r.ok) {
      ++bad;
      if (seeds > 1) printf("%s\n", sc.Describe().c_str());
      printf("VIOLATION seed %" PRIu64 ": %s\n  repro: %s\n", s, r.violation.c_str(), rr::sim::ReproLine(s, opt).c_str());
      fflush(stdout);
      if (!keep_going) break;
    } else if (seeds == 1) {
      printf("seed %" PRIu64 " ok: %" PRIu64 " events, %.3f s virtual, %" PRIu64 " messages, %" PRIu64
             " bytes, %" PRIu64 " failovers, %" PRIu64 " bytes re-sent, %" PRIu64 " duplicate bytes, %" PRIu64
             " requests errored, slowest message %.3f ms\n",
             s, r.events, r.end_ns / 1e9, r.messages, r.bytes, r.failovers, r.resent_bytes, r.dup_bytes, r.errors,
             r.worst_latency_ns / 1e6);
    }
    double now = WallSeconds();
    if (seeds > 1 && now - last > 10) {
      last = now;
      printf("... %" PRIu64 " seeds, %" PRIu64 " violations, %.1f seeds/s\n", done, bad, done / (now - t0));
      fflush(stdout);
    }
  }
  double wall = WallSeconds() - t0;
  if (seeds > 1) {
    printf("seeds %" PRIu64 " (%" PRIu64 "..%" PRIu64 "): %" PRIu64 " violations; %.1f seeds/s, %.2f M events/s, %.1f s\n",
           done, from, from + done - 1, bad, done / wall, events / wall / 1e6, wall);
    printf("modes: survive %" PRIu64 ", transient %" PRIu64 ", all-dead %" PRIu64 ", peer-death %" PRIu64
           "; %.1f GB delivered, %" PRIu64 " failovers, %.1f MB re-sent, %.1f MB duplicates, %" PRIu64
           " requests errored (expected ones only), slowest message %.3f s; trace hash %016" PRIx64 "\n",
           mode_n[0], mode_n[1], mode_n[2], mode_n[3], bytes / 1e9, failovers, resent / 1e6, dups / 1e6, errors, worst / 1e9,
           trace);
  }
  return bad == 0 ? 0 : 1;
}
