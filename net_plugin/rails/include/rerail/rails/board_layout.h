// rerail — the rail-health board's shared-memory layout, version 1.
//
// One board per publishing process (the net plugin), a file `<dir>/rerail-board.<pid>.<tag>` in
// RERAIL_BOARD_DIR (default /dev/shm). Readers: rerail-top, the tuner plugin, tests — possibly
// compiled from a different rerail version, so the layout is self-describing:
//
//   BoardHeader  at offset 0, header_size bytes
//   RailSlot[max_rails] right after it, slot_size bytes each; total_size = header + max_rails·slot
//
// A reader accepts a board only if magic == kBoardMagic, version == kBoardVersion and the three sizes
// equal its own sizeof()s and fit the file. Any incompatible change bumps kBoardVersion; appending
// fields at the end of a struct also changes its size, so old readers reject rather than misread.
//
// Concurrency (one writer process, any number of reader processes, no locks across processes):
//   * The writer creates the file under a temporary name, fills it and rename()s it into place, so a
//     reader never sees a half-initialised board. `magic` is stored last (release) as a second guard.
//   * A slot is initialised (index, name) before num_rails is raised past it (release); readers load
//     num_rails (acquire) and never read slots beyond it. Names never change afterwards.
//   * State, reason and state_since form one unit guarded by a seqlock: the writer makes `seq` odd,
//     writes, makes it even again; a reader retries while seq is odd or changed. Readers therefore
//     never see a state with another state's timestamp.
//   * Counters and estimates are individual 64-bit atomics (lock-free, address-free), monotonic where
//     noted; a reader sees each one whole, never torn, though not as one consistent snapshot.
//   * Every timestamp is CLOCK_MONOTONIC in ns (system-wide, so ages are comparable across
//     processes), except created_realtime_ns (wall clock, for humans).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace rr::rails {

constexpr uint64_t kBoardMagic = 0x3144524f42525252ull;  // "RRRBORD1" little-endian
constexpr uint32_t kBoardVersion = 1;
constexpr uint32_t kBoardMaxRails = 32;
constexpr const char* kBoardFilePrefix = "rerail-board.";

struct BoardHeader {
  std::atomic<uint64_t> magic;          // kBoardMagic once fully initialised
  uint32_t version;                     // kBoardVersion
  uint32_t total_size;                  // bytes of the whole board
  uint32_t header_size;                 // sizeof(BoardHeader)
  uint32_t slot_size;                   // sizeof(RailSlot)
  uint32_t max_rails;                   // slots allocated (kBoardMaxRails)
  std::atomic<uint32_t> num_rails;      // slots in use, [0, num_rails) readable
  int32_t pid;                          // the publishing process
  uint32_t reserved0;
  uint64_t pid_start_ticks;             // /proc/<pid>/stat field 22: tells a reused pid apart
  uint64_t netns_inode;                 // inode of /proc/self/ns/net: groups boards per (simulated) host
  uint64_t created_realtime_ns;         // wall clock at creation
  std::atomic<uint64_t> heartbeat_ns;   // monotonic; refreshed by every write (and BoardWriter::Touch)
  char comm[16];                        // process name (/proc/self/comm), NUL-terminated
  char tag[16];                         // publisher kind, e.g. "net"; NUL-terminated
};

struct RailSlot {
  std::atomic<uint32_t> seq;               // seqlock over state, reason, state_since_ns
  uint32_t index;                          // rail index in the publisher (NCCL device number)
  char name[16];                           // interface / device name, NUL-terminated
  std::atomic<uint32_t> state;             // RailState
  std::atomic<uint32_t> reason;            // RailEvent that caused the last transition
  std::atomic<uint64_t> state_since_ns;    // when the current state was entered
  std::atomic<uint64_t> bw_estimate_bps;   // scheduler's current estimate, bytes per second
  std::atomic<uint64_t> bytes_sent;        // monotonic
  std::atomic<uint64_t> bytes_recv;        // monotonic
  std::atomic<uint64_t> retransmit_chunks; // monotonic: chunks re-sent because this rail failed
  std::atomic<uint64_t> retransmit_bytes;  // monotonic
  std::atomic<uint64_t> failovers;         // monotonic: times traffic was moved off this rail
  std::atomic<uint64_t> failbacks;         // monotonic: times this rail was re-admitted
  std::atomic<uint64_t> link_down_events;  // monotonic: link-down events seen (monitor)
  std::atomic<uint64_t> transitions;       // monotonic: state changes
  std::atomic<uint64_t> updated_ns;        // last write of any field of this slot
  uint64_t reserved0;                      // zero; pads the slot to 128 bytes
};

static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "board atomics must be lock-free to live in shared memory");
static_assert(std::is_standard_layout_v<BoardHeader> && std::is_standard_layout_v<RailSlot>);
static_assert(sizeof(BoardHeader) == 104 && offsetof(BoardHeader, heartbeat_ns) == 64);
static_assert(sizeof(RailSlot) == 128 && offsetof(RailSlot, bw_estimate_bps) == 40);
static_assert(sizeof(BoardHeader) % 8 == 0 && sizeof(RailSlot) % 8 == 0);

constexpr uint32_t BoardSize(uint32_t max_rails) {
  return static_cast<uint32_t>(sizeof(BoardHeader) + max_rails * sizeof(RailSlot));
}

}  // namespace rr::rails
