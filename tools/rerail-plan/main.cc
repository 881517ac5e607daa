// rerail-plan: re-rank nodes and steer channels away from dead NICs (tuner_plugin/planner/README.md).
// Input: a JSON fabric file {"rails":R,"uplink_gbps":U,"bw":[[Gbps per rail] per node]} with
// optional "kind" ("spine" | "rail-only") and "policy" ("failover" | "stripe").
// Output: JSON on stdout (order, ncclCommSplit keys, costs, channel -> rail maps) and, with
// --graph-dir, one NCCL_GRAPH_FILE per node (node-<n>.xml).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "board_input.h"
#include "graph_xml.h"
#include "rerail/planner.h"

using nlohmann::json;
using namespace rerail;

int main(int argc, char** argv) {
  CLI::App app{"rerail-plan: ring re-ranking and NCCL graph files around failed NICs"};
  std::string in, graph_dir, boards;
  double nic_gbps = 400, uplink = 0;
  int channels = 0, gpus = 0;
  bool exact = false;
  std::string objective = "both", maps = "avoid-dead";
  auto* in_opt = app.add_option("-i,--input", in, "fabric JSON file")->check(CLI::ExistingFile);
  auto* b_opt = app.add_option("--boards", boards, "read live rail-health boards in this dir (read-only)")
                    ->check(CLI::ExistingDirectory);
  in_opt->excludes(b_opt);
  app.add_option("--nic-gbps", nic_gbps, "with --boards: rail bandwidth when a board has no estimate");
  app.add_option("--uplink-gbps", uplink, "with --boards: rail-switch uplink to the spine");
  app.add_option("-c,--channels", channels, "channels (default: rails)");
  app.add_option("--gpus", gpus, "GPUs per node for the graph XML (default: rails)");
  app.add_option("--graph-dir", graph_dir, "write node-<n>.xml NCCL_GRAPH_FILEs here")->check(CLI::ExistingDirectory);
  app.add_flag("--exact", exact, "exhaustive search (<= 9 nodes ring, <= 8 tree/both)");
  app.add_option("--objective", objective, "ring, tree or both (the worse of the two vs their bounds)")
      ->check(CLI::IsMember({"ring", "tree", "both"}));
  app.add_option("--maps", maps, "avoid-dead (per-node maps, what the graph files carry) or default (NCCL's "
                 "c % rails; rerail stripes dead NICs' channels; apply the order alone)")
      ->check(CLI::IsMember({"avoid-dead", "default"}));
  CLI11_PARSE(app, argc, argv);
  try {
    if (in.empty() && boards.empty()) throw std::invalid_argument("give --input or --boards");
    planner::Fabric f;
    if (!boards.empty()) {
      f = plan::fabric_from_boards(boards, nic_gbps, uplink);
    } else {
    json j = json::parse(std::ifstream(in));
    f.rails = j.at("rails").get<int>();
    f.uplink_gbps = j.value("uplink_gbps", 0.0);
    std::string kind = j.value("kind", "spine"), policy = j.value("policy", "failover");
    if (kind != "spine" && kind != "rail-only") throw std::invalid_argument("kind: spine or rail-only");
    if (policy != "failover" && policy != "stripe") throw std::invalid_argument("policy: failover or stripe");
    f.kind = kind == "spine" ? planner::FabricKind::kSpine : planner::FabricKind::kRailOnly;
    f.policy = policy == "stripe" ? planner::Policy::kStripe : planner::Policy::kFailover;
    for (auto& row : j.at("bw")) {
      if (static_cast<int>(row.size()) != f.rails) throw std::invalid_argument("bw row length != rails");
      for (auto& v : row) f.bw.push_back(v.get<double>());
      ++f.nodes;
    }
    }
    if (channels <= 0) channels = f.rails;
    if (gpus <= 0) gpus = f.rails;
    if (!graph_dir.empty() && maps == "default")
      throw std::invalid_argument("--graph-dir needs --maps avoid-dead (graph files name no dead NIC)");
    auto obj = objective == "ring" ? planner::Objective::kRing
               : objective == "tree" ? planner::Objective::kTree : planner::Objective::kBoth;
    auto mk = maps == "default" ? planner::MapKind::kDefault : planner::MapKind::kAvoidDead;
    planner::Plan naive = planner::naive_plan(f, channels, obj);
    planner::Plan p = exact ? planner::exact_plan(f, channels, obj, mk) : planner::heuristic_plan(f, channels, obj, mk);
    std::vector<int> keys(f.nodes);
    for (int i = 0; i < f.nodes; ++i) keys[p.order[i]] = i;  // split key of node n = its ring position
    json out = {{"order", p.order}, {"split_keys", keys}, {"channels", channels},
                {"cost_naive", naive.cost}, {"cost_planned", p.cost}, {"channel_rail", p.rail},
                {"ring_naive", naive.ring}, {"ring_planned", p.ring}, {"tree_naive", naive.tree},
                {"tree_planned", p.tree}, {"ring_bound", planner::ring_bound(f, channels)},
                {"tree_bound", planner::tree_bound(f, channels)}};
    if (naive.cost > 0 && p.cost > 0) out["speedup"] = naive.cost / p.cost;
    std::cout << out.dump(1) << "\n";
    if (!graph_dir.empty())
      for (int n = 0; n < f.nodes; ++n)
        std::ofstream(graph_dir + "/node-" + std::to_string(n) + ".xml") << plan::graph_xml(f, p, n, gpus);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rerail-plan: %s\n", e.what());
    return 2;
  }
  return 0;
}
