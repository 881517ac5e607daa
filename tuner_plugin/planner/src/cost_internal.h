// Internal to rerail_planner: per-resource loads of one plan and the scores the search compares.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

#include "rerail/planner.h"

namespace rerail::planner::detail {

// A connection whose link 0 is dead or degraded: `w` units to water-fill over `links` (NIC pairs).
struct Striped {
  int a, b;
  double w;
  std::vector<std::pair<int, int>> links;
};

struct Loads {
  explicit Loads(const Fabric& f);
  std::vector<double> tx, rx;  // per NIC (node*rails + rail), units per channel datum
  std::vector<double> up, down;  // per rail switch, spine traffic
  std::vector<int> pair;         // scratch: channels per (ra, rb) NIC pair of one edge
  std::vector<Striped> striped;  // deferred until every healthy link 0 is placed (settle)
  double nominal;                // f.nominal(), cached
  bool dead = false;             // some connection had no live link
};

// Bottleneck time, how many resources sit at it (the search's tie-break) and one node at it (-1:
// a spine switch or none).
struct Score {
  double time = 0;
  int count = 0;
  int node = -1;
};

void route(const Fabric& f, int a, int b, int ra, int rb, double w, Loads& L);
void edge(const Fabric& f, const std::vector<std::vector<int>>& rail, int a, int b, double w, Loads& L);
void settle(const Fabric& f, Loads& L);
// Settles the striped connections, then the bottleneck.
Score bottleneck(const Fabric& f, Loads& L);
Score ring_score(const Fabric& f, const std::vector<int>& order, const std::vector<std::vector<int>>& rail);
Score tree_score(const Fabric& f, const std::vector<int>& order, const std::vector<std::vector<int>>& rail);
// Tree links (both trees) at each of n positions.
std::vector<int> position_degree(int n);

}  // namespace rerail::planner::detail
