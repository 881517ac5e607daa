// Order search of the planner (header rerail/planner.h, algorithm in ../README.md).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

#include "cost_internal.h"
#include "rerail/planner.h"

namespace rerail::planner {
namespace {

using Maps = std::vector<std::vector<int>>;

void validate(const Fabric& f, int channels) {
  if (f.nodes < 1 || f.rails < 1 || channels < 1 || f.bw.size() != static_cast<size_t>(f.nodes) * f.rails)
    throw std::invalid_argument("planner: bad fabric dimensions");
}

// Per-node maps that avoid dead NICs. by_rate: channel counts proportional to each NIC's rate;
// otherwise every live NIC counts alike and rerail's striping absorbs slow links (NCCL's default map
// on nodes without a dead NIC).
Maps node_maps(const Fabric& f, int channels, bool by_rate) {
  Maps m(f.nodes);
  Fabric alive = f;
  if (!by_rate)
    for (double& b : alive.bw) b = b > 0 ? 1 : 0;
  for (int n = 0; n < f.nodes; ++n) m[n] = assign_channels(alive, n, channels);
  return m;
}

// The objective of one order: kRing / kTree the raw bottleneck time, kBoth the worse of the two
// relative to their lower bounds. count / node come from the term that sets the cost.
struct Eval {
  double cost = 0, ring = 0, tree = 0;
  int count = 0, node = -1;
};

struct Objectivizer {
  const Fabric& f;
  Objective obj;
  double rb, tb;  // lower bounds (kBoth normalisation)
  Eval operator()(const std::vector<int>& order, const Maps& rail) const {
    Eval e;
    detail::Score r, t;
    if (obj != Objective::kTree) r = detail::ring_score(f, order, rail);
    if (obj != Objective::kRing) t = detail::tree_score(f, order, rail);
    e.ring = r.time;
    e.tree = t.time;
    if (obj == Objective::kRing) { e.cost = r.time; e.count = r.count; e.node = r.node; }
    else if (obj == Objective::kTree) { e.cost = t.time; e.count = t.count; e.node = t.node; }
    else {
      double a = rb > 0 ? r.time / rb : 0, b = tb > 0 ? t.time / tb : 0;
      const detail::Score& w = a >= b ? r : t;
      e.cost = std::max(a, b);
      e.count = w.count + (a == b ? (&w == &r ? t.count : r.count) : 0);
      e.node = w.node;
    }
    return e;
  }
  bool better(const Eval& x, const Eval& y) const {
    if (x.cost < y.cost * (1 - 1e-12)) return true;
    return x.cost <= y.cost * (1 + 1e-12) && x.count < y.count;
  }
  double floor() const { return obj == Objective::kRing ? rb : obj == Objective::kTree ? tb : 1.0; }
};

Plan finish(const Fabric& f, int channels, std::vector<int> order, Maps rail, double cost) {
  Plan p;
  p.channels = channels;
  p.ring = ring_cost(f, order, rail);
  p.tree = tree_cost(f, order, rail);
  p.cost = cost;
  p.order = std::move(order);
  p.rail = std::move(rail);
  return p;
}

// Per rail: 0 at the nominal rate, 1 slower, 2 dead. Equal signatures get equal maps.
std::vector<int> signature(const Fabric& f, int n, double nom) {
  std::vector<int> s(f.rails);
  for (int r = 0; r < f.rails; ++r) {
    double b = f.bw_at(n, r);
    s[r] = b <= 0 ? 2 : (b < nom ? 1 : 0);
  }
  return s;
}

// Positions linked to each position by the collectives of the objective, with the link's weight
// (units per channel each way: ring edge 1, tree edge 1/2).
std::vector<std::vector<std::pair<int, double>>> neighbours(int n, Objective obj) {
  std::vector<std::vector<std::pair<int, double>>> nb(n);
  if (n < 2) return nb;
  for (int p = 0; p < n; ++p) {
    if (obj != Objective::kTree) {
      nb[p].push_back({(p + 1) % n, 1.0});
      nb[p].push_back({(p - 1 + n) % n, 1.0});
    }
    if (obj != Objective::kRing) {
      DtreeLinks d = dtree(n, p);
      for (int t = 0; t < 2; ++t)
        for (int k = 0; k < 3; ++k)
          if (d.t[t][k] >= 0) nb[p].push_back({d.t[t][k], 0.5});
    }
  }
  return nb;
}

// Constructive placement: the most degraded node first, each on the free position with the least
// link weight to already placed nodes of another signature, then the lightest tree position; healthy
// nodes fill the remaining positions in rank order.
std::vector<int> place(const Fabric& f, Objective obj) {
  const int N = f.nodes;
  const double nom = f.nominal();
  std::vector<std::vector<int>> sig(N);
  std::vector<double> cap(N, 0);
  std::vector<int> degraded;
  for (int n = 0; n < N; ++n) {
    sig[n] = signature(f, n, nom);
    for (int r = 0; r < f.rails; ++r) cap[n] += std::max(0.0, f.bw_at(n, r));
    if (std::any_of(sig[n].begin(), sig[n].end(), [](int v) { return v != 0; })) degraded.push_back(n);
  }
  std::stable_sort(degraded.begin(), degraded.end(), [&](int a, int b) { return cap[a] < cap[b]; });
  auto nb = neighbours(N, obj);
  std::vector<int> load = obj == Objective::kRing ? std::vector<int>(N, 0) : detail::position_degree(N);
  std::vector<int> at(N, -1);
  for (int d : degraded) {
    int best = -1;
    double best_c = 0;
    for (int p = 0; p < N; ++p) {
      if (at[p] >= 0) continue;
      double c = 0;
      for (auto [q, w] : nb[p])
        if (at[q] >= 0 && sig[at[q]] != sig[d]) c += w;
      if (best < 0 || c < best_c || (c == best_c && load[p] < load[best])) { best = p; best_c = c; }
    }
    at[best] = d;
  }
  std::vector<bool> placed(N, false);
  for (int p = 0; p < N; ++p)
    if (at[p] >= 0) placed[at[p]] = true;
  for (int p = 0, n = 0; p < N; ++p) {
    if (at[p] >= 0) continue;
    while (placed[n]) ++n;
    at[p] = n;
    placed[n] = true;
  }
  return at;
}

}  // namespace

Plan naive_plan(const Fabric& f, int channels, Objective obj) {
  validate(f, channels);
  std::vector<int> order(f.nodes);
  std::iota(order.begin(), order.end(), 0);
  Maps rail = default_maps(f, channels);
  Objectivizer J{f, obj, ring_bound(f, channels), tree_bound(f, channels)};
  double c = J(order, rail).cost;
  return finish(f, channels, std::move(order), std::move(rail), c);
}

Plan exact_plan(const Fabric& f, int channels, Objective obj, MapKind maps) {
  validate(f, channels);
  const bool ring_only = obj == Objective::kRing;
  if (f.nodes > (ring_only ? 9 : 8)) throw std::invalid_argument("planner: exact search limited to 9 (ring) / 8 nodes");
  Objectivizer J{f, obj, ring_bound(f, channels), tree_bound(f, channels)};
  std::vector<int> best;
  Maps best_rail;
  Eval be;
  for (int kind = 0; kind < (maps == MapKind::kDefault ? 1 : 2); ++kind) {
    Maps rail = maps == MapKind::kDefault ? default_maps(f, channels) : node_maps(f, channels, kind == 1);
    std::vector<int> order(f.nodes);
    std::iota(order.begin(), order.end(), 0);
    do {
      Eval e = J(order, rail);
      if (best.empty() || e.cost < be.cost * (1 - 1e-12)) { be = e; best = order; best_rail = rail; }
    } while (std::next_permutation(order.begin() + (ring_only ? 1 : 0), order.end()));
  }
  return finish(f, channels, std::move(best), std::move(best_rail), be.cost);
}

Plan heuristic_plan(const Fabric& f, int channels, Objective obj, MapKind maps, int max_moves) {
  validate(f, channels);
  const int N = f.nodes;
  Maps rail = maps == MapKind::kDefault ? default_maps(f, channels) : node_maps(f, channels, false);
  Objectivizer J{f, obj, ring_bound(f, channels), tree_bound(f, channels)};
  std::vector<int> order(N);
  std::iota(order.begin(), order.end(), 0);
  Eval cur = J(order, rail);
  std::vector<int> placed = place(f, obj);
  Eval pe = J(placed, rail);
  if (J.better(pe, cur)) { order = placed; cur = pe; }
  // Swap local search around the bottleneck node: swap it or one of its linked positions with a
  // random position; keep strict improvements of (time, resources at that time).
  const double nom = f.nominal();
  std::vector<bool> degraded(N, false);
  for (int n = 0; n < N; ++n)
    for (int r = 0; r < f.rails; ++r) degraded[n] = degraded[n] || f.bw_at(n, r) < nom;
  int ndeg = static_cast<int>(std::count(degraded.begin(), degraded.end(), true));
  if (max_moves < 0) max_moves = std::min(600, 40 + 4 * ndeg);
  auto nb = neighbours(N, obj);
  std::vector<int> pos(N);
  for (int p = 0; p < N; ++p) pos[order[p]] = p;
  std::mt19937 rng(14);
  std::uniform_int_distribution<int> any(0, N - 1);
  const double floor = J.floor();
  int moves = 0;
  while (moves < max_moves && N > 2 && cur.cost > floor * (1 + 1e-9) && !std::isinf(cur.cost)) {
    int x = cur.node >= 0 ? cur.node : order[any(rng)];
    std::vector<int> cand = {pos[x]};
    for (auto [q, w] : nb[pos[x]]) cand.push_back(q);
    bool improved = false;
    for (int q : cand) {
      for (int k = 0; k < 4 && !improved && moves < max_moves; ++k) {
        int t = any(rng);
        if (t == q) continue;
        std::swap(order[q], order[t]);
        ++moves;
        Eval e = J(order, rail);
        if (J.better(e, cur)) {
          cur = e;
          pos[order[q]] = q;
          pos[order[t]] = t;
          improved = true;
        } else {
          std::swap(order[q], order[t]);
        }
      }
      if (improved) break;
    }
  }
  if (maps == MapKind::kDefault) return finish(f, channels, std::move(order), std::move(rail), cur.cost);
  Maps by_rate = node_maps(f, channels, true);
  Eval r = J(order, by_rate);
  if (J.better(r, cur)) return finish(f, channels, std::move(order), std::move(by_rate), r.cost);
  return finish(f, channels, std::move(order), std::move(rail), cur.cost);
}

}  // namespace rerail::planner
