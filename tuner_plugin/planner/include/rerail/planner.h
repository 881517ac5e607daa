// Re-ranking planner: node order and channel -> rail maps for ring and tree collectives on a
// rail-optimised fabric with failed or slow NICs (issue 14, part 2; model in ../README.md).
//
// Fabric: `nodes` x `rails` NIC bandwidths (0 = failed NIC). Rail r of every node hangs off rail
// switch r. Two kinds of fabric:
//   * spine: rail switches joined by a spine; a link between NIC x of one node and NIC y != x of
//     another crosses it through the uplink of switch x and the downlink of switch y (`uplink_gbps`
//     each way per switch; full bisection = nodes x NIC bandwidth, 1:k oversubscription = that / k);
//   * rail_only: no spine; NIC x reaches only NIC x of other nodes. A channel whose two ends sit on
//     different rails goes through the intra-node hop (NCCL's PXN): the sender hands the data over
//     NVLink to its NIC on the receiver's rail (or, when that NIC is dead, the receiver takes it on
//     the sender's rail).
//
// Traffic: NCCL's graph channel c on node n uses NIC rail[n][c]. A ring moves one unit per channel
// over every edge order[i] -> order[i+1]; NCCL's double binary tree (ncclGetDtree over node
// positions: btree + mirror for even node counts, shift for odd) moves 1/2 unit per channel and tree
// each way over every parent-child edge (reduce up and broadcast down run pipelined, both trees use
// every graph channel). Each channel edge is one rerail connection: link 0 between the two NICs of
// the channel, standby links on every other rail both ends keep (rail r to rail r). Policy failover
// (IB default): link 0 alone while both its NICs are alive at the fabric's nominal rate, else the
// connection is striped over its live links in proportion to their rate; policy stripe (TCP
// default): always striped; kPrimary (no rerail): link 0 only. Cost = time of the most loaded
// resource per unit of channel data:
// max over NICs of max(tx, rx) / bw and over switches of max(up, down) / uplink; infinity when a
// connection has no live link.
//
// Pure C++17, no NCCL headers; functions are reentrant. Invalid input throws std::invalid_argument
// (tools only; the tuner validates before calling).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rerail::planner {

enum class FabricKind {
  kSpine,     // rail switches under a spine of uplink_gbps per switch (0 = none: cross-rail dead)
  kRailOnly,  // no spine; cross-rail only through the intra-node hop (PXN)
};

enum class Policy {
  kFailover,  // link 0 only while healthy at nominal rate (rerail default on IB)
  kStripe,    // every live link always (rerail default on TCP)
  kPrimary,   // link 0 only, never striped: NCCL without rerail (a dead link 0 kills the job)
};

struct Fabric {
  int nodes = 0;
  int rails = 0;
  std::vector<double> bw;      // nodes*rails, row-major by node, Gbps; <= 0 means the NIC is dead
  double uplink_gbps = 0;      // kSpine: per rail switch, each direction, to the spine
  FabricKind kind = FabricKind::kSpine;
  Policy policy = Policy::kFailover;
  // What-if (rerail opens standby links on its own rail only): on a spine fabric, let a striped
  // connection use every live NIC of both ends, cross-rail pairs through the spine.
  bool cross_rail_standby = false;
  double bw_at(int n, int r) const { return bw[static_cast<std::size_t>(n) * rails + r]; }
  double nominal() const;      // the fastest NIC's rate: a NIC below it counts as degraded
};

enum class Objective {
  kRing,  // ring all-reduce / all-gather / reduce-scatter (same edges, so the same ratios)
  kTree,  // NCCL double binary tree all-reduce
  kBoth,  // worst of the two, each relative to its lower bound (one order serves both in NCCL)
};

// Channel maps a plan uses.
enum class MapKind {
  kDefault,    // NCCL's default (channel c on NIC c % rails); rerail stripes dead NICs' channels over
               // standby links (fractional): apply the order alone, as a rank permutation
  kAvoidDead,  // per-node maps with no channel on a dead NIC (the NCCL_GRAPH_FILE of rerail-plan);
               // integer channel counts per NIC
};

struct Plan {
  std::vector<int> order;              // node order: order[i] is the node at rank position i
  int channels = 0;
  std::vector<std::vector<int>> rail;  // rail[node][channel]: NIC of that channel on that node
  double ring = 0;                     // ring_cost of this plan
  double tree = 0;                     // tree_cost of this plan
  double cost = 0;                     // the objective it was planned for (lower is better)
};

// NCCL's double binary tree over `n` positions: for position p, {parent, child0, child1} in tree 0
// and tree 1 (-1 = none), exactly as ncclGetDtree builds it.
struct DtreeLinks { std::array<int, 3> t[2]; };
DtreeLinks dtree(int n, int p);

// NCCL's default graph: channel c on NIC c % rails on every node (a dead NIC keeps its channels;
// rerail's connections stripe them over the standby links).
std::vector<std::vector<int>> default_maps(const Fabric& f, int channels);
// Per-node map avoiding dead NICs: each rail gets a channel count proportional to its bandwidth;
// channel c keeps rail c % rails while that rail has room, the others fill the rest in order.
// Deterministic, so two nodes with the same failure signature get the same map.
std::vector<int> assign_channels(const Fabric& f, int node, int channels);

// Bottleneck time of the ring / tree over `order` with the channel maps `rail` (model above).
double ring_cost(const Fabric& f, const std::vector<int>& order, const std::vector<std::vector<int>>& rail);
double tree_cost(const Fabric& f, const std::vector<int>& order, const std::vector<std::vector<int>>& rail);
// Lower bounds on those times over every order and map: ring, the node with the least live
// bandwidth carries `channels` units; tree, nodes matched to tree positions by load (the heaviest
// position to the fastest node) with each node's load spread over its live NICs.
double ring_bound(const Fabric& f, int channels);
double tree_bound(const Fabric& f, int channels);

// The identity order with NCCL's default maps (naive: the job's rank order, rerail redistribution).
Plan naive_plan(const Fabric& f, int channels, Objective obj = Objective::kRing);
// Exhaustive search over orders (ring: node order[0] fixed; tree/both: all orders), each with the
// maps of `maps` (kAvoidDead: channel counts even over live NICs, or by rate); ring up to 9 nodes,
// tree/both up to 8.
Plan exact_plan(const Fabric& f, int channels, Objective obj = Objective::kRing, MapKind maps = MapKind::kAvoidDead);
// Heuristic (README "Algorithm"): degraded nodes placed one by one, most degraded first, on the
// position with the fewest unlike degraded neighbours in the ring and both trees; then swap local
// search on the objective (at most max_moves evaluated swaps, -1: 40 + 4 per degraded node, <= 600).
Plan heuristic_plan(const Fabric& f, int channels, Objective obj = Objective::kRing,
                    MapKind maps = MapKind::kAvoidDead, int max_moves = -1);

}  // namespace rerail::planner
