// rerail-sim: flow-level model of ring and tree collectives on rail-optimised fabrics under NIC
// failures (model: tuner_plugin/planner/README.md and rerail/planner.h).
//
// N nodes x R rails of NIC bandwidth B. Fabrics: full (spine uplink per rail switch = N*B, full
// bisection), 1:k (N*B/k), rail-only (no spine, cross-rail through the intra-node hop). A collective
// takes as long as its most loaded resource; ring all-reduce, all-gather and reduce-scatter move the
// same edges (2(N-1)/N or (N-1)/N units), so their ratios to fault-free are equal and reported once
// as "ring"; "tree" is NCCL's double binary tree all-reduce (NCCL has no tree all-gather /
// reduce-scatter; PAT serves only one GPU per node). Strategies, each relative to fault-free:
//   none    NCCL alone: channel c on NIC c % R, no failover (a dead NIC kills the job)
//   pair    R2CCL: a dead NIC's channels on its pair NIC r^1, rank order
//   redist  rerail: NCCL's default maps, rerail stripes a dead/slow link 0 over its standby links
//   rerank  rerail + the planner's order applied as a rank permutation (NCCL's default maps; rerail
//           stripes dead NICs' channels); objective --objective (default: the worse of ring and
//           tree relative to their bounds: NCCL builds both from one order)
//   graph   rerail + planned order + per-node maps with no channel on a dead NIC (the
//           NCCL_GRAPH_FILE rerail-plan writes; integer channel counts per NIC)
//   xrail   what-if, spine fabrics only: rank order, rerail's striped connections allowed onto every
//           live NIC pair (cross-rail standby links through the spine); rerail today opens standby
//           links on their own rail only (net_plugin PlanLinks). Equals redist on rail-only.
//   bound   lower bound over every order and map (planner::ring_bound / tree_bound)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "rerail/planner.h"

using namespace rerail::planner;

