// libFuzzer target: the rail tables rerail reads from outside the process.
//   * even first byte: a rail-health board image (net_plugin/rails: ParseBoard, what ReadBoard and
//     ScanBoards apply to every /dev/shm/rerail-board.* file, written by processes that may run another
//     rerail version, be dying mid-update, or be hostile). Mode bits fix up magic, version, sizes and
//     seqlocks so the checks behind them are reached.
//     Invariants: accepted => every size field fits the image (ASan: the copy is exactly the input's
//     size, so no read may leave it), one snapshot per num_rails <= max_rails, names without NUL and
//     at most their field's size; re-encoding the snapshot as a board and parsing it gives it back.
//   * odd first byte: a rail list in RERAIL_TCP_IFNAME syntax (common/sock.h IfFilter), matched against
//     interface names taken from the input.
//     Invariants: "^list" matches exactly what "list" does not (when the list names something), an
//     exact list "=a,b" matches a and b (without ":port") and only them, a prefix list matches every
//     name it lists; Selects implies Match.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "rerail/rails/board.h"
#include "rerail/sock.h"

using namespace rr::rails;

namespace {

[[noreturn]] void Fail() { std::abort(); }

// Writes `b` as a board image of `max_rails` slots (what BoardWriter lays out), seqlocks even.
std::vector<uint64_t> Encode(const BoardSnapshot& b, uint32_t max_rails) {
  const size_t bytes = BoardSize(max_rails);
  std::vector<uint64_t> img((bytes + 7) / 8, 0);
  auto* h = reinterpret_cast<BoardHeader*>(img.data());
  h->magic.store(kBoardMagic);
  h->version = kBoardVersion;
  h->total_size = static_cast<uint32_t>(bytes);
  h->header_size = sizeof(BoardHeader);
  h->slot_size = sizeof(RailSlot);
  h->max_rails = max_rails;
  h->num_rails.store(static_cast<uint32_t>(b.rails.size()));
  h->pid = b.pid;
  h->netns_inode = b.netns_inode;
  h->created_realtime_ns = b.created_realtime_ns;
  h->heartbeat_ns.store(b.heartbeat_ns);
  std::memcpy(h->comm, b.comm.data(), b.comm.size());
  std::memcpy(h->tag, b.tag.data(), b.tag.size());
  auto* slots = reinterpret_cast<RailSlot*>(h + 1);
  for (size_t i = 0; i < b.rails.size(); ++i) {
    const RailSnapshot& r = b.rails[i];
    RailSlot& s = slots[i];
    s.index = static_cast<uint32_t>(r.index);
    std::memcpy(s.name, r.name.data(), r.name.size());
    s.state.store(static_cast<uint32_t>(r.state));
    s.reason.store(static_cast<uint32_t>(r.reason));
    s.state_since_ns.store(r.state_since_ns);
    s.bw_estimate_bps.store(r.bw_estimate_bps);
    s.bytes_sent.store(r.bytes_sent);
    s.bytes_recv.store(r.bytes_recv);
    s.retransmit_chunks.store(r.retransmit_chunks);
    s.retransmit_bytes.store(r.retransmit_bytes);
    s.failovers.store(r.failovers);
    s.failbacks.store(r.failbacks);
    s.link_down_events.store(r.link_down_events);
    s.transitions.store(r.transitions);
    s.updated_ns.store(r.updated_ns);
  }
  return img;
}

bool NameOk(const std::string& s, size_t field) { return s.size() <= field && s.find('\0') == std::string::npos; }

bool SameRail(const RailSnapshot& a, const RailSnapshot& b) {
  return a.index == b.index && a.name == b.name && a.state == b.state && a.reason == b.reason &&
         a.state_since_ns == b.state_since_ns && a.bw_estimate_bps == b.bw_estimate_bps &&
         a.bytes_sent == b.bytes_sent && a.bytes_recv == b.bytes_recv && a.retransmit_chunks == b.retransmit_chunks &&
         a.retransmit_bytes == b.retransmit_bytes && a.failovers == b.failovers && a.failbacks == b.failbacks &&
         a.link_down_events == b.link_down_events && a.transitions == b.transitions && a.updated_ns == b.updated_ns;
}

void FuzzBoard(uint8_t mode, const uint8_t* data, size_t size) {
  // An exact-size, 8-byte aligned copy: any read past `size` is an ASan report.
  std::unique_ptr<uint64_t[]> words(new uint64_t[(size + 7) / 8 + 1]);
  auto* img = reinterpret_cast<uint8_t*>(words.get());
  std::memcpy(img, data, size);
  std::unique_ptr<uint8_t[]> exact(new uint8_t[size == 0 ? 1 : size]);  // same bytes, exact bounds
  BoardHeader h{};
  if (size >= sizeof(BoardHeader)) {
    std::memcpy(&h, img, sizeof(h));
    if (mode & 2) h.magic.store(kBoardMagic), h.version = kBoardVersion;
    if (mode & 4) h.header_size = sizeof(BoardHeader), h.slot_size = sizeof(RailSlot);
    if (mode & 8) h.total_size = BoardSize(h.max_rails);  // what a writer would store (32-bit field)
    if (mode & 16) h.max_rails %= 64;
    if (mode & 32) h.num_rails.store(h.num_rails.load() % 8);
    std::memcpy(img, &h, sizeof(h));
    if (mode & 64)  // seqlocks of the slots that lie inside the image: even
      for (size_t off = sizeof(BoardHeader); off + sizeof(RailSlot) <= size; off += sizeof(RailSlot)) img[off] &= 0xfe;
  }
  // ParseBoard wants 8-byte alignment; operator new[] gives 16 (and ASan keeps the bounds exact).
  std::memcpy(exact.get(), img, size);
  BoardSnapshot b;
  rr::Status st = ParseBoard(exact.get(), size, "fuzz", &b, /*seqlock_patience_ns=*/0);
  if (!st.ok()) {
    if (st.message().empty()) Fail();
    return;
  }
  std::memcpy(&h, img, sizeof(h));
  const uint64_t need = sizeof(BoardHeader) + uint64_t{h.num_rails.load()} * sizeof(RailSlot);
  if (need > size || h.num_rails.load() > h.max_rails || b.rails.size() != h.num_rails.load()) Fail();
  if (uint64_t{h.total_size} > size) Fail();
  if (!NameOk(b.comm, sizeof(h.comm)) || !NameOk(b.tag, sizeof(h.tag)) || b.alive) Fail();
  for (const RailSnapshot& r : b.rails)
    if (!NameOk(r.name, sizeof(RailSlot::name))) Fail();
  // Round trip: the snapshot re-encoded parses to itself (no slot torn: the copy has even seqlocks).
  const uint32_t max_rails = static_cast<uint32_t>(b.rails.size());
  std::vector<uint64_t> again = Encode(b, max_rails);
  BoardSnapshot c;
  if (!ParseBoard(again.data(), BoardSize(max_rails), "again", &c, 0).ok()) Fail();
  if (c.pid != b.pid || c.comm != b.comm || c.tag != b.tag || c.netns_inode != b.netns_inode ||
      c.created_realtime_ns != b.created_realtime_ns || c.heartbeat_ns != b.heartbeat_ns ||
      c.rails.size() != b.rails.size())
    Fail();
  for (size_t i = 0; i < b.rails.size(); ++i)
    if (c.rails[i].torn || !SameRail(b.rails[i], c.rails[i])) Fail();
}

void FuzzIfList(const uint8_t* data, size_t size) {
  // "<list>\n<name>\n<name>...": the list, then interface names to match.
  std::string text(reinterpret_cast<const char*>(data), size);
  size_t nl = text.find('\n');
  std::string list = text.substr(0, nl);
  std::vector<std::string> names;
  for (size_t pos = nl; pos != std::string::npos && pos < text.size();) {
    size_t next = text.find('\n', pos + 1);
    names.push_back(text.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1));
    pos = next;
  }
  rr::sock::IfFilter f(list);
  // The list's own items (without the ':port' suffix), as IfFilter documents the syntax.
  std::string body = list;
  bool exclude = !body.empty() && body[0] == '^';
  if (exclude) body.erase(0, 1);
  bool exact = !body.empty() && body[0] == '=';
  if (exact) body.erase(0, 1);
  std::vector<std::string> items;
  for (size_t pos = 0; pos <= body.size();) {
    size_t comma = body.find(',', pos);
    std::string item = body.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    item = item.substr(0, item.find(':'));
    if (!item.empty()) items.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (f.empty() != items.empty()) Fail();
  for (const auto& it : items) names.push_back(it);
  // Built once: per name it made the target quadratic in the input (4 KiB of newlines: ~1.5 k execs/s).
  const rr::sock::IfFilter inverse("^" + list);
  for (const auto& n : names) {
    const bool m = f.Match(n);
    if (f.Selects(n) && !m) Fail();
    if (items.empty()) {
      if (!m) Fail();  // an empty list matches everything
      continue;
    }
    bool listed = false;
    for (const auto& it : items) listed |= exact ? n == it : n.compare(0, it.size(), it) == 0;
    if (m != (exclude ? !listed : listed)) Fail();
    if (!exclude && inverse.Match(n) == m) Fail();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  if (mode & 1) FuzzIfList(data + 1, size - 1);
  else FuzzBoard(mode, data + 1, size - 1);
  return 0;
}
