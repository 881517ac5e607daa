// rerail tuner — where rail health comes from, reduced to what a decision needs.
//
// RailView is a summary: how many rails this process has, how many carry traffic, and the fraction
// of network bandwidth left. RailSource produces it from, in order:
//   1. the in-process registry (health_link.h), when the net plugin lives in the same library;
//   2. the shared-memory rail-health board of this process (`<dir>/rerail-board.<pid>.net`, or the
//      file RERAIL_TUNER_BOARD names), mapped read-only and kept mapped between reads.
//
// Contract
//   * Read() never fails and never throws: no source → view.valid = false ("leave NCCL alone").
//   * A board that disappears (unlinked: the net plugin finalized, or the file was removed) is noticed
//     at the next Read() by fstat's link count; the mapping is dropped (reading it stays safe until
//     then because an unlinked file's pages live on while mapped) and later reads look for a new
//     board at the same path. A file that is not a board of this layout is rejected with a reason.
//   * Cost: a mapped board reads one seqlock per rail (tens of ns); an absent board costs one failed
//     open() per Read(). Callers bound the rate (the tuner reads once per RERAIL_TUNER_REFRESH_MS).
//   * Not thread-safe: one RailSource per communicator context, used by the thread that enqueues.
#pragma once

#include <cstdint>
#include <string>

namespace rr::tuner {

enum class SourceKind : int {
  kNone = 0,       // nothing to read: NCCL's choices are left alone
  kInProcess = 1,  // the net plugin in this library
  kBoard = 2,      // the shared-memory board
};
const char* SourceName(SourceKind k);

struct RailView {
  bool valid = false;       // a source was read
  SourceKind source = SourceKind::kNone;
  int total = 0;            // rails of this process (NCCL net devices)
  int usable = 0;           // rails that carry traffic (healthy)
  double capacity = 1.0;    // usable / total, in (0, 1] when valid and usable > 0

  bool Degraded() const { return valid && total > 0 && usable < total; }
  bool operator==(const RailView& o) const {
    return valid == o.valid && source == o.source && total == o.total && usable == o.usable;
  }
  bool operator!=(const RailView& o) const { return !(*this == o); }
};

// Summarises rail states (rr::rails::RailState values); out-of-range values count as unusable.
RailView Summarise(const uint32_t* states, int n, SourceKind kind);

class RailSource {
 public:
  // board_path: the board file to read ("" = no board). comm_id keys the in-process registry.
  RailSource(uint64_t comm_id, std::string board_path);
  ~RailSource();
  RailSource(const RailSource&) = delete;
  RailSource& operator=(const RailSource&) = delete;

  RailView Read();

  const std::string& board_path() const { return path_; }
  // Why the last board read found nothing ("" when it read one). Stable until the next Read().
  const std::string& board_problem() const { return problem_; }

 private:
  bool MapBoard();
  void UnmapBoard();
  int ReadBoardStates(uint32_t* states, int max);

  uint64_t comm_id_;
  std::string path_;
  std::string problem_;
  int fd_ = -1;
  const void* base_ = nullptr;
  size_t size_ = 0;
  uint32_t mapped_rails_ = 0;  // max_rails when mapped: the slots known to lie inside the file
};

// The default board path of this process: <RERAIL_BOARD_DIR>/rerail-board.<pid>.net.
std::string DefaultBoardPath(const std::string& board_dir);

}  // namespace rr::tuner
