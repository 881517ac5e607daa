// `rerail-bootstrap bench`: exchange time for 8..256 ranks as threads on simulated hosts (loopback
// addresses 127.78.0.x), and the connections each host carries compared with a star through a root.
#include <algorithm>
#include <cstdio>
#include <set>
#include <thread>

#include "commands.h"
#include "rerail/boot/exchange.h"
#include "rerail/clock.h"
#include "rerail/log.h"

namespace rr::boot::cli {
namespace {

struct RunResult {
  bool ok = true;
  double wall_ms = 0;
  int max_host_conns = 0, max_host_cross = 0, max_rank_conns = 0, retries = 0;
  double wait_max_ms = 0;  // slowest rank's Start -> all blobs (without the bye/close tail)
};

RunResult RunOnce(const Job& job, uint64_t group, ExchangeAlgorithm algo) {
  int n = job.nranks();
  std::vector<ExchangeStats> stats(n);
  std::vector<Status> res(n);
  std::vector<std::thread> threads;
  uint64_t t0 = NowNs();
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ExchangeOptions o;
      o.group = group;
      o.algorithm = algo;
      o.rank = r;
      o.blob = DefaultBlob(job, r);
      o.timeout_ms = 60000;
      std::vector<std::string> blobs;
      res[r] = AllGather(job, o, &blobs, &stats[r]);
    });
  for (auto& t : threads) t.join();
  RunResult out;
  out.wall_ms = static_cast<double>(NowNs() - t0) / 1e6;
  // Each pull connection a->b touches host(a) and host(b) (once when they are the same host).
  std::vector<int> per_host(job.nhosts(), 0), cross(job.nhosts(), 0), per_rank(n, 0);
  for (int a = 0; a < n; ++a) {
    if (!res[a].ok()) {
      out.ok = false;
      RR_WARN("bench rank %d: %s", a, res[a].message().c_str());
    }
    out.retries += stats[a].retries;
    for (int b : stats[a].peers_out) {
      int ha = job.HostOf(a), hb = job.HostOf(b);
      ++per_rank[a], ++per_rank[b], ++per_host[ha];
      if (hb != ha) ++per_host[hb], ++cross[ha], ++cross[hb];
    }
  }
  out.max_host_conns = *std::max_element(per_host.begin(), per_host.end());
  out.max_host_cross = *std::max_element(cross.begin(), cross.end());
  out.max_rank_conns = *std::max_element(per_rank.begin(), per_rank.end());
  for (const auto& st : stats) out.wait_max_ms = std::max(out.wait_max_ms, st.wait_ms);
  return out;
}

}  // namespace

bool ParseAlgorithm(const std::string& name, ExchangeAlgorithm* out) {
  if (name == "bruck") return *out = ExchangeAlgorithm::kBruck, true;
  if (name == "ring") return *out = ExchangeAlgorithm::kRing, true;
  return false;
}

int RunBench(const BenchOptions& o) {
  std::vector<std::pair<std::string, ExchangeAlgorithm>> algos;
  for (const char* a : {"bruck", "ring"}) {
    ExchangeAlgorithm x;
    if ((o.algorithm == "both" || o.algorithm == a) && ParseAlgorithm(a, &x)) algos.emplace_back(a, x);
  }
  if (algos.empty()) {
    RR_WARN("bench: unknown --algorithm '%s' (bruck, ring or both)", o.algorithm.c_str());
    return 1;
  }
  std::printf("# rootless all-gather of 64-byte blobs, ranks as threads on %d simulated hosts (127.78.0.x), %d runs each\n",
              o.hosts, o.repeats);
  std::printf("# median/max_ms: wall time of a whole run (threads start .. all closed); wait_ms: slowest rank's\n"
              "#   Start -> all blobs in the last run; host_max/cross_max: TCP connections with an end on a host\n"
              "#   (cross-host only); rank_max: per rank; star_*: the same counts for a star through rank 0\n");
  std::printf("%6s %6s %5s %10s %10s | %9s %9s %9s %9s | %9s %9s %9s | %7s\n", "algo", "ranks", "hosts", "median_ms", "max_ms",
              "wait_ms", "host_max", "cross_max", "rank_max", "star_root", "star_x", "star_rank", "retries");
  uint64_t group = 0;
  int failures = 0;
  for (const auto& algo : algos)
  for (int n : o.ranks) {
    int hosts = std::min(o.hosts, n);
    JobSpec spec;
    for (int h = 0; h < hosts; ++h) spec.hosts.push_back("127.78.0." + std::to_string(h + 1));
    spec.ranks_per_host = (n + hosts - 1) / hosts;
    spec.nranks = n;
    spec.port_base = o.port_base;
    spec.port_span = 4096;
    spec.job_id = "bench";
    std::unique_ptr<Job> job;
    Status s = Job::Create(spec, &job);
    if (!s.ok()) {
      RR_WARN("bench: %s", s.message().c_str());
      return 1;
    }
    std::vector<double> times;
    RunResult last;
    for (int k = 0; k < o.repeats; ++k) {
      last = RunOnce(*job, group++, algo.second);
      if (!last.ok) ++failures;
      times.push_back(last.wall_ms);
    }
    std::sort(times.begin(), times.end());
    // Star through one root: rank 0's host carries all n-1 connections, n-rph of them cross-host.
    int rph = spec.ranks_per_host;
    std::printf("%6s %6d %5d %10.2f %10.2f | %9.2f %9d %9d %9d | %9d %9d %9d | %7d\n", algo.first.c_str(), n, hosts,
                times[times.size() / 2],
                times.back(), last.wait_max_ms, last.max_host_conns, last.max_host_cross, last.max_rank_conns, n - 1,
                n - rph, n - 1, last.retries);
    std::fflush(stdout);
  }
  return failures ? 1 : 0;
}

}  // namespace rr::boot::cli
