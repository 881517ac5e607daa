#include "rerail/planner.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>

namespace rerail::planner {
namespace {

void validate(const Fabric& f, int channels) {
  if (f.nodes < 1 || f.rails < 1 || channels < 1 ||
      f.bw.size() != static_cast<size_t>(f.nodes) * f.rails)
    throw std::invalid_argument("planner: bad fabric dimensions");
}

std::vector<std::vector<int>> all_maps(const Fabric& f, int channels) {
  std::vector<std::vector<int>> m(f.nodes);
  for (int n = 0; n < f.nodes; ++n) m[n] = assign_channels(f, n, channels);
  return m;
}

Plan make(const Fabric& f, int channels, std::vector<int> order, std::vector<std::vector<int>> rail) {
  Plan p;
  p.channels = channels;
  p.cost = ring_cost(f, order, rail);
  p.order = std::move(order);
  p.rail = std::move(rail);
  return p;
}

// Signature: per rail, dead / slow (below the node's best) / full. Nodes with equal signatures get
// identical channel maps, so grouping them removes spine crossings inside the group.
std::vector<int> signature(const Fabric& f, int n) {
  double best = 0;
  for (int r = 0; r < f.rails; ++r) best = std::max(best, f.bw_at(n, r));
  std::vector<int> s(f.rails);
  for (int r = 0; r < f.rails; ++r) {
    double b = f.bw_at(n, r);
    s[r] = b <= 0 ? 2 : (b < best ? 1 : 0);
  }
  return s;
}

}  // namespace

std::vector<int> assign_channels(const Fabric& f, int node, int channels) {
  // Target count per rail proportional to its bandwidth (largest remainder, ties to the lowest rail);
  // channels keep their preferred rail c % rails while it has room, the rest fill rails with room.
  std::vector<int> map(channels, -1), target(f.rails, 0);
  double total = 0;
  for (int r = 0; r < f.rails; ++r) total += std::max(0.0, f.bw_at(node, r));
  if (total <= 0) return map;
  std::vector<std::pair<double, int>> rem;
  int given = 0;
  for (int r = 0; r < f.rails; ++r) {
    double share = channels * std::max(0.0, f.bw_at(node, r)) / total;
    target[r] = static_cast<int>(share);
    given += target[r];
    if (f.bw_at(node, r) > 0) rem.push_back({-(share - target[r]), r});
  }
  std::stable_sort(rem.begin(), rem.end());
  for (size_t k = 0; given < channels; k = (k + 1) % rem.size(), ++given) target[rem[k].second] += 1;
  std::vector<int> load(f.rails, 0);
  for (int c = 0; c < channels; ++c) {
    int r = c % f.rails;
    if (load[r] < target[r]) { map[c] = r; ++load[r]; }
  }
  for (int c = 0, r = 0; c < channels; ++c) {
    if (map[c] >= 0) continue;
    while (load[r] >= target[r]) ++r;
    map[c] = r;
    ++load[r];
  }
  return map;
}

double ring_cost(const Fabric& f, const std::vector<int>& order, const std::vector<std::vector<int>>& rail) {
  const double inf = std::numeric_limits<double>::infinity();
  const int N = static_cast<int>(order.size());
  if (N < 2) return 0;
  std::vector<double> tx(static_cast<size_t>(f.nodes) * f.rails, 0), rx(tx.size(), 0);
  std::vector<double> up(f.rails, 0), down(f.rails, 0);
  for (int i = 0; i < N; ++i) {
    int a = order[i], b = order[(i + 1) % N];
    for (size_t c = 0; c < rail[a].size(); ++c) {
      int ra = rail[a][c], rb = rail[b][c];
      if (ra < 0 || rb < 0) return inf;
      tx[static_cast<size_t>(a) * f.rails + ra] += 1;
      rx[static_cast<size_t>(b) * f.rails + rb] += 1;
      if (ra != rb) { up[ra] += 1; down[rb] += 1; }
    }
  }
  double t = 0;
  for (size_t k = 0; k < tx.size(); ++k) {
    double b = f.bw[k];
    double l = std::max(tx[k], rx[k]);
    if (l > 0) t = std::max(t, b > 0 ? l / b : inf);
  }
  for (int r = 0; r < f.rails; ++r) {
    double l = std::max(up[r], down[r]);
    if (l > 0) t = std::max(t, f.uplink_gbps > 0 ? l / f.uplink_gbps : inf);
  }
  return t;
}

Plan naive_plan(const Fabric& f, int channels) {
  validate(f, channels);
  std::vector<int> order(f.nodes);
  std::iota(order.begin(), order.end(), 0);
  return make(f, channels, std::move(order), all_maps(f, channels));
}

Plan exact_plan(const Fabric& f, int channels) {
  validate(f, channels);
  if (f.nodes > 9) throw std::invalid_argument("planner: exact search limited to 9 nodes");
  auto rail = all_maps(f, channels);
  std::vector<int> order(f.nodes);
  std::iota(order.begin(), order.end(), 0);
  std::vector<int> best = order;
  double best_cost = ring_cost(f, order, rail);
  while (std::next_permutation(order.begin() + 1, order.end())) {
    double c = ring_cost(f, order, rail);
    if (c < best_cost) { best_cost = c; best = order; }
  }
  return make(f, channels, std::move(best), std::move(rail));
}

Plan heuristic_plan(const Fabric& f, int channels, int max_passes) {
  validate(f, channels);
  auto rail = all_maps(f, channels);
  // Group by signature; groups ordered so that neighbouring groups differ in as few rails as possible
  // (greedy nearest neighbour on Hamming distance), nodes keep their relative order inside a group.
  std::map<std::vector<int>, std::vector<int>> groups;
  for (int n = 0; n < f.nodes; ++n) groups[signature(f, n)].push_back(n);
  std::vector<std::pair<std::vector<int>, std::vector<int>>> g(groups.begin(), groups.end());
  auto dist = [](const std::vector<int>& x, const std::vector<int>& y) {
    int d = 0;
    for (size_t i = 0; i < x.size(); ++i) d += x[i] != y[i];
    return d;
  };
  std::vector<int> order;
  std::vector<bool> used(g.size(), false);
  size_t cur = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    used[cur] = true;
    order.insert(order.end(), g[cur].second.begin(), g[cur].second.end());
    size_t next = g.size();
    int nd = 1 << 30;
    for (size_t j = 0; j < g.size(); ++j)
      if (!used[j] && dist(g[cur].first, g[j].first) < nd) { nd = dist(g[cur].first, g[j].first); next = j; }
    if (next == g.size()) break;
    cur = next;
  }
  double cost = ring_cost(f, order, rail);
  // 2-opt: reverse order[i..j]; accept strict improvements only.
  for (int pass = 0; pass < max_passes; ++pass) {
    bool improved = false;
    for (int i = 1; i + 1 < f.nodes; ++i)
      for (int j = i + 1; j < f.nodes; ++j) {
        std::reverse(order.begin() + i, order.begin() + j + 1);
        double c = ring_cost(f, order, rail);
        if (c < cost - 1e-12) { cost = c; improved = true; }
        else std::reverse(order.begin() + i, order.begin() + j + 1);
      }
    if (!improved) break;
  }
  return make(f, channels, std::move(order), std::move(rail));
}

}  // namespace rerail::planner
