// Re-ranking planner: node order for rings and channel -> rail assignment on a rail-optimised fabric.
//
// Model (issue 14, part 2): `nodes` x `rails` NIC bandwidths (0 = failed NIC). Rail r of every node
// hangs off rail switch r; traffic between different rails crosses the spine through the uplink of
// the source rail switch and the downlink of the destination one (capacity `uplink_gbps` each way per
// switch). A ring of `channels` channels moves one unit per channel over every ring edge a -> b; on
// node n channel c uses rail plan.rail[n][c]. The cost of a plan is the time of the slowest resource:
// max over NICs of (units sent or received) / bw and over switch uplinks/downlinks of units / uplink.
//
// Pure C++17, no NCCL headers, no allocation beyond std containers, not thread-safe per object
// (functions are reentrant). Errors: invalid input throws std::invalid_argument (tools only; the tuner
// must validate before calling).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rerail::planner {

struct Fabric {
  int nodes = 0;
  int rails = 0;
  std::vector<double> bw;      // nodes*rails, row-major by node, Gbps; <= 0 means the NIC is dead
  double uplink_gbps = 0;      // per rail switch, each direction, to the spine; 0 = no spine path
  double bw_at(int n, int r) const { return bw[static_cast<std::size_t>(n) * rails + r]; }
};

struct Plan {
  std::vector<int> order;              // ring order: order[i] is the node at ring position i
  int channels = 0;
  std::vector<std::vector<int>> rail;  // rail[node][channel]: NIC used by that channel on that node
  double cost = 0;                     // bottleneck time per unit of channel data (lower is better)
};

// Channel -> rail map of one node: each rail gets a channel count proportional to its bandwidth (dead
// rails none); channel c keeps rail c % rails while that rail has room, the others fill the rest in order. Deterministic, so two nodes with
// the same failure signature get the same map (aligned: no spine crossing between them).
std::vector<int> assign_channels(const Fabric& f, int node, int channels);

// Bottleneck time of `order` with the per-node maps in `rail`. Infinity when a node has no live rail.
double ring_cost(const Fabric& f, const std::vector<int>& order, const std::vector<std::vector<int>>& rail);

// The identity order (naive: the job's original rank order), evaluated.
Plan naive_plan(const Fabric& f, int channels);
// Exhaustive search over ring orders (node order[0] fixed, rotations/reflections pruned by the fix);
// only for nodes <= 9.
Plan exact_plan(const Fabric& f, int channels);
// Heuristic: stable-group nodes by failure signature (bitmask of dead/slow rails), keep the groups
// contiguous, then 2-opt segment reversal until no improving move (bounded passes).
Plan heuristic_plan(const Fabric& f, int channels, int max_passes = 50);

}  // namespace rerail::planner
