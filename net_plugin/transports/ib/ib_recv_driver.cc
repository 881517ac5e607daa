#include "transports/ib/ib_recv_driver.h"

#include <cstring>

#include "rerail/log.h"

namespace rr::ib {

using net::Frame;
using net::RxAction;
using net::RxTracker;

namespace {
constexpr uint32_t kHdr = sizeof(Frame);
constexpr uint32_t kMaxChunk = 64u << 20;
constexpr size_t kMaxLinks = 16;  // RecvCore's limit
}  // namespace

IbRecvDriver::IbRecvDriver(net::RecvCore* core, std::vector<IbDevice*> rails, const IbLinkConfig& cfg)
    : core_(core), rails_(std::move(rails)), cfg_(cfg), links_(kMaxLinks), rail_down_(rails_.size(), false) {
  // links_ is fixed-size: references to its elements stay valid.
  if (cfg_.qp.max_recv < static_cast<uint32_t>(cfg_.recv_slots)) cfg_.qp.max_recv = static_cast<uint32_t>(cfg_.recv_slots);
  cfg_.stage_slots = 0;
  cfg_.stage_bytes = 0;
  stats_.rail_bytes.assign(rails_.size(), 0);
}

IbRecvDriver::~IbRecvDriver() = default;

void IbRecvDriver::OnRailEvent(int rail, bool down) {
  std::lock_guard<std::mutex> g(events_mu_);
  events_.emplace_back(rail, down);
}

Status IbRecvDriver::Accept(uint64_t now, const IbLinkHello& h, IbLinkHello* answer) {
  const bool grouped = h.version == kIbHelloVersionGrouped && (h.flags & kIbHelloFlagGrouped) != 0;
  if (h.magic == kIbHelloMagic && h.version != kIbHelloVersion && !grouped) {
    return Status::Remote("IB link handshake refused: the sender speaks IB hello version " + std::to_string(h.version) +
                          ", this rerail " + std::to_string(kIbHelloVersion) + " (" +
                          std::to_string(kIbHelloVersionGrouped) + " with grouped receives; use one rerail build on every node)");
  }
  if (h.magic != kIbHelloMagic || (h.version != kIbHelloVersion && !grouped) || h.link >= kMaxLinks || h.streams < 1 || h.streams > net::kMaxStreams ||
      h.peer_rail >= rails_.size() || h.chunk == 0 || h.chunk > kMaxChunk || h.conn_id != core_->conn_id()) {
    return Status::Remote("IB link handshake refused: bad hello");
  }
  ApplyRailEvents(now);
  if (rail_down_[h.peer_rail]) {
    return Status::Remote("IB link " + std::to_string(h.link) + " refused: port " + rails_[h.peer_rail]->port().name +
                          " is down (port event)");
  }
  Link& l = links_[h.link];
  if (l.ib && (l.rail != h.peer_rail || l.ib->streams() != h.streams || l.chunk != h.chunk)) l.ib.reset();
  l.up = false;
  l.heard = false;
  l.out.clear();
  for (size_t i = 0; i < held_.size();) {
    if (held_[i].link == h.link) held_.erase(held_.begin() + static_cast<long>(i));
    else ++i;
  }
  if (!l.ib) {
    IbLinkConfig c = cfg_;
    c.streams = h.streams;
    c.recv_streams = h.streams;
    c.recv_bytes = kHdr + h.chunk;
    RR_CHECK(IbLink::Create(*rails_[h.peer_rail], c, &l.ib));
    l.rail = h.peer_rail;
    l.chunk = h.chunk;
  }
  RR_CHECK(l.ib->Connect(h.ep, h.recv_slots));  // receives are posted before the answer leaves
  core_->SetPeerGrouped(grouped);  // the sender's mode: it announces every receive to a grouped sender
  std::string name = "ib " + rails_[h.peer_rail]->port().name + " link " + std::to_string(h.link) + ", " +
                     std::to_string(h.streams) + (h.streams == 1 ? " QP" : " QPs");
  if (!core_->OnLinkUp(now, h.link, h.epoch, h.peer_rail, h.streams, name)) {
    l.ib->Fail();
    return Status::Remote("IB link " + std::to_string(h.link) + " refused (stale epoch)");
  }
  l.up = true;
  // Every posted receive's CTS goes first on the new link: the acks it will carry cover them.
  for (uint64_t s = core_->completed(); s < core_->posted(); ++s) {
    const RxBuf& r = rx_[s % RxTracker::kWindow];
    if (r.seq == s) Queue(l, &r.cts, sizeof(r.cts));
  }
  *answer = IbLinkHello{};
  answer->magic = kIbHelloMagic;
  answer->version = kIbHelloVersion;
  answer->link = h.link;
  answer->streams = h.streams;
  answer->conn_id = h.conn_id;
  answer->epoch = h.epoch;
  answer->rail = h.peer_rail;
  answer->peer_rail = h.rail;
  answer->chunk = h.chunk;
  answer->recv_slots = l.ib->recv_slots();
  l.ib->Endpoints(answer->ep);
  return Status::Ok();
}

Status IbRecvDriver::Irecv(uint64_t now, void* buf, size_t cap, const MrHandle* mh, void* owner, bool* posted,
                           void** slot) {
  int tag = 0;
  return IrecvGroup(now, 1, &buf, &cap, &tag, mh != nullptr ? &mh : nullptr, owner, posted, slot);
}

// Each element is a receive of its own seq with its own CTS (core.h "Grouped receives"): the CTS is
// queued on every link before the core's kPosted announcement of it is pulled behind it (Progress),
// so a sender that took the seq on the announcement already has the address on that link.
Status IbRecvDriver::IrecvGroup(uint64_t now, int n, void* const* bufs, const size_t* caps, const int* tags,
                                const MrHandle* const* mhs, void* owner, bool* posted, void** slots) {
  *posted = false;
  for (int k = 0; k < n; ++k) {
    auto addr = reinterpret_cast<uintptr_t>(bufs[k]);
    const MrHandle* mh = mhs != nullptr ? mhs[k] : nullptr;
    if (caps[k] > 0 && (mh == nullptr || addr < mh->base || addr + caps[k] > mh->base + mh->len))
      return Status(Code::kInvalidUsage, "irecv buffer not registered");
  }
  uint64_t first = core_->posted();
  RR_CHECK(core_->IrecvGroup(now, n, bufs, caps, tags, owner, posted, slots));
  if (!*posted) return Status::Ok();
  for (int k = 0; k < n; ++k) {
    const uint64_t seq = first + static_cast<uint64_t>(k);
    const MrHandle* mh = mhs != nullptr ? mhs[k] : nullptr;
    RxBuf& r = rx_[seq % RxTracker::kWindow];
    r.seq = seq;
    r.buf = static_cast<uint8_t*>(bufs[k]);
    r.cap = caps[k];
    r.cts = IbCts{};
    r.cts.magic = kCtsMagic;
    r.cts.seq = seq;
    r.cts.addr = reinterpret_cast<uintptr_t>(bufs[k]);
    r.cts.cap = caps[k];
    r.cts.rails = static_cast<uint32_t>(std::min<size_t>(rails_.size(), kCtsRails));
    for (uint32_t q = 0; q < r.cts.rails && mh != nullptr && q < mh->keys.size(); ++q) r.cts.rkey[q] = mh->keys[q].rkey;
    for (size_t i = 0; i < links_.size(); ++i) {
      if (links_[i].up && core_->alive(static_cast<int>(i))) Queue(links_[i], &r.cts, sizeof(r.cts));
    }
  }
  if (!held_.empty()) RetryHeld(now);
  return Status::Ok();
}

void IbRecvDriver::Queue(Link& l, const void* p, uint32_t len) {
  Out o{};
  memcpy(o.bytes, p, len);
  o.len = len;
  l.out.push_back(o);
}

void IbRecvDriver::LinkError(uint64_t now, int idx, const std::string& why) {
  if (!links_[idx].up) return;
  core_->OnLinkError(now, idx, why, false);
  Guard();
}

void IbRecvDriver::OnPeerClosed(uint64_t now, const std::string& why) {
  for (size_t i = 0; i < links_.size(); ++i) {
    if (links_[i].up) core_->OnLinkError(now, static_cast<int>(i), why, true);
  }
  for (SideRecvLink* s : side_) {
    if (s->up()) core_->OnLinkError(now, s->link(), why, true);
  }
  Guard();
}

bool IbRecvDriver::Quiet() const {
  for (const Link& l : links_) {
    if (l.up && l.heard && (!l.out.empty() || l.ib->SendsPending())) return false;  // unheard: nothing can go
  }
  for (const SideRecvLink* s : side_) {
    if (!s->Quiet()) return false;
  }
  return true;
}

// The late-write guard (header): a link the core no longer has goes to ERR at once.
void IbRecvDriver::Guard() {
  for (size_t i = 0; i < links_.size(); ++i) {
    Link& l = links_[i];
    if (!l.up || core_->alive(static_cast<int>(i))) continue;
    l.ib->Fail();
    l.up = false;
    l.out.clear();
    ++stats_.guarded;
    dropped_.emplace_back(static_cast<int>(i), core_->epoch(static_cast<int>(i)));
    for (size_t k = 0; k < held_.size();) {
      if (held_[k].link == static_cast<int>(i)) held_.erase(held_.begin() + static_cast<long>(k));
      else ++k;
    }
  }
  for (SideRecvLink* s : side_) s->Sync();
}

bool IbRecvDriver::NextDropped(int* link, uint32_t* epoch) {
  if (dropped_.empty()) return false;
  *link = dropped_.front().first;
  *epoch = dropped_.front().second;
  dropped_.erase(dropped_.begin());
  return true;
}

void IbRecvDriver::ApplyRailEvents(uint64_t now) {
  std::vector<std::pair<int, bool>> evs;
  {
    std::lock_guard<std::mutex> g(events_mu_);
    evs.swap(events_);
  }
  for (const auto& [rail, down] : evs) {
    if (rail >= 0 && static_cast<size_t>(rail) < rail_down_.size()) rail_down_[rail] = down;
    core_->OnRail(now, rail, down);
  }
}

void IbRecvDriver::Progress(uint64_t now) {
  ApplyRailEvents(now);
  Guard();
  bool moved = false;
  for (size_t i = 0; i < links_.size(); ++i) {
    Link& l = links_[i];
    if (!l.ib) continue;
    evs_.clear();
    Status st = l.ib->Poll(&evs_);
    if (!st.ok()) {
      LinkError(now, static_cast<int>(i), st.message());
      continue;
    }
    for (const IbLink::Event& ev : evs_) {
      if (!l.up) break;  // dropped meanwhile: the rest are flushes or stale
      if (ev.kind == IbLink::Event::kRecv) {
        l.heard = true;
        OnRecv(now, static_cast<int>(i), ev);
        moved = true;
      } else if (ev.kind != IbLink::Event::kSendOk && ev.status != vx::kWcWrFlushErr) {
        ++stats_.wc_errors;
        LinkError(now, static_cast<int>(i), "WC error " + l.ib->WcName(ev.status) + " on stream " + std::to_string(ev.stream));
      }
    }
  }
  for (SideRecvLink* s : side_) {
    moved |= s->Read(now);
    Guard();  // a frame read may have been an IB link's notice, or the side link may have failed
  }
  if (core_->SampleDue(now)) {
    std::vector<net::LinkSample> samples(static_cast<size_t>(core_->links()));
    for (size_t i = 0; i < links_.size() && i < samples.size(); ++i) {
      if (links_[i].up) samples[i] = links_[i].ib->Sample();
    }
    for (SideRecvLink* s : side_) {
      if (static_cast<size_t>(s->link()) < samples.size()) samples[static_cast<size_t>(s->link())] = s->Sample();
    }
    core_->OnSamples(now, samples);
  }
  core_->Poll(now, !moved);
  Guard();
  for (size_t i = 0; i < links_.size(); ++i) {
    if (!links_[i].up) continue;
    Frame f;
    while (core_->NextControl(now, static_cast<int>(i), &f)) Queue(links_[i], &f, kHdr);
    FlushOut(now, static_cast<int>(i));
  }
  for (SideRecvLink* s : side_) s->Flush(now);
  Guard();  // a side link's write may have failed it
}

void IbRecvDriver::FlushOut(uint64_t now, int idx) {
  Link& l = links_[idx];
  if (!l.heard) return;  // the sender's QPs may not take SENDs yet (Link::heard)
  if (l.up && l.ib->CreditDue() && l.ib->CreditRoom()) {  // our bounce receives re-posted (ib_wire.h)
    IbCredit c;
    l.ib->FillCredit(&c);
    Status st = l.ib->PostInline(0, &c, sizeof(c));
    if (!st.ok()) return LinkError(now, idx, "post: " + st.message());
  }
  while (l.up && !l.out.empty() && l.ib->Room(0, 1)) {
    Status st = l.ib->PostInline(0, l.out.front().bytes, l.out.front().len);
    if (!st.ok()) return LinkError(now, idx, "post: " + st.message());
    l.out.pop_front();
  }
}

void IbRecvDriver::OnRecv(uint64_t now, int idx, const IbLink::Event& ev) {
  Link& l = links_[idx];
  // 48 bytes is also a Frame with an 8-byte payload (an eager chunk or a re-send, ib_wire.h).
  if (ev.stream == 0 && IsCreditRecord(ev.data, ev.len)) {
    IbCredit c;
    memcpy(&c, ev.data, sizeof(c));
    l.ib->Grant(c);
    Status st = l.ib->Repost(ev.stream, ev.slot);
    if (!st.ok()) LinkError(now, idx, st.message());
    return;
  }
  Frame h;
  if (ev.len < kHdr) return LinkError(now, idx, "protocol error: message of " + std::to_string(ev.len) + " bytes");
  memcpy(&h, ev.data, kHdr);
  uint32_t extra = ev.len - kHdr;
  if (extra != 0 && extra != h.len) return LinkError(now, idx, "protocol error: frame length mismatch");
  if (!Deliver(now, idx, ev.stream, h, extra != 0 ? ev.data + kHdr : nullptr)) {
    held_.push_back(Held{idx, ev.stream, ev.slot, h, ev.data + kHdr});
    return;
  }
  Guard();  // the frame may have been a link-down notice
  if (l.up) {
    Status st = l.ib->Repost(ev.stream, ev.slot);
    if (!st.ok()) LinkError(now, idx, st.message());
  }
}

bool IbRecvDriver::Deliver(uint64_t now, int idx, int stream, const Frame& h, const uint8_t* payload) {
  RxAction a = core_->OnFrame(now, idx, stream, h);
  switch (a.kind) {
    case RxAction::kPlace:
    case RxAction::kStash:
      if (payload != nullptr) {
        memcpy(a.dst, payload, a.len);  // host memory; GPU buffers come with the staged path (#9)
        ++stats_.placed_copied;
      } else {
        // Written by RDMA: it must be the posted buffer at the chunk's offset, as the CTS said.
        const RxBuf& r = rx_[h.seq % RxTracker::kWindow];
        uint8_t* landed = r.seq == h.seq ? r.buf + h.offset : nullptr;
        if (a.kind == RxAction::kStash || a.dst != landed) {
          (void)core_->Abort(Code::kInternalError, "chunk of message " + std::to_string(h.seq) + " at offset " +
                                                       std::to_string(h.offset) + " was written elsewhere than placed");
          return true;
        }
        ++stats_.placed_written;
      }
      if (int rail = links_[idx].rail; rail >= 0 && static_cast<size_t>(rail) < stats_.rail_bytes.size())
        stats_.rail_bytes[static_cast<size_t>(rail)] += a.len;
      core_->OnPayload(now, idx, stream);
      return true;
    case RxAction::kDiscard:
      ++stats_.discarded;
      core_->OnPayload(now, idx, stream);
      return true;
    case RxAction::kWait:
      if (payload != nullptr) return false;
      (void)core_->Abort(Code::kInternalError, "written chunk of message " + std::to_string(h.seq) + " with no receive");
      return true;
    default:
      return true;
  }
}

void IbRecvDriver::RetryHeld(uint64_t now) {
  std::vector<Held> todo;
  todo.swap(held_);
  for (const Held& w : todo) {
    if (!links_[w.link].up) continue;
    if (!Deliver(now, w.link, w.stream, w.hdr, w.payload)) {
      held_.push_back(w);
      continue;
    }
    Guard();
    if (links_[w.link].up) (void)links_[w.link].ib->Repost(w.stream, w.slot);
  }
}

bool IbRecvDriver::NextCompletion(net::Completion* out) {
  Guard();
  return core_->NextCompletion(out);
}

}  // namespace rr::ib
