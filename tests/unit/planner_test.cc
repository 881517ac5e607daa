// rerail_planner: exact vs heuristic, plan invariants, cases where the naive order is clearly worse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "rerail/planner.h"

using namespace rerail::planner;

namespace {

Fabric healthy(int nodes, int rails, double bw = 100, double uplink = 100) {
  Fabric f;
  f.nodes = nodes;
  f.rails = rails;
  f.bw.assign(static_cast<size_t>(nodes) * rails, bw);
  f.uplink_gbps = uplink;
  return f;
}
void kill(Fabric& f, int n, int r) { f.bw[static_cast<size_t>(n) * f.rails + r] = 0; }

void check_invariants(const Fabric& f, const Plan& p) {
  std::vector<int> s = p.order;
  std::sort(s.begin(), s.end());
  for (int i = 0; i < f.nodes; ++i) ASSERT_EQ(s[i], i) << "order is not a permutation";
  ASSERT_EQ(static_cast<int>(p.rail.size()), f.nodes);
  for (int n = 0; n < f.nodes; ++n) {
    ASSERT_EQ(static_cast<int>(p.rail[n].size()), p.channels);
    for (int r : p.rail[n]) {
      ASSERT_GE(r, 0);
      ASSERT_LT(r, f.rails);
      EXPECT_GT(f.bw_at(n, r), 0) << "channel on dead rail, node " << n;
    }
  }
  EXPECT_DOUBLE_EQ(p.cost, ring_cost(f, p.order, p.rail));
}

}  // namespace

TEST(Planner, HealthyFabricNeedsNoSpine) {
  Fabric f = healthy(8, 8, 100, 1);  // tiny uplink: any spine crossing would dominate
  Plan p = naive_plan(f, 8);
  check_invariants(f, p);
  EXPECT_DOUBLE_EQ(p.cost, 1.0 / 100);  // one unit per channel, one channel per NIC
}

TEST(Planner, DeadRailChannelsMoveToLiveRails) {
  Fabric f = healthy(4, 8);
  kill(f, 2, 3);
  Plan p = heuristic_plan(f, 16);
  check_invariants(f, p);
  for (int c = 0; c < 16; ++c) EXPECT_NE(p.rail[2][c], 3);
}

TEST(Planner, NaiveAlternatingFailuresAreClearlyWorse) {
  // Nodes 0,2,4,6 lost rail 0. In rank order every ring edge joins unlike nodes, so channels of
  // rail 0 cross the spine on every edge; grouping needs two crossings.
  Fabric f = healthy(8, 8, 100, 50);
  for (int n = 0; n < 8; n += 2) kill(f, n, 0);
  Plan naive = naive_plan(f, 8), heur = heuristic_plan(f, 8), exact = exact_plan(f, 8);
  check_invariants(f, heur);
  check_invariants(f, exact);
  EXPECT_LT(heur.cost, naive.cost * 0.8) << naive.cost << " vs " << heur.cost;
  EXPECT_NEAR(heur.cost, exact.cost, 1e-12);
}

TEST(Planner, HeuristicMatchesExactOnRandomSmallFabrics) {
  std::mt19937 rng(14);
  int matched = 0, total = 0;
  for (int trial = 0; trial < 40; ++trial) {
    int nodes = 4 + trial % 5, rails = 4;
    Fabric f = healthy(nodes, rails, 100, 25 + 25 * (trial % 3));
    std::uniform_int_distribution<int> pickn(0, nodes - 1), pickr(0, rails - 1), k(1, 4);
    for (int i = k(rng); i > 0; --i) kill(f, pickn(rng), pickr(rng));
    Plan e = exact_plan(f, 2 * rails), h = heuristic_plan(f, 2 * rails), nv = naive_plan(f, 2 * rails);
    check_invariants(f, e);
    check_invariants(f, h);
    EXPECT_LE(e.cost, h.cost + 1e-12);   // exact is optimal
    EXPECT_LE(h.cost, nv.cost + 1e-12);  // heuristic never worse than rank order
    ++total;
    if (h.cost <= e.cost * (1 + 1e-9)) ++matched;
  }
  // 2-opt from the grouped order reaches the optimum on nearly all small cases.
  EXPECT_GE(matched, total * 9 / 10) << matched << "/" << total;
}

TEST(Planner, NodeWithoutLiveRailIsInfeasible) {
  Fabric f = healthy(3, 2);
  kill(f, 1, 0);
  kill(f, 1, 1);
  Plan p = naive_plan(f, 2);
  EXPECT_TRUE(std::isinf(p.cost));
}

TEST(Planner, RejectsBadInput) {
  Fabric f = healthy(2, 2);
  f.bw.pop_back();
  EXPECT_THROW(naive_plan(f, 2), std::invalid_argument);
  EXPECT_THROW(exact_plan(healthy(10, 2), 2), std::invalid_argument);
}
