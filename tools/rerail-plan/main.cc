// rerail-plan: re-rank nodes and steer channels away from dead NICs (tuner_plugin/planner/README.md).
// Input: a JSON fabric file {"rails":R,"uplink_gbps":U,"bw":[[Gbps per rail] per node]}.
// Output: JSON on stdout (order, ncclCommSplit keys, costs, channel -> rail maps) and, with
// --graph-dir, one NCCL_GRAPH_FILE per node (node-<n>.xml).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "graph_xml.h"
#include "rerail/planner.h"

using nlohmann::json;
using namespace rerail;

int main(int argc, char** argv) {
  CLI::App app{"rerail-plan: ring re-ranking and NCCL graph files around failed NICs"};
  std::string in, graph_dir;
  int channels = 0, gpus = 0;
  bool exact = false;
  app.add_option("-i,--input", in, "fabric JSON file")->required()->check(CLI::ExistingFile);
  app.add_option("-c,--channels", channels, "channels (default: rails)");
  app.add_option("--gpus", gpus, "GPUs per node for the graph XML (default: rails)");
  app.add_option("--graph-dir", graph_dir, "write node-<n>.xml NCCL_GRAPH_FILEs here")->check(CLI::ExistingDirectory);
  app.add_flag("--exact", exact, "exhaustive search (<= 9 nodes)");
  CLI11_PARSE(app, argc, argv);
  try {
    json j = json::parse(std::ifstream(in));
    planner::Fabric f;
    f.rails = j.at("rails").get<int>();
    f.uplink_gbps = j.value("uplink_gbps", 0.0);
    for (auto& row : j.at("bw")) {
      if (static_cast<int>(row.size()) != f.rails) throw std::invalid_argument("bw row length != rails");
      for (auto& v : row) f.bw.push_back(v.get<double>());
      ++f.nodes;
    }
    if (channels <= 0) channels = f.rails;
    if (gpus <= 0) gpus = f.rails;
    planner::Plan naive = planner::naive_plan(f, channels);
    planner::Plan p = exact ? planner::exact_plan(f, channels) : planner::heuristic_plan(f, channels);
    std::vector<int> keys(f.nodes);
    for (int i = 0; i < f.nodes; ++i) keys[p.order[i]] = i;  // split key of node n = its ring position
    json out = {{"order", p.order}, {"split_keys", keys}, {"channels", channels},
                {"cost_naive", naive.cost}, {"cost_planned", p.cost}, {"channel_rail", p.rail}};
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
