#include "board_input.h"

#include <algorithm>
#include <stdexcept>

#include "rerail/rails/board.h"

namespace rerail::plan {

planner::Fabric fabric_from_boards(const std::string& dir, double nic_gbps, double uplink_gbps) {
  rr::rails::ScanResult scan = rr::rails::ScanBoards(dir, /*remove_stale=*/false);
  if (scan.boards.empty()) throw std::runtime_error("no rail-health board in " + dir);
  std::sort(scan.boards.begin(), scan.boards.end(),
            [](const auto& a, const auto& b) { return a.path < b.path; });
  planner::Fabric f;
  f.nodes = static_cast<int>(scan.boards.size());
  for (auto& b : scan.boards) f.rails = std::max(f.rails, static_cast<int>(b.rails.size()));
  f.uplink_gbps = uplink_gbps;
  f.bw.assign(static_cast<size_t>(f.nodes) * f.rails, 0);
  for (int n = 0; n < f.nodes; ++n)
    for (auto& r : scan.boards[n].rails) {
      if (r.state != rr::rails::RailState::kHealthy) continue;
      double g = r.bw_estimate_bps ? r.bw_estimate_bps * 8 / 1e9 : nic_gbps;
      f.bw[static_cast<size_t>(n) * f.rails + r.index] = g;
    }
  return f;
}

}  // namespace rerail::plan
