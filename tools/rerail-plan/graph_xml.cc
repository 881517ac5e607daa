#include "graph_xml.h"

#include <sstream>
#include <stdexcept>

namespace rerail::plan {

std::string graph_xml(const planner::Fabric& f, const planner::Plan& p, int node, int gpus,
                      const GraphXmlOptions& o) {
  if (f.rails > 10 || gpus > 10 || gpus < 1)
    throw std::invalid_argument("graph_xml: devices must be 0..9 (hex/decimal ambiguity in NCCL)");
  std::ostringstream x;
  x << "<graphs version=\"1\">\n";
  const struct { int id, pattern; } graphs[] = {{0, 4}, {1, 1}};
  for (auto g : graphs) {
    x << "  <graph id=\"" << g.id << "\" pattern=\"" << g.pattern << "\" crossnic=\"0\" nchannels=\""
      << p.channels << "\" speedintra=\"" << o.speed_intra << "\" speedinter=\"" << o.speed_inter
      << "\" latencyinter=\"0\" typeintra=\"" << o.type_intra << "\" typeinter=\"" << o.type_inter
      << "\" samechannels=\"0\">\n";
    for (int c = 0; c < p.channels; ++c) {
      int nic = p.rail[node][c];
      x << "    <channel>\n      <net dev=\"" << nic << "\"/>\n";
      for (int k = 0; k < gpus; ++k) x << "      <gpu dev=\"" << (nic + k) % gpus << "\"/>\n";
      x << "      <net dev=\"" << nic << "\"/>\n    </channel>\n";
    }
    x << "  </graph>\n";
  }
  x << "</graphs>\n";
  return x.str();
}

}  // namespace rerail::plan
