// NCCL_GRAPH_FILE writer for one node of a planner Plan.
//
// Shape (what NCCL's graph-file loader reads, src/graph/xml.cc + search.cc): root <graphs version="1">,
// one <graph> per algorithm with the required attributes id, pattern, crossnic, nchannels, speedintra,
// speedinter, typeintra, typeinter, samechannels (latencyinter optional); each <channel> lists
// <net dev=.../> <gpu dev=.../>... <net dev=.../>. Newer NCCL parses dev as hex, older as decimal, so
// only devices 0..9 are written (identical in both) and larger rail counts are refused.
#pragma once
#include <string>

#include "rerail/planner.h"

namespace rerail::plan {

struct GraphXmlOptions {
  double speed_intra = 20;  // GB/s, NCCL's per-channel figures
  double speed_inter = 12;
  const char* type_intra = "NVL";
  const char* type_inter = "PIX";
};

// Ring (graph id 0, pattern 4) and tree (graph id 1, pattern 1 balanced tree) graphs for `node`: channel c
// enters and leaves through NIC plan.rail[node][c], visiting the node's GPUs 0..gpus-1 starting at the
// GPU local to that NIC (GPU g sits next to NIC g in a rail-optimised box). Throws std::invalid_argument
// when rails > 10.
std::string graph_xml(const planner::Fabric& f, const planner::Plan& p, int node, int gpus,
                      const GraphXmlOptions& o = {});

}  // namespace rerail::plan
