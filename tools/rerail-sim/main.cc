// rerail-sim: flow-level model of ring collectives on a rail-optimised fabric under NIC failures.
//
// Model (see tuner_plugin/planner/README.md): N nodes x R rails of NIC bandwidth B; rail r of every node
// on rail switch r; cross-rail traffic through the spine, each rail switch having N*B*spine_frac of uplink.
// A ring collective of S bytes runs C channels; every ring edge carries S/C * steps per channel, and the
// collective takes as long as its most loaded resource (NIC or switch uplink), planner::ring_cost. Steps:
// all-reduce 2(N-1)/N, all-gather and reduce-scatter (N-1)/N. Trees are not modelled.
// Strategies: none (any dead NIC kills the job), pair (R2CCL: a dead NIC's channels go to its pair
// NIC r^1, rank order kept), redist (rerail: channels spread over the node's live rails by bandwidth,
// rank order kept), rerank (redist + planner heuristic order), bound (max over nodes of R*B / live bw).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "rerail/planner.h"

using namespace rerail::planner;

namespace {

struct Result { double none, pair, redist, rerank, bound; };  // throughput relative to fault-free

Fabric make_fabric(int nodes, int rails, double bw, double spine_frac) {
  Fabric f;
  f.nodes = nodes;
  f.rails = rails;
  f.bw.assign(static_cast<size_t>(nodes) * rails, bw);
  f.uplink_gbps = nodes * bw * spine_frac;
  return f;
}

std::vector<std::vector<int>> pair_maps(const Fabric& f, int channels, bool& dead) {
  std::vector<std::vector<int>> m(f.nodes, std::vector<int>(channels));
  for (int n = 0; n < f.nodes; ++n)
    for (int c = 0; c < channels; ++c) {
      int r = c % f.rails;
      if (f.bw_at(n, r) <= 0) r ^= 1;
      if (r >= f.rails || f.bw_at(n, r) <= 0) dead = true;
      m[n][c] = r;
    }
  return m;
}

Result evaluate(const Fabric& f, const Fabric& healthy, int channels) {
  Result res{};
  double t0 = naive_plan(healthy, channels).cost;
  bool any_dead = false, any_slow = false;
  for (double b : f.bw) { any_dead |= b <= 0; any_slow |= b < healthy.bw[0]; }
  std::vector<int> id(f.nodes);
  for (int i = 0; i < f.nodes; ++i) id[i] = i;
  res.none = any_dead ? 0 : t0 / ring_cost(f, id, pair_maps(f, channels, any_dead));
  bool pair_dead = false;
  auto pm = pair_maps(f, channels, pair_dead);
  res.pair = pair_dead ? 0 : t0 / ring_cost(f, id, pm);
  Plan naive = naive_plan(f, channels);
  res.redist = std::isinf(naive.cost) ? 0 : t0 / naive.cost;
  Plan h = heuristic_plan(f, channels, f.nodes <= 128 ? 4 : 0);  // 2-opt is O(N^3 C) per pass
  res.rerank = std::isinf(h.cost) ? 0 : t0 / h.cost;
  double worst = 1;
  for (int n = 0; n < f.nodes; ++n) {
    double live = 0, full = 0;
    for (int r = 0; r < f.rails; ++r) { live += std::max(0.0, f.bw_at(n, r)); full += healthy.bw_at(n, r); }
    worst = std::min(worst, live / full);
  }
  res.bound = worst;
  (void)any_slow;
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rerail-sim: ring collectives on a rail-optimised fabric under NIC failures"};
  std::vector<int> node_counts = {8, 32, 128, 512, 1024};
  int rails = 8, channels = 56, trials = 5;
  double bw = 400, spine_frac = 0.125;
  unsigned seed = 14;
  std::string csv;
  app.add_option("--nodes", node_counts, "node counts");
  app.add_option("--rails", rails, "rails per node");
  app.add_option("--channels", channels, "ring channels (56 = 7 x 8: even split over 7 or 8 rails)");
  app.add_option("--bw", bw, "NIC bandwidth, Gbps");
  app.add_option("--spine-frac", spine_frac, "rail-switch uplink / (nodes x NIC bw)");
  app.add_option("--trials", trials, "random draws per point");
  app.add_option("--seed", seed, "random seed");
  app.add_option("--csv", csv, "write results here");
  CLI11_PARSE(app, argc, argv);

  std::ofstream out;
  if (!csv.empty()) { out.open(csv); out << "nodes,pattern,none,pair,redist,rerank,bound\n"; }
  std::mt19937 rng(seed);
  const char* patterns[] = {"one-nic", "random-1pct", "random-3pct", "rail-switch", "switch-partial", "slow-2pct"};
  std::printf("%-6s %-15s %7s %7s %7s %7s %7s %9s\n", "nodes", "pattern", "none", "pair", "redist", "rerank",
              "bound", "rerank/redist");
  for (int nodes : node_counts)
    for (const char* pat : patterns) {
      Result sum{};
      for (int t = 0; t < trials; ++t) {
        Fabric healthy = make_fabric(nodes, rails, bw, spine_frac), f = healthy;
        std::uniform_int_distribution<int> pn(0, nodes - 1), pr(0, rails - 1);
        std::string p = pat;
        auto set = [&](int n, int r, double v) { f.bw[static_cast<size_t>(n) * rails + r] = v; };
        if (p == "one-nic") set(pn(rng), pr(rng), 0);
        if (p.rfind("random", 0) == 0) {
          int k = std::max(2, nodes * rails * (p == "random-1pct" ? 1 : 3) / 100);
          for (int i = 0; i < k; ++i) set(pn(rng), pr(rng), 0);
        }
        if (p == "rail-switch") { int r = pr(rng); for (int n = 0; n < nodes; ++n) set(n, r, 0); }
        if (p == "switch-partial") {  // a line card: every other node of a block loses the same rail
          int r = pr(rng), start = pn(rng);
          for (int i = 0; i < std::max(2, nodes / 8); i += 2) set((start + i) % nodes, r, 0);
        }
        if (p == "slow-2pct") {
          int k = std::max(2, nodes * rails * 2 / 100);
          for (int i = 0; i < k; ++i) set(pn(rng), pr(rng), bw / 2);
        }
        Result r = evaluate(f, healthy, channels);
        sum.none += r.none / trials; sum.pair += r.pair / trials; sum.redist += r.redist / trials;
        sum.rerank += r.rerank / trials; sum.bound += r.bound / trials;
      }
      double gain = sum.redist > 0 ? sum.rerank / sum.redist : 0;
      std::printf("%-6d %-15s %7.3f %7.3f %7.3f %7.3f %7.3f %9.3f\n", nodes, pat, sum.none, sum.pair, sum.redist,
                  sum.rerank, sum.bound, gain);
      std::fflush(stdout);
      if (out) out << nodes << "," << pat << "," << sum.none << "," << sum.pair << "," << sum.redist << ","
                   << sum.rerank << "," << sum.bound << "\n";
    }
  return 0;
}
