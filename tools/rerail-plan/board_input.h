// rerail-plan input from live rail-health boards (net_plugin/rails board.h), read-only.
// Every board in `dir` (ScanBoards, stale boards kept and never unlinked) is one node, in path order;
// rail r's bandwidth is 0 when failed / permanently failed / suspect / recovering, else the board's
// bandwidth estimate, else `nic_gbps`. Boards with fewer rails than the widest get 0 for the rest.
// Errors: std::runtime_error when no board is found.
#pragma once
#include <string>

#include "rerail/planner.h"

namespace rerail::plan {
planner::Fabric fabric_from_boards(const std::string& dir, double nic_gbps, double uplink_gbps);
}
