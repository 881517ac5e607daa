// rerail — rail-health board: writer API (net plugin) and reader API (rerail-top, tuner, tests).
// Layout and cross-process memory ordering: board_layout.h.
//
// Writer contract
//   * BoardWriter::Create() makes `<dir>/rerail-board.<pid>.<tag>` (dir: argument, else
//     RERAIL_BOARD_DIR) atomically (temp file + rename), first removing stale boards of dead
//     processes in that directory. It fails with kSystemError (cannot create/map the file) or
//     kInvalidArgument (tag empty, too long, or not [A-Za-z0-9_-]) or kInvalidUsage (this process
//     already has a board with that tag); a board that cannot be created must
//     not stop the plugin: callers log and continue without one.
//   * The destructor unmaps and unlinks the file. A crashed process leaves its board behind; the next
//     Create() or ScanBoards(remove_stale=true) in that directory removes it.
//   * AddRail() is for set-up (before traffic); it serialises on an internal mutex and fails with
//     kInvalidUsage when all kBoardMaxRails slots are taken.
//   * SetState() may be called from any thread (internal mutex per board; rare).
//   * The counter methods are wait-free relaxed atomics, safe from any thread on the data path.
//   * An out-of-range rail index is ignored (logged once at WARN), never a crash.
//
// Reader contract
//   * ReadBoard()/ScanBoards() map files read-only, copy consistent snapshots and unmap; they never
//     block on a writer for long (seqlock readers retry for at most 200 ms — a writer preempted in
//     mid-update — then report the slot as torn=true with the last values read, which only happens
//     when a writer died or was stopped mid-update).
//   * A board is stale when its pid is gone, or the pid now belongs to a process with another start
//     time. ScanBoards(remove_stale=true) unlinks stale boards and lists them in `removed`.
//   * Files that are not boards of this version are reported in `errors` (path: reason), never
//     deleted unless their file name's pid is dead.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rerail/rails/board_layout.h"
#include "rerail/rails/rail_health.h"
#include "rerail/status.h"

namespace rr::rails {

class BoardWriter {
 public:
  static Status Create(const std::string& tag, std::unique_ptr<BoardWriter>* out, const std::string& dir = "");
  ~BoardWriter();
  BoardWriter(const BoardWriter&) = delete;
  BoardWriter& operator=(const BoardWriter&) = delete;

  // Adds a rail slot in state healthy; *index is what the other calls take.
  Status AddRail(const std::string& name, int* index);

  void SetState(int rail, RailState s, RailEvent why);
  void SetBandwidth(int rail, uint64_t bytes_per_sec);
  void AddBytes(int rail, uint64_t sent, uint64_t recv);
  // The same with the caller's monotonic clock (NowNs()), read once per pass on the data path.
  void AddBytes(int rail, uint64_t sent, uint64_t recv, uint64_t now_ns);
  void AddRetransmit(int rail, uint64_t chunks, uint64_t bytes);
  void CountFailover(int rail);
  void CountFailback(int rail);
  void CountLinkDown(int rail);
  void Touch();  // refresh the heartbeat without changing anything
  // The state this board shows for `rail` (one atomic load; kPermanentlyFailed for an index out of
  // range). For readers in the publishing process (the tuner in the net plugin's library).
  RailState State(int rail) const;

  const std::string& path() const { return path_; }
  int num_rails() const;

 private:
  BoardWriter() = default;
  RailSlot* Slot(int rail);
  RailSlot* Slot(int rail, uint64_t now_ns);

  std::string path_;
  void* base_ = nullptr;
  size_t size_ = 0;
  std::mutex mu_;
  bool warned_range_ = false;
};

struct RailSnapshot {
  int index = 0;
  std::string name;
  RailState state = RailState::kHealthy;
  RailEvent reason = RailEvent::kNone;
  uint64_t state_since_ns = 0;
  uint64_t bw_estimate_bps = 0;
  uint64_t bytes_sent = 0, bytes_recv = 0;
  uint64_t retransmit_chunks = 0, retransmit_bytes = 0;
  uint64_t failovers = 0, failbacks = 0, link_down_events = 0, transitions = 0;
  uint64_t updated_ns = 0;
  bool torn = false;  // the seqlock never settled (writer died mid-update)
};

struct BoardSnapshot {
  std::string path;
  int pid = 0;
  std::string comm, tag;
  uint64_t netns_inode = 0;
  uint64_t created_realtime_ns = 0;
  uint64_t heartbeat_ns = 0;
  bool alive = false;  // the publisher is still running
  std::vector<RailSnapshot> rails;
};

// Reads one board file. Errors: kSystemError (cannot open/map), kInvalidArgument (not a board of
// this layout version; the message says which check failed).
Status ReadBoard(const std::string& path, BoardSnapshot* out);

// Parses a board image: `size` bytes at `base` (8-byte aligned: a mapping of a board file or a copy),
// written by a process that may run another rerail version, be dying, or be hostile. Accepts it only
// when every size field fits `size`; never reads outside it. `path` only names the board in messages.
// A slot whose seqlock does not settle within seqlock_patience_ns comes back torn (0: one try). Does
// not look at the publisher (out->alive stays false; ReadBoard fills it). Errors: kInvalidArgument.
constexpr uint64_t kSeqlockPatienceNs = 200ull * 1000 * 1000;
Status ParseBoard(const void* base, size_t size, const std::string& path, BoardSnapshot* out,
                  uint64_t seqlock_patience_ns = kSeqlockPatienceNs);

struct ScanResult {
  std::vector<BoardSnapshot> boards;   // live (and, without remove_stale, stale) boards, by pid
  std::vector<std::string> removed;    // stale board files unlinked
  std::vector<std::string> errors;     // "path: reason" for files that could not be read
};

// Every `rerail-board.*` file in dir (argument, else RERAIL_BOARD_DIR).
ScanResult ScanBoards(const std::string& dir = "", bool remove_stale = true);

// True when `pid` runs and (if start_ticks != 0) started at that time. Exposed for tests and tools.
bool ProcessAlive(pid_t pid, uint64_t start_ticks);
// Field 22 of /proc/<pid>/stat, 0 when unreadable.
uint64_t ProcessStartTicks(pid_t pid);

}  // namespace rr::rails
