// rerail — rail-health board readers and stale-board cleanup (contract in board.h).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "rerail/clock.h"
#include "rerail/params.h"
#include "rerail/rails/board.h"

namespace rr::rails {
namespace {

std::string FixedString(const char* s, size_t n) { return std::string(s, strnlen(s, n)); }

// A writer preempted in mid-update (odd seq) keeps readers waiting; on a loaded host that can last
// milliseconds, so the bound is in time, and only a writer that died mid-update exhausts it.
RailSnapshot ReadSlot(const RailSlot& s, uint64_t patience_ns) {
  RailSnapshot r;
  r.index = static_cast<int>(s.index);
  r.name = FixedString(s.name, sizeof(s.name));
  r.torn = true;
  const uint64_t give_up = patience_ns == 0 ? 0 : NowNs() + patience_ns;
  for (int i = 0;; ++i) {
    uint32_t s1 = s.seq.load(std::memory_order_acquire);
    r.state = static_cast<RailState>(s.state.load(std::memory_order_relaxed));
    r.reason = static_cast<RailEvent>(s.reason.load(std::memory_order_relaxed));
    r.state_since_ns = s.state_since_ns.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);  // field loads complete before re-reading seq
    uint32_t s2 = s.seq.load(std::memory_order_relaxed);
    if ((s1 & 1u) == 0 && s1 == s2) {
      r.torn = false;
      break;
    }
    if (patience_ns == 0 || (i > 64 && NowNs() > give_up)) break;
    if (i > 16) usleep(i > 64 ? 50 : 0);
  }
  r.bw_estimate_bps = s.bw_estimate_bps.load(std::memory_order_relaxed);
  r.bytes_sent = s.bytes_sent.load(std::memory_order_relaxed);
  r.bytes_recv = s.bytes_recv.load(std::memory_order_relaxed);
  r.retransmit_chunks = s.retransmit_chunks.load(std::memory_order_relaxed);
  r.retransmit_bytes = s.retransmit_bytes.load(std::memory_order_relaxed);
  r.failovers = s.failovers.load(std::memory_order_relaxed);
  r.failbacks = s.failbacks.load(std::memory_order_relaxed);
  r.link_down_events = s.link_down_events.load(std::memory_order_relaxed);
  r.transitions = s.transitions.load(std::memory_order_relaxed);
  r.updated_ns = s.updated_ns.load(std::memory_order_relaxed);
  return r;
}

// Checks the self-description of a mapped board; empty string when it is one we can read.
std::string CheckHeader(const BoardHeader& h, size_t file_size) {
  if (h.magic.load(std::memory_order_acquire) != kBoardMagic) return "bad magic (not a rerail board)";
  if (h.version != kBoardVersion)
    return "layout version " + std::to_string(h.version) + ", this reader knows " + std::to_string(kBoardVersion);
  if (h.header_size != sizeof(BoardHeader) || h.slot_size != sizeof(RailSlot)) return "header/slot size mismatch";
  // 64-bit: a hostile max_rails must not wrap the product back into the file (found by fuzz_rails).
  const uint64_t want = sizeof(BoardHeader) + uint64_t{h.max_rails} * sizeof(RailSlot);
  if (h.total_size != want || want > file_size) return "size fields do not fit the file";
  if (h.num_rails.load(std::memory_order_acquire) > h.max_rails) return "num_rails > max_rails";
  return "";
}

// pid from "rerail-board.<pid>.<tag>", 0 when the name does not parse.
pid_t PidFromName(const std::string& name) {
  const size_t plen = strlen(kBoardFilePrefix);
  if (name.compare(0, plen, kBoardFilePrefix) != 0) return 0;
  char* end = nullptr;
  long v = strtol(name.c_str() + plen, &end, 10);
  return (v > 0 && end != nullptr && *end == '.') ? static_cast<pid_t>(v) : 0;
}

}  // namespace