namespace {

struct Ratios { double none = 0, pair = 0, redist = 0, rerank = 0, graph = 0, xrail = 0, bound = 0; };

Fabric make_fabric(const std::string& kind, int nodes, int rails, double bw) {
  Fabric f;
  f.nodes = nodes;
  f.rails = rails;
  f.bw.assign(static_cast<size_t>(nodes) * rails, bw);
  if (kind == "rail-only") {
    f.kind = FabricKind::kRailOnly;
  } else if (kind == "full") {
    f.uplink_gbps = nodes * bw;
  } else if (kind.rfind("1:", 0) == 0) {
    f.uplink_gbps = nodes * bw / std::stod(kind.substr(2));
  } else if (kind.rfind("frac", 0) == 0) {  // frac0.02: the thin spine of the first figures
    f.uplink_gbps = nodes * bw * std::stod(kind.substr(4));
  } else {
    throw CLI::ValidationError("--fabrics", "unknown fabric " + kind);
  }
  return f;
}

std::vector<std::vector<int>> pair_maps(const Fabric& f, int channels) {
  auto m = default_maps(f, channels);
  for (int n = 0; n < f.nodes; ++n)
    for (int& r : m[n])
      if (f.bw_at(n, r) <= 0 && (r ^ 1) < f.rails) r ^= 1;
  return m;
}

// spread: nodes hit by the spread-* patterns (0: N/16).
void inject(Fabric& f, const std::string& p, std::mt19937& rng, double bw, int spread) {
  const int N = f.nodes, R = f.rails;
  std::uniform_int_distribution<int> pn(0, N - 1), pr(0, R - 1);
  auto set = [&](int n, int r, double v) { f.bw[static_cast<size_t>(n) * R + r] = v; };
  if (p == "one-nic") set(pn(rng), pr(rng), 0);
  if (p == "random-1pct" || p == "random-3pct") {
    int k = std::max(2, N * R * (p == "random-1pct" ? 1 : 3) / 100);
    for (int i = 0; i < k; ++i) set(pn(rng), pr(rng), 0);
  }
  if (p == "rail-switch") {  // a whole rail switch: rail r on every node
    int r = pr(rng);
    for (int n = 0; n < N; ++n) set(n, r, 0);
  }
  if (p == "switch-partial") {  // a line card: every other node of a block loses the same rail
    int r = pr(rng), start = pn(rng);
    for (int i = 0; i < std::max(2, N / 8); i += 2) set((start + i) % N, r, 0);
  }
  // Multi-failure after R2CCL's re-ranking case: several servers each lose NICs on different rails.
  // spread-*: N/16 (--spread-nodes) distinct nodes at random ranks; block-*: N/128 disjoint runs of 8 rank-consecutive
  // nodes (a rack or chassis row; ranks follow placement), node i of a run losing rail (r0 + i) % R,
  // so neighbours differ. *-1nic: one NIC per node; *-mixed: a second random rail on half of them.
  if (p.rfind("spread-", 0) == 0 || p.rfind("block-", 0) == 0) {
    const bool mixed = p.size() > 6 && p.compare(p.size() - 6, 6, "-mixed") == 0;
    std::bernoulli_distribution second(0.5);
    auto lose = [&](int n, int r) {
      set(n, r, 0);
      if (!mixed || R < 3 || !second(rng)) return;
      int r2 = pr(rng);
      while (r2 == r) r2 = pr(rng);
      set(n, r2, 0);
    };
    if (p[0] == 's') {
      std::vector<int> nodes(N);
      for (int n = 0; n < N; ++n) nodes[n] = n;
      std::shuffle(nodes.begin(), nodes.end(), rng);
      for (int i = 0; i < (spread > 0 ? spread : std::max(2, N / 16)) && i < N; ++i) lose(nodes[i], pr(rng));
    } else {
      std::vector<int> slots(std::max(1, N / 8));  // disjoint runs: ranks 8s .. 8s+7
      for (size_t s = 0; s < slots.size(); ++s) slots[s] = static_cast<int>(s);
      std::shuffle(slots.begin(), slots.end(), rng);
      for (int b = 0; b < std::max(1, N / 128); ++b) {
        int r0 = pr(rng);
        for (int i = 0; i < std::min(8, N); ++i) lose(8 * slots[b] + i, (r0 + i) % R);
      }
    }
  }
  if (p == "slow-2pct") {
    int k = std::max(2, N * R * 2 / 100);
    for (int i = 0; i < k; ++i) set(pn(rng), pr(rng), bw / 2);
  }
}

// Ring [0] and tree [1] ratios of every strategy on one failed fabric.
void evaluate(const Fabric& f, const Fabric& healthy, int channels, Objective obj, Ratios out[2]) {
  std::vector<int> id(f.nodes);
  for (int i = 0; i < f.nodes; ++i) id[i] = i;
  auto dm = default_maps(f, channels), pm = pair_maps(f, channels);
  Fabric prim = f;
  prim.policy = Policy::kPrimary;
  double t0[2] = {ring_cost(healthy, id, dm), tree_cost(healthy, id, dm)};
  auto ratio = [](double t, double t_ok) { return std::isinf(t) || t <= 0 ? 0.0 : t_ok / t; };
  Plan naive = naive_plan(f, channels), plan = heuristic_plan(f, channels, obj, MapKind::kDefault);
  Plan graph = heuristic_plan(f, channels, obj, MapKind::kAvoidDead);
  double none[2] = {ring_cost(prim, id, dm), tree_cost(prim, id, dm)};
  double pair[2] = {ring_cost(prim, id, pm), tree_cost(prim, id, pm)};
  Fabric xf = f;
  xf.cross_rail_standby = true;
  double xrail[2] = {ring_cost(xf, id, dm), tree_cost(xf, id, dm)};
  double redist[2] = {naive.ring, naive.tree}, rerank[2] = {plan.ring, plan.tree}, gr[2] = {graph.ring, graph.tree};
  double bound[2] = {ring_bound(f, channels), tree_bound(f, channels)};
  for (int a = 0; a < 2; ++a)
    out[a] = Ratios{ratio(none[a], t0[a]), ratio(pair[a], t0[a]), ratio(redist[a], t0[a]), ratio(rerank[a], t0[a]),
                    ratio(gr[a], t0[a]), ratio(xrail[a], t0[a]),
                    ratio(bound[a], t0[a])};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rerail-sim: ring and tree collectives on rail-optimised fabrics under NIC failures"};
  std::vector<int> node_counts = {128, 256, 1024};
  std::vector<std::string> fabrics = {"rail-only", "1:8", "1:4", "1:2", "full"};
  std::vector<std::string> patterns = {"one-nic",     "random-1pct", "random-3pct", "spread-1nic", "spread-mixed",
                                       "block-1nic",  "block-mixed", "rail-switch", "switch-partial", "slow-2pct"};
  int rails = 8, channels = 56, seeds = 3, spread = 0;
  double bw = 400;
  unsigned seed = 14;
  std::string csv, objective = "both", policy = "failover";
  app.add_option("--policy", policy, "rerail's link policy: failover (IB default) or stripe (TCP default)")
      ->check(CLI::IsMember({"failover", "stripe"}));
  app.add_option("--objective", objective, "planner objective: ring, tree, both (one order serves both)")
      ->check(CLI::IsMember({"ring", "tree", "both"}));
  app.add_option("--nodes", node_counts, "node counts");
  app.add_option("--fabrics", fabrics, "rail-only, full, 1:k (spine 1/k of rail-switch downlink), fracX");
  app.add_option("--patterns", patterns, "failure patterns (README: Simulator figures)")->check(CLI::IsMember(patterns));
  app.add_option("--spread-nodes", spread, "nodes losing NICs in the spread-* patterns (0: nodes / 16)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rails", rails, "rails per node");
  app.add_option("--channels", channels, "graph channels (56 = 7 x 8: even split over 7 or 8 rails)");
  app.add_option("--bw", bw, "NIC bandwidth, Gbps");
  app.add_option("--seeds", seeds, "draws per point, seeds seed, seed+1, ...");
  app.add_option("--seed", seed, "first seed");
  app.add_option("--csv", csv, "write results here");
  CLI11_PARSE(app, argc, argv);

  Objective obj = objective == "ring" ? Objective::kRing : objective == "tree" ? Objective::kTree : Objective::kBoth;
  std::ofstream out;
  if (!csv.empty())
    out.open(csv), out << "fabric,pattern,nodes,algo,seeds,none,pair,redist,rerank,graph,xrail,bound,gain,gain_min,gain_max\n";
  std::printf("%-9s %-14s %5s %-4s %6s %6s %6s %6s %6s %6s %6s %7s %7s %7s\n", "fabric", "pattern", "nodes", "algo",
              "none", "pair", "redist", "rerank", "graph", "xrail", "bound", "gain", "min", "max");
  for (const auto& fab : fabrics)
    for (const auto& pat : patterns)
      for (int nodes : node_counts) {
        Ratios sum[2];
        double gmin[2] = {1e9, 1e9}, gmax[2] = {0, 0}, gsum[2] = {0, 0};
        for (int s = 0; s < seeds; ++s) {
          // The same failures on every fabric: the seed depends on pattern, size and draw only.
          std::mt19937 rng(seed + 7919u * s + 104729u * nodes + static_cast<unsigned>(std::hash<std::string>{}(pat)));
          Fabric healthy = make_fabric(fab, nodes, rails, bw);
          healthy.policy = policy == "stripe" ? Policy::kStripe : Policy::kFailover;
          Fabric f = healthy;
          inject(f, pat, rng, bw, spread);
          Ratios r[2];
          evaluate(f, healthy, channels, obj, r);
          for (int a = 0; a < 2; ++a) {  // sums, divided once below (ten gains of 1 average to 1 exactly)
            sum[a].none += r[a].none; sum[a].pair += r[a].pair;
            sum[a].redist += r[a].redist; sum[a].rerank += r[a].rerank; sum[a].graph += r[a].graph;
            sum[a].xrail += r[a].xrail;
            sum[a].bound += r[a].bound;
            double g = r[a].redist > 0 ? r[a].rerank / r[a].redist : 0;
            gmin[a] = std::min(gmin[a], g); gmax[a] = std::max(gmax[a], g); gsum[a] += g;
          }
        }
        for (int a = 0; a < 2; ++a) {
          const char* algo = a == 0 ? "ring" : "tree";
          Ratios m = sum[a];
          for (double* v : {&m.none, &m.pair, &m.redist, &m.rerank, &m.graph, &m.xrail, &m.bound}) *v /= seeds;
          gsum[a] /= seeds;
          std::printf("%-9s %-14s %5d %-4s %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f %+6.1f%% %+6.1f%% %+6.1f%%\n",
                      fab.c_str(), pat.c_str(), nodes, algo, m.none, m.pair, m.redist, m.rerank, m.graph, m.xrail, m.bound, 100 * (gsum[a] - 1),
                      100 * (gmin[a] - 1), 100 * (gmax[a] - 1));
          if (out)
            out << fab << "," << pat << "," << nodes << "," << algo << "," << seeds << "," << m.none << "," << m.pair
                << "," << m.redist << "," << m.rerank << "," << m.graph << "," << m.xrail << "," << m.bound << "," << gsum[a] << "," << gmin[a] << ","
                << gmax[a] << "\n";
        }
        std::fflush(stdout);
      }
  return 0;
}
