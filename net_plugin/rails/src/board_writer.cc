// rerail — rail-health board writer (contract in board.h, layout in board_layout.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>

#include "rerail/clock.h"
#include "rerail/log.h"
#include "rerail/params.h"
#include "rerail/rails/board.h"

namespace rr::rails {
namespace {

bool ValidTag(const std::string& tag) {
  if (tag.empty() || tag.size() >= sizeof(BoardHeader::tag)) return false;
  for (char c : tag)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

uint64_t NetnsInode() {
  struct stat st;
  return stat("/proc/self/ns/net", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

void ReadComm(char* dst, size_t n) {
  std::ifstream f("/proc/self/comm");
  std::string comm;
  std::getline(f, comm);
  snprintf(dst, n, "%s", comm.c_str());
}

uint64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void InitHeader(BoardHeader* h, const std::string& tag) {
  new (h) BoardHeader{};  // zero every field, atomics included
  h->version = kBoardVersion;
  h->total_size = BoardSize(kBoardMaxRails);
  h->header_size = sizeof(BoardHeader);
  h->slot_size = sizeof(RailSlot);
  h->max_rails = kBoardMaxRails;
  h->pid = static_cast<int32_t>(getpid());
  h->pid_start_ticks = ProcessStartTicks(getpid());
  h->netns_inode = NetnsInode();
  h->created_realtime_ns = RealtimeNs();
  h->heartbeat_ns.store(NowNs(), std::memory_order_relaxed);
  ReadComm(h->comm, sizeof(h->comm));
  snprintf(h->tag, sizeof(h->tag), "%s", tag.c_str());
}

}  // namespace

Status BoardWriter::Create(const std::string& tag, std::unique_ptr<BoardWriter>* out, const std::string& dir_arg) {
  if (!ValidTag(tag)) return Status::InvalidArg("board tag '" + tag + "' must be 1-15 of [A-Za-z0-9_-]");
  std::string dir = dir_arg.empty() ? Params::Str(ParamId::BoardDir) : dir_arg;
  ScanResult stale = ScanBoards(dir, /*remove_stale=*/true);
  for (const auto& p : stale.removed) RR_INFO(log::kFlagNet | log::kFlagInit, "removed stale rail-health board %s", p.c_str());

  std::unique_ptr<BoardWriter> w(new BoardWriter());
  std::string name = std::string(kBoardFilePrefix) + std::to_string(getpid()) + "." + tag;
  w->path_ = dir + "/" + name;
  std::string tmp = dir + "/." + name + ".tmp";
  w->size_ = BoardSize(kBoardMaxRails);

  int fd = open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::System("rail-health board: open(" + tmp + ")");
  if (ftruncate(fd, static_cast<off_t>(w->size_)) != 0) {
    Status s = Status::System("rail-health board: ftruncate(" + tmp + ")");
    close(fd);
    unlink(tmp.c_str());
    return s;
  }
  void* base = mmap(nullptr, w->size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    Status s = Status::System("rail-health board: mmap(" + tmp + ")");
    unlink(tmp.c_str());
    return s;
  }
  w->base_ = base;
  auto* h = static_cast<BoardHeader*>(base);
  InitHeader(h, tag);
  auto* slots = reinterpret_cast<RailSlot*>(h + 1);
  for (uint32_t i = 0; i < kBoardMaxRails; ++i) new (&slots[i]) RailSlot{};
  h->magic.store(kBoardMagic, std::memory_order_release);
  // NOREPLACE: a second board with the same tag in this process must not silently take the first's
  // place (the first one's destructor would then unlink the second's file).
  if (renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, w->path_.c_str(), RENAME_NOREPLACE) != 0) {
    Status s = errno == EEXIST ? Status::InvalidUsage("rail-health board " + w->path_ +
                                                      " already exists: one board per tag per process")
                               : Status::System("rail-health board: rename(" + tmp + ", " + w->path_ + ")");
    unlink(tmp.c_str());
    munmap(w->base_, w->size_);
    w->base_ = nullptr;  // the destructor must not unlink the existing board
    return s;
  }
  RR_INFO(log::kFlagNet | log::kFlagInit, "rail-health board %s (layout v%u, %u rails max)", w->path_.c_str(),
          kBoardVersion, kBoardMaxRails);
  *out = std::move(w);
  return Status::Ok();
}

BoardWriter::~BoardWriter() {
  if (base_ != nullptr) {
    munmap(base_, size_);
    unlink(path_.c_str());
  }
}

int BoardWriter::num_rails() const {
  return static_cast<int>(static_cast<const BoardHeader*>(base_)->num_rails.load(std::memory_order_acquire));
}

Status BoardWriter::AddRail(const std::string& name, int* index) {
  std::lock_guard<std::mutex> lock(mu_);
  auto* h = static_cast<BoardHeader*>(base_);
  uint32_t n = h->num_rails.load(std::memory_order_relaxed);
  if (n >= kBoardMaxRails)
    return Status::InvalidUsage("rail-health board is full (" + std::to_string(kBoardMaxRails) + " rails)");
  RailSlot* s = reinterpret_cast<RailSlot*>(h + 1) + n;
  s->index = n;
  snprintf(s->name, sizeof(s->name), "%s", name.c_str());
  uint64_t now = NowNs();
  s->state.store(static_cast<uint32_t>(RailState::kHealthy), std::memory_order_relaxed);
  s->state_since_ns.store(now, std::memory_order_relaxed);
  s->updated_ns.store(now, std::memory_order_relaxed);
  h->num_rails.store(n + 1, std::memory_order_release);
  *index = static_cast<int>(n);
  return Status::Ok();
}

RailState BoardWriter::State(int rail) const {
  const auto* h = static_cast<const BoardHeader*>(base_);
  if (h == nullptr || rail < 0 || static_cast<uint32_t>(rail) >= h->num_rails.load(std::memory_order_acquire))
    return RailState::kPermanentlyFailed;
  const auto* slots = reinterpret_cast<const RailSlot*>(static_cast<const char*>(base_) + sizeof(BoardHeader));
  return static_cast<RailState>(slots[rail].state.load(std::memory_order_relaxed));
}

RailSlot* BoardWriter::Slot(int rail) { return Slot(rail, NowNs()); }

RailSlot* BoardWriter::Slot(int rail, uint64_t now) {
  auto* h = static_cast<BoardHeader*>(base_);
  if (rail < 0 || static_cast<uint32_t>(rail) >= h->num_rails.load(std::memory_order_acquire)) {
    if (!warned_range_) {
      warned_range_ = true;  // benign race: at worst two WARN lines
      RR_WARN("rail-health board %s: rail index %d out of range; ignored", path_.c_str(), rail);
    }
    return nullptr;
  }
  h->heartbeat_ns.store(now, std::memory_order_relaxed);
  RailSlot* s = reinterpret_cast<RailSlot*>(h + 1) + rail;
  s->updated_ns.store(now, std::memory_order_relaxed);
  return s;
}

void BoardWriter::SetState(int rail, RailState st, RailEvent why) {
  std::lock_guard<std::mutex> lock(mu_);
  RailSlot* s = Slot(rail);
  if (s == nullptr) return;
  uint32_t seq = s->seq.load(std::memory_order_relaxed);
  s->seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // odd seq is visible before the new fields
  s->state.store(static_cast<uint32_t>(st), std::memory_order_relaxed);
  s->reason.store(static_cast<uint32_t>(why), std::memory_order_relaxed);
  s->state_since_ns.store(NowNs(), std::memory_order_relaxed);
  s->seq.store(seq + 2, std::memory_order_release);
  s->transitions.fetch_add(1, std::memory_order_relaxed);
}

void BoardWriter::SetBandwidth(int rail, uint64_t bps) {
  if (RailSlot* s = Slot(rail)) s->bw_estimate_bps.store(bps, std::memory_order_relaxed);
}

void BoardWriter::AddBytes(int rail, uint64_t sent, uint64_t recv) { AddBytes(rail, sent, recv, NowNs()); }

void BoardWriter::AddBytes(int rail, uint64_t sent, uint64_t recv, uint64_t now) {
  if (RailSlot* s = Slot(rail, now)) {
    if (sent) s->bytes_sent.fetch_add(sent, std::memory_order_relaxed);
    if (recv) s->bytes_recv.fetch_add(recv, std::memory_order_relaxed);
  }
}

void BoardWriter::AddRetransmit(int rail, uint64_t chunks, uint64_t bytes) {
  if (RailSlot* s = Slot(rail)) {
    s->retransmit_chunks.fetch_add(chunks, std::memory_order_relaxed);
    s->retransmit_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
}

void BoardWriter::CountFailover(int rail) {
  if (RailSlot* s = Slot(rail)) s->failovers.fetch_add(1, std::memory_order_relaxed);
}

void BoardWriter::CountFailback(int rail) {
  if (RailSlot* s = Slot(rail)) s->failbacks.fetch_add(1, std::memory_order_relaxed);
}

void BoardWriter::CountLinkDown(int rail) {
  if (RailSlot* s = Slot(rail)) s->link_down_events.fetch_add(1, std::memory_order_relaxed);
}

void BoardWriter::Touch() {
  static_cast<BoardHeader*>(base_)->heartbeat_ns.store(NowNs(), std::memory_order_relaxed);
}

}  // namespace rr::rails
