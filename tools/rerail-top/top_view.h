// rerail-top — rendering of rail-health boards (text table and JSON), separate from the CLI so tests
// can check it directly.
//
// Contract
//   * Pure functions of their inputs (plus `now_ns`, CLOCK_MONOTONIC, for ages); no I/O, thread-safe.
//   * Rates (bytes/s sent and received per rail) come from two scans: RateTracker::Update() keeps the
//     previous counters per (board path, rail) and returns the rate since the previous call; the first
//     call for a rail yields no rate (shown as "-", JSON null).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "rerail/rails/board.h"

namespace rr::top {

struct RailRate {
  std::optional<double> tx_bps, rx_bps;  // bytes per second
};

class RateTracker {
 public:
  // Returns per-board, per-rail rates keyed like the scan ("path#rail").
  std::map<std::string, RailRate> Update(const rr::rails::ScanResult& scan, uint64_t now_ns);

 private:
  struct Prev {
    uint64_t sent, recv, t_ns;
  };
  std::map<std::string, Prev> prev_;
};

std::string RateKey(const std::string& path, int rail);

// "12.5 GB/s", "980 B", ...
std::string HumanBytes(double v);
std::string HumanAge(uint64_t ns);

std::string RenderText(const rr::rails::ScanResult& scan, const std::map<std::string, RailRate>& rates,
                       const std::string& dir, uint64_t now_ns);
nlohmann::json RenderJson(const rr::rails::ScanResult& scan, const std::map<std::string, RailRate>& rates,
                          const std::string& dir, uint64_t now_ns);

}  // namespace rr::top
