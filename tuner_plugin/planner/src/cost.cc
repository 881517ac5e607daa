// Cost model of the planner (header rerail/planner.h): NCCL's tree shape, channel maps, routing of
// one channel edge over rerail's links, ring / tree bottleneck times and their lower bounds.
#include <algorithm>
#include <limits>
#include <numeric>

#include "cost_internal.h"
#include "rerail/planner.h"

namespace rerail::planner {
namespace {

// ncclGetBtree (NCCL src/graph/trees.cc), reproduced from its documented bit rules: the parent of
// xx01[0] is xx10[0] (or xx00[0] when out of range), children of xx10[0] are xx01[0] and xx11[0]
// (lowering the bit while out of range); position 0 is the root with one child.
std::array<int, 3> btree(int n, int p) {
  int bit = 1;
  for (; bit < n; bit <<= 1)
    if (bit & p) break;
  if (p == 0) return {-1, -1, n > 1 ? bit >> 1 : -1};
  int up = (p ^ bit) | (bit << 1);
  if (up >= n) up = p ^ bit;
  int low = bit >> 1;
  int d0 = low == 0 ? -1 : p - low;
  int d1 = low == 0 ? -1 : p + low;
  while (d1 >= n) {
    d1 = low == 0 ? -1 : p + low;
    low >>= 1;
  }
  return {up, d0, d1};
}

}  // namespace

double Fabric::nominal() const {
  double m = 0;
  for (double b : bw) m = std::max(m, b);
  return m;
}

DtreeLinks dtree(int n, int p) {
  DtreeLinks l;
  l.t[0] = btree(n, p);
  auto map = [&](int v, bool odd) { return v < 0 ? -1 : odd ? (v + 1) % n : n - 1 - v; };
  bool odd = n % 2 == 1;  // odd: second tree shifted by one; even: mirrored
  std::array<int, 3> s = btree(n, odd ? (p - 1 + n) % n : n - 1 - p);
  for (int k = 0; k < 3; ++k) l.t[1][k] = map(s[k], odd);
  return l;
}

std::vector<std::vector<int>> default_maps(const Fabric& f, int channels) {
  std::vector<std::vector<int>> m(f.nodes, std::vector<int>(channels));
  for (int n = 0; n < f.nodes; ++n)
    for (int c = 0; c < channels; ++c) m[n][c] = c % f.rails;
  return m;
}

std::vector<int> assign_channels(const Fabric& f, int node, int channels) {
  std::vector<int> map(channels, -1), target(f.rails, 0);
  double total = 0;
  for (int r = 0; r < f.rails; ++r) total += std::max(0.0, f.bw_at(node, r));
  if (total <= 0) return map;
  std::vector<std::pair<double, int>> rem;  // largest remainder, ties to the lowest rail
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

namespace detail {

Loads::Loads(const Fabric& f)
    : tx(static_cast<size_t>(f.nodes) * f.rails, 0), rx(tx.size(), 0), up(f.rails, 0), down(f.rails, 0),
      pair(static_cast<size_t>(f.rails) * f.rails, 0), nominal(f.nominal()) {}

// One rerail connection a -> b carrying w units, link 0 from a's NIC ra to b's NIC rb.
void route(const Fabric& f, int a, int b, int ra, int rb, double w, Loads& L) {
  const int R = f.rails;
  auto alive = [&](int n, int r) { return r >= 0 && f.bw_at(n, r) > 0; };
  const double nom = L.nominal;
  // Link 0's NIC pair after the fabric's routing (-1: unusable).
  int x0 = -1, y0 = -1;
  if (ra >= 0 && rb >= 0) {
    if (ra == rb || f.kind == FabricKind::kSpine) {
      if (alive(a, ra) && alive(b, rb) && (ra == rb || f.uplink_gbps > 0)) { x0 = ra; y0 = rb; }
    } else if (alive(a, rb) && alive(b, rb)) {
      x0 = y0 = rb;  // PXN: NVLink to the sender's NIC on the receiver's rail
    } else if (alive(a, ra) && alive(b, ra)) {
      x0 = y0 = ra;  // the receiver takes it on the sender's rail and hops inside its node
    }
  }
  auto put = [&](int x, int y, double u) {
    L.tx[static_cast<size_t>(a) * R + x] += u;
    L.rx[static_cast<size_t>(b) * R + y] += u;
    if (x != y) { L.up[x] += u; L.down[y] += u; }
  };
  bool healthy0 = x0 >= 0 && f.bw_at(a, x0) >= nom && f.bw_at(b, y0) >= nom;
  if (f.policy == Policy::kPrimary) {
    if (x0 < 0) { L.dead = true; return; }
    put(x0, y0, w);
    return;
  }
  if (healthy0 && f.policy == Policy::kFailover) { put(x0, y0, w); return; }
  Striped s{a, b, w, {}};
  if (f.cross_rail_standby && f.kind == FabricKind::kSpine && f.uplink_gbps > 0) {
    for (int x = 0; x < R; ++x)
      for (int y = 0; y < R; ++y)
        if (alive(a, x) && alive(b, y)) s.links.push_back({x, y});
    if (s.links.empty()) { L.dead = true; return; }
    L.striped.push_back(std::move(s));
    return;
  }
  if (x0 >= 0) s.links.push_back({x0, y0});
  for (int r = 0; r < R; ++r)
    if (r != ra && r != rb && alive(a, r) && alive(b, r)) s.links.push_back({r, r});
  if (s.links.empty()) { L.dead = true; return; }
  L.striped.push_back(std::move(s));
}

// rerail's scheduler sends each chunk where it completes first, with every rail's backlog shared by
// all connections of the process: in steady state a striped connection water-fills its links, each
// link (x, y) taking load until max(tx_a[x] / bw_a[x], rx_b[y] / bw_b[y]) reaches a common level.
// Connections are settled after every healthy link 0 is placed, one after the other.
namespace {
// Cross-rail what-if: the connection may use any live NIC pair, so it is limited by its two ends'
// room alone (a complete bipartite transport): level T where min(sum room_a, sum room_b) = w; each
// end spreads in proportion to its room, same-rail pairs first, the rest crosses the spine.
void settle_any_pair(const Fabric& f, Loads& L, const Striped& s) {
  const int R = f.rails;
  auto room = [&](int n, int r, double T, const std::vector<double>& v) {
    double b = f.bw_at(n, r);
    return b > 0 ? std::max(0.0, T * b - v[static_cast<size_t>(n) * R + r]) : 0.0;
  };
  auto fill = [&](double T) {
    double sa = 0, sb = 0;
    for (int r = 0; r < R; ++r) { sa += room(s.a, r, T, L.tx); sb += room(s.b, r, T, L.rx); }
    return std::min(sa, sb);
  };
  double lo = 0, hi = 1;
  while (fill(hi) < s.w) hi *= 2;
  for (int it = 0; it < 60; ++it) {
    double mid = 0.5 * (lo + hi);
    (fill(mid) < s.w ? lo : hi) = mid;
  }
  std::vector<double> fa(R), fb(R), same(R);
  double sa = 0, sb = 0, cross = 0;
  for (int r = 0; r < R; ++r) { fa[r] = room(s.a, r, hi, L.tx); fb[r] = room(s.b, r, hi, L.rx); sa += fa[r]; sb += fb[r]; }
  for (int r = 0; r < R; ++r) { fa[r] *= s.w / sa; fb[r] *= s.w / sb; same[r] = std::min(fa[r], fb[r]); cross += fa[r] - same[r]; }
  for (int r = 0; r < R; ++r) {
    L.tx[static_cast<size_t>(s.a) * R + r] += fa[r];
    L.rx[static_cast<size_t>(s.b) * R + r] += fb[r];
    if (cross > 1e-15) { L.up[r] += fa[r] - same[r]; L.down[r] += fb[r] - same[r]; }
  }
}
}  // namespace

void settle(const Fabric& f, Loads& L) {
  const int R = f.rails;
  for (const Striped& s : L.striped) {
    if (f.cross_rail_standby && f.kind == FabricKind::kSpine && f.uplink_gbps > 0) {
      settle_any_pair(f, L, s);
      continue;
    }
    auto room = [&](const std::pair<int, int>& l, double T) {
      double ta = T * f.bw_at(s.a, l.first) - L.tx[static_cast<size_t>(s.a) * R + l.first];
      double tb = T * f.bw_at(s.b, l.second) - L.rx[static_cast<size_t>(s.b) * R + l.second];
      return std::max(0.0, std::min(ta, tb));
    };
    auto fill = [&](double T) {
      double sum = 0;
      for (const auto& l : s.links) sum += room(l, T);
      return sum;
    };
    double lo = 0, hi = 1;
    while (fill(hi) < s.w) hi *= 2;
    for (int it = 0; it < 60; ++it) {
      double mid = 0.5 * (lo + hi);
      (fill(mid) < s.w ? lo : hi) = mid;
    }
    double total = fill(hi);
    for (const auto& l : s.links) {
      double u = s.w * room(l, hi) / total;
      L.tx[static_cast<size_t>(s.a) * R + l.first] += u;
      L.rx[static_cast<size_t>(s.b) * R + l.second] += u;
      if (l.first != l.second) { L.up[l.first] += u; L.down[l.second] += u; }
    }
  }
  L.striped.clear();
}

// Every channel of the edge a -> b, channels with the same NIC pair routed together.
void edge(const Fabric& f, const std::vector<std::vector<int>>& rail, int a, int b, double w, Loads& L) {
  const int R = f.rails;
  std::fill(L.pair.begin(), L.pair.end(), 0);
  for (size_t c = 0; c < rail[a].size(); ++c) {
    int ra = rail[a][c], rb = rail[b][c];
    if (ra < 0 || rb < 0) { L.dead = true; return; }
    L.pair[static_cast<size_t>(ra) * R + rb] += 1;
  }
  for (int ra = 0; ra < R; ++ra)
    for (int rb = 0; rb < R; ++rb)
      if (int k = L.pair[static_cast<size_t>(ra) * R + rb]) route(f, a, b, ra, rb, w * k, L);
}

Score bottleneck(const Fabric& f, Loads& L) {
  settle(f, L);
  const double inf = std::numeric_limits<double>::infinity();
  Score s;
  if (L.dead) { s.time = inf; return s; }
  auto see = [&](double t, int node) {
    if (t > s.time * (1 + 1e-12)) { s.time = t; s.count = 1; s.node = node; }
    else if (t >= s.time * (1 - 1e-12) && t > 0) ++s.count;
  };
  for (size_t k = 0; k < L.tx.size(); ++k) {
    double l = std::max(L.tx[k], L.rx[k]);
    if (l > 0) see(f.bw[k] > 0 ? l / f.bw[k] : inf, static_cast<int>(k / f.rails));
  }
  if (f.kind == FabricKind::kSpine)
    for (int r = 0; r < f.rails; ++r) {
      double l = std::max(L.up[r], L.down[r]);
      if (l > 0) see(f.uplink_gbps > 0 ? l / f.uplink_gbps : inf, -1);
    }
  return s;
}

Score ring_score(const Fabric& f, const std::vector<int>& order, const std::vector<std::vector<int>>& rail) {
  Loads L(f);
  const int N = static_cast<int>(order.size());
  if (N < 2) return Score{};
  for (int i = 0; i < N && !L.dead; ++i) edge(f, rail, order[i], order[(i + 1) % N], 1.0, L);
  return bottleneck(f, L);
}

Score tree_score(const Fabric& f, const std::vector<int>& order, const std::vector<std::vector<int>>& rail) {
  Loads L(f);
  const int N = static_cast<int>(order.size());
  if (N < 2) return Score{};
  for (int p = 0; p < N && !L.dead; ++p) {
    DtreeLinks d = dtree(N, p);
    for (int t = 0; t < 2; ++t) {
      int u = d.t[t][0];
      if (u < 0) continue;
      edge(f, rail, order[p], order[u], 0.5, L);  // reduce: child -> parent
      edge(f, rail, order[u], order[p], 0.5, L);  // broadcast: parent -> child
    }
  }
  return bottleneck(f, L);
}

std::vector<int> position_degree(int n) {
  std::vector<int> deg(n, 0);
  for (int p = 0; p < n; ++p) {
    DtreeLinks d = dtree(n, p);
    for (int t = 0; t < 2; ++t)
      for (int k = 0; k < 3; ++k) deg[p] += d.t[t][k] >= 0;
  }
  return deg;
}

}  // namespace detail

double ring_cost(const Fabric& f, const std::vector<int>& order, const std::vector<std::vector<int>>& rail) {
  return detail::ring_score(f, order, rail).time;
}

double tree_cost(const Fabric& f, const std::vector<int>& order, const std::vector<std::vector<int>>& rail) {
  return detail::tree_score(f, order, rail).time;
}

namespace {
std::vector<double> node_capacity(const Fabric& f) {
  std::vector<double> cap(f.nodes, 0);
  for (int n = 0; n < f.nodes; ++n)
    for (int r = 0; r < f.rails; ++r) cap[n] += std::max(0.0, f.bw_at(n, r));
  return cap;
}
}  // namespace

double ring_bound(const Fabric& f, int channels) {
  if (f.nodes < 2) return 0;
  auto cap = node_capacity(f);
  double worst = *std::min_element(cap.begin(), cap.end());
  return worst > 0 ? channels / worst : std::numeric_limits<double>::infinity();
}

double tree_bound(const Fabric& f, int channels) {
  if (f.nodes < 2) return 0;
  // A position with k tree links moves k/2 units per channel each way; the bottleneck matching of
  // sorted loads to sorted capacities minimises the largest load/capacity (exchange argument).
  auto cap = node_capacity(f);
  auto deg = detail::position_degree(f.nodes);
  std::sort(cap.begin(), cap.end());
  std::sort(deg.begin(), deg.end());
  double t = 0;
  for (int i = 0; i < f.nodes; ++i)
    t = std::max(t, cap[i] > 0 ? channels * 0.5 * deg[i] / cap[i] : std::numeric_limits<double>::infinity());
  return t;
}

}  // namespace rerail::planner
