#include "board_source.h"

#include <unistd.h>

#include "rerail/rails/board.h"

namespace rr::perf {

void BoardSource::Discover() {
  paths_.clear();
  rails::ScanResult scan = rails::ScanBoards("", /*remove_stale=*/false);
  for (const rails::BoardSnapshot& b : scan.boards)
    if (b.pid == getpid()) paths_.push_back(b.path);
}

void BoardSource::Sample(uint64_t now_ns, Timeline* tl, bool force) {
  if (paths_.empty() || (!force && now_ns - last_ns_ < tl->bin_ns() / 2)) return;
  last_ns_ = now_ns;
  uint64_t resent = 0;
  for (const std::string& p : paths_) {
    rails::BoardSnapshot snap;
    if (!rails::ReadBoard(p, &snap).ok()) continue;
    for (const rails::RailSnapshot& r : snap.rails) {
      uint64_t& last = last_sent_[p + "|" + r.name];
      if (r.bytes_sent > last) tl->AddNamed(r.name, r.bytes_sent - last, now_ns);
      last = r.bytes_sent;
      resent += r.retransmit_bytes;
    }
  }
  resent_ = resent;
}

}  // namespace rr::perf
