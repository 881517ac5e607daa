// Rail health for the tuner (rail_view.h): registry first, then the board mapped read-only.
#include "rail_view.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rerail/rails/board_layout.h"
#include "rerail/rails/rail_health.h"
#include "rerail/tuner/health_link.h"

namespace rr::tuner {

using rails::BoardHeader;
using rails::RailSlot;
using rails::RailState;

const char* SourceName(SourceKind k) {
  switch (k) {
    case SourceKind::kNone: return "none";
    case SourceKind::kInProcess: return "net plugin (in process)";
    case SourceKind::kBoard: return "board";
  }
  return "?";
}

RailView Summarise(const uint32_t* states, int n, SourceKind kind) {
  RailView v;
  if (n <= 0) return v;  // a publisher without rails says nothing
  v.valid = true;
  v.source = kind;
  v.total = n;
  for (int i = 0; i < n; ++i) {
    if (states[i] < rails::kRailStateCount && rails::Carries(static_cast<RailState>(states[i]))) ++v.usable;
  }
  v.capacity = v.usable > 0 ? static_cast<double>(v.usable) / n : 0.0;
  return v;
}

std::string DefaultBoardPath(const std::string& board_dir) {
  std::string dir = board_dir.empty() ? "/dev/shm" : board_dir;
  if (dir.back() != '/') dir += '/';
  return dir + rails::kBoardFilePrefix + std::to_string(getpid()) + ".net";
}

RailSource::RailSource(uint64_t comm_id, std::string board_path) : comm_id_(comm_id), path_(std::move(board_path)) {}

RailSource::~RailSource() { UnmapBoard(); }

RailView RailSource::Read() {
  uint32_t states[rails::kBoardMaxRails];
  int n = ReadRailSource(comm_id_, states, static_cast<int>(rails::kBoardMaxRails));
  if (n > 0) return Summarise(states, n, SourceKind::kInProcess);
  n = ReadBoardStates(states, static_cast<int>(rails::kBoardMaxRails));
  return Summarise(states, n, SourceKind::kBoard);
}

bool RailSource::MapBoard() {
  if (path_.empty()) {
    problem_ = "no board path";
    return false;
  }
  int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    problem_ = std::string("cannot open: ") + strerror(errno);
    return false;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(BoardHeader))) {
    problem_ = "too small for a board header";
    close(fd);
    return false;
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    problem_ = std::string("mmap: ") + strerror(errno);
    close(fd);
    return false;
  }
  const auto* h = static_cast<const BoardHeader*>(base);
  const char* bad = nullptr;
  if (h->magic.load(std::memory_order_acquire) != rails::kBoardMagic) bad = "bad magic";
  else if (h->version != rails::kBoardVersion) bad = "other layout version";
  else if (h->header_size != sizeof(BoardHeader) || h->slot_size != sizeof(RailSlot)) bad = "other struct sizes";
  else if (h->max_rails > rails::kBoardMaxRails || h->total_size != rails::BoardSize(h->max_rails) ||
           h->total_size > size)
    bad = "sizes do not fit the file";
  if (bad != nullptr) {
    problem_ = std::string("not a board of layout v") + std::to_string(rails::kBoardVersion) + ": " + bad;
    munmap(base, size);
    close(fd);
    return false;
  }
  fd_ = fd;
  base_ = base;
  size_ = size;
  mapped_rails_ = h->max_rails;  // the slots the size check covered; the header may change later
  problem_.clear();
  return true;
}

void RailSource::UnmapBoard() {
  if (base_ != nullptr) munmap(const_cast<void*>(base_), size_);
  if (fd_ >= 0) close(fd_);
  base_ = nullptr;
  size_ = 0;
  mapped_rails_ = 0;
  fd_ = -1;
}

int RailSource::ReadBoardStates(uint32_t* states, int max) {
  if (base_ != nullptr) {
    struct stat st {};
    // Unlinked (the publisher finalized or the file was removed): drop it, look for a new one.
    if (fstat(fd_, &st) != 0 || st.st_nlink == 0) {
      UnmapBoard();
      problem_ = "board removed";
    }
  }
  if (base_ == nullptr && !MapBoard()) return 0;
  const auto* h = static_cast<const BoardHeader*>(base_);
  uint32_t n = h->num_rails.load(std::memory_order_acquire);
  // Clamp to the slots checked at map time, not to the live max_rails: a writer (another version,
  // or a hostile process) may raise it afterwards, and slots past the file would fault (SIGBUS).
  if (n > mapped_rails_) n = mapped_rails_;
  if (n > static_cast<uint32_t>(max)) n = static_cast<uint32_t>(max);
  const auto* slots = reinterpret_cast<const RailSlot*>(static_cast<const char*>(base_) + sizeof(BoardHeader));
  for (uint32_t i = 0; i < n; ++i) {
    const RailSlot& s = slots[i];
    uint32_t state = 0;
    // Seqlock read; a writer stopped mid-update leaves seq odd: after a few tries take what is there.
    for (int tries = 0; tries < 64; ++tries) {
      uint32_t s1 = s.seq.load(std::memory_order_acquire);
      state = s.state.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if ((s1 & 1u) == 0 && s.seq.load(std::memory_order_relaxed) == s1) break;
    }
    states[i] = state;
  }
  if (n == 0) problem_ = "the board lists no rails";
  return static_cast<int>(n);
}

}  // namespace rr::tuner