uint64_t ProcessStartTicks(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return 0;
  size_t rp = line.rfind(')');  // comm may hold spaces and ')'; fields resume after the last ')'
  if (rp == std::string::npos) return 0;
  std::istringstream rest(line.substr(rp + 2));
  std::string field;
  for (int i = 3; i <= 22 && (rest >> field); ++i)
    if (i == 22) return strtoull(field.c_str(), nullptr, 10);
  return 0;
}

bool ProcessAlive(pid_t pid, uint64_t start_ticks) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  if (start_ticks == 0) return true;
  uint64_t now = ProcessStartTicks(pid);
  return now == 0 || now == start_ticks;  // unreadable /proc: assume alive rather than delete
}

Status ParseBoard(const void* base, size_t size, const std::string& path, BoardSnapshot* out,
                  uint64_t seqlock_patience_ns) {
  if (size < sizeof(BoardHeader)) return Status::InvalidArg(path + ": too small to be a rail-health board");
  const auto* h = static_cast<const BoardHeader*>(base);
  std::string bad = CheckHeader(*h, size);
  if (!bad.empty()) return Status::InvalidArg(path + ": " + bad);
  BoardSnapshot b;
  b.path = path;
  b.pid = h->pid;
  b.comm = FixedString(h->comm, sizeof(h->comm));
  b.tag = FixedString(h->tag, sizeof(h->tag));
  b.netns_inode = h->netns_inode;
  b.created_realtime_ns = h->created_realtime_ns;
  b.heartbeat_ns = h->heartbeat_ns.load(std::memory_order_relaxed);
  const auto* slots = reinterpret_cast<const RailSlot*>(h + 1);
  uint32_t n = h->num_rails.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) b.rails.push_back(ReadSlot(slots[i], seqlock_patience_ns));
  *out = std::move(b);
  return Status::Ok();
}

Status ReadBoard(const std::string& path, BoardSnapshot* out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::System("open(" + path + ")");
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(BoardHeader)) {
    close(fd);
    return Status::InvalidArg(path + ": too small to be a rail-health board");
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return Status::System("mmap(" + path + ")");
  BoardSnapshot b;
  Status s = ParseBoard(base, size, path, &b);
  if (s.ok()) {
    const auto* h = static_cast<const BoardHeader*>(base);
    b.alive = ProcessAlive(h->pid, h->pid_start_ticks);
  }
  munmap(base, size);
  if (!s.ok()) return s;
  *out = std::move(b);
  return Status::Ok();
}

ScanResult ScanBoards(const std::string& dir_arg, bool remove_stale) {
  ScanResult res;
  std::string dir = dir_arg.empty() ? Params::Str(ParamId::BoardDir) : dir_arg;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    res.errors.push_back(dir + ": " + strerror(errno));
    return res;
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, strlen(kBoardFilePrefix), kBoardFilePrefix) == 0) names.push_back(name);
    // ".rerail-board.<pid>.<tag>.tmp": a writer died between create and rename.
    if (remove_stale && name.size() > 1 && name[0] == '.' && PidFromName(name.substr(1)) != 0 &&
        !ProcessAlive(PidFromName(name.substr(1)), 0) && unlink((dir + "/" + name).c_str()) == 0)
      res.removed.push_back(dir + "/" + name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    std::string path = dir + "/" + name;
    BoardSnapshot b;
    Status s = ReadBoard(path, &b);
    bool stale = s.ok() ? !b.alive : (PidFromName(name) != 0 && !ProcessAlive(PidFromName(name), 0));
    if (stale && remove_stale) {
      if (unlink(path.c_str()) == 0) res.removed.push_back(path);
      continue;
    }
    if (!s.ok()) {
      res.errors.push_back(s.message());
      continue;
    }
    res.boards.push_back(std::move(b));
  }
  std::sort(res.boards.begin(), res.boards.end(),
            [](const BoardSnapshot& a, const BoardSnapshot& b) { return a.pid < b.pid; });
  return res;
}

}  // namespace rr::rails
