// rerail-perf — nccl-tests-style output: the table, the closing lines, and the -J JSON file.
//
// Contract
//   * Column layout and units follow nccl-tests: size (B), count (elements), type, redop, root, then
//     time (us), algbw and busbw (GB/s, 1e9) and #wrong for out-of-place and in-place. #wrong is
//     "N/A" when verification is off (-c 0).
//   * Footer prints "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth    : X" where X
//     averages busbw over every printed cell (both placements), as nccl-tests does.
//   * Printing goes to stdout and is flushed per line (so a watcher sees the sweep progress); only
//     rank 0 calls these. Not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "options.h"

namespace rr::perf {

struct Cell {
  double time_us = 0, algbw = 0, busbw = 0;
  int64_t wrong = -1;  // -1: not checked
};

struct Row {
  Coll coll;
  size_t size = 0, count = 0;
  DataType dtype;
  int root = -1;
  Cell cell[2];  // [0] out-of-place, [1] in-place
};

class Report {
 public:
  explicit Report(FILE* out) : out_(out) {}
  void Preamble(const Options& o, Coll c, const std::string& plugin_desc, const std::vector<std::string>& rank_lines);
  void Header();
  void Add(const Row& r);
  // Closes the current table; returns false when any value was wrong.
  bool Footer();
  const nlohmann::json& Json() const { return json_; }
  uint64_t TotalWrong() const { return total_wrong_; }

 private:
  FILE* out_;
  nlohmann::json json_ = nlohmann::json::array();
  double bw_sum_ = 0;
  int bw_count_ = 0;
  uint64_t wrong_ = 0, total_wrong_ = 0;
};

}  // namespace rr::perf
