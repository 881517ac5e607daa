// rerail-perf — per-rail byte counters read from the plugin's rail-health board (when it has one).
//
// Contract
//   * A plugin that publishes a board (rerail: `<RERAIL_BOARD_DIR>/rerail-board.<pid>.*`, see
//     net_plugin/rails/.../board.h) counts bytes per physical rail, including chunks it striped or
//     re-sent on other rails than the NCCL device's. When such a board of THIS process exists,
//     Sample() adds the growth of every rail's bytes_sent to the timeline under the rail's name, and
//     the timeline stops counting per NCCL device (Active() is true).
//   * Discover() looks for the boards once (after the plugin was initialised); Sample() is rate
//     limited to two reads per timeline bin and never blocks (the board reader is wait-free).
//   * ResentBytes() is the sum of retransmit_bytes over this process's rails at the last sample.
//   * Not thread-safe (the rank's single thread calls it).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "timeline.h"

namespace rr::perf {

class BoardSource {
 public:
  void Discover();
  bool Active() const { return !paths_.empty(); }
  void Sample(uint64_t now_ns, Timeline* tl, bool force = false);
  uint64_t ResentBytes() const { return resent_; }

 private:
  std::vector<std::string> paths_;
  std::map<std::string, uint64_t> last_sent_;  // "board path|rail name" -> bytes_sent at last sample
  uint64_t last_ns_ = 0;
  uint64_t resent_ = 0;
};

}  // namespace rr::perf
