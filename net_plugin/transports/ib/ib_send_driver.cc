#include "transports/ib/ib_send_driver.h"

#include <cstring>

#include "rerail/log.h"

namespace rr::ib {

using net::Frame;
using net::FrameType;
using net::RxTracker;

namespace {
constexpr uint32_t kHdr = sizeof(Frame);
constexpr int kCtlSlots = 64;  // receives for the receiver's control frames and CTS records (stream 0)
}  // namespace

IbSendDriver::IbSendDriver(net::SendCore* core, std::vector<IbSendLinkSpec> links, const IbLinkConfig& cfg,
                           uint32_t chunk, IbDialer* dialer)
    : core_(core), links_(links.size()), cfg_(cfg), chunk_(chunk), dialer_(dialer) {
  for (size_t i = 0; i < links.size(); ++i) {
    links_[i].spec = links[i];
    links_[i].fence.resize(static_cast<size_t>(cfg.streams));
    if (links[i].rail >= 0 && static_cast<size_t>(links[i].rail) >= stats_.rail_bytes.size())
      stats_.rail_bytes.resize(static_cast<size_t>(links[i].rail) + 1);
  }
  cfg_.recv_streams = 1;
  cfg_.recv_slots = kCtlSlots;
  cfg_.recv_bytes = sizeof(IbCts);
  if (cfg_.qp.max_recv < static_cast<uint32_t>(kCtlSlots)) cfg_.qp.max_recv = kCtlSlots;
  if (cfg_.stage_slots < 1) cfg_.stage_slots = 16;
  cfg_.stage_bytes = kHdr + chunk;
}

IbSendDriver::~IbSendDriver() = default;

std::vector<Frame> FailedLinkNotices(const net::SendCore& core, int except) {
  std::vector<Frame> out;
  for (int j = 0; j < core.links(); ++j) {
    if (j == except || core.usable(j) || core.epoch(j) == 0) continue;
    out.push_back(Frame{net::FrameMagic(FrameType::kLinkDown), 0, static_cast<uint32_t>(core.conn_id()), core.epoch(j),
                        static_cast<uint64_t>(j), 0, 0});
  }
  return out;
}

void IbSendDriver::AddSideLink(std::unique_ptr<SideSendLink> side) {
  side->Bind(core_, static_cast<int>(links_.size() + side_.size()), this);
  side_.push_back(std::move(side));
}

bool IbSendDriver::NextTx(uint64_t now, int link, net::TxFrame* out) {
  if (!core_->NextTx(now, link, out)) return false;
  if (net::TypeOf(out->hdr) == FrameType::kData) IsFresh(out->hdr);
  return true;
}

Status IbSendDriver::Isend(uint64_t now, const void* data, size_t size, const MrHandle* mh, void* owner, bool* posted,
                           int tag) {
  RR_CHECK(core_->Isend(now, data, size, owner, posted, tag));
  const uint64_t seq = core_->last_seq();  // grouped mode: the element the tag matched, not the next seq
  if (*posted) tx_[seq % RxTracker::kWindow] = TxBuf{seq, static_cast<const uint8_t*>(data), size, mh};
  return Status::Ok();
}

void IbSendDriver::OnRailEvent(int rail, bool down) {
  std::lock_guard<std::mutex> g(events_mu_);
  events_.emplace_back(rail, down);
}

void IbSendDriver::OnPeerClosed(uint64_t now, const std::string& why) {
  for (auto& l : links_) l.dialing = false;
  for (int i = 0; i < core_->links(); ++i) {
    core_->OnLinkError(now, i, why, true);  // a link already failed is not counted again
  }
  DrainCommands(now);
}

void IbSendDriver::LinkError(uint64_t now, int idx, const std::string& why) {
  if (!links_[idx].up) return;
  core_->OnLinkError(now, idx, why, false);
  DrainCommands(now);
}

void IbSendDriver::PollCompletions(uint64_t now) {
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
      if (!l.up) break;  // closed meanwhile: the rest are its flushes
      switch (ev.kind) {
        case IbLink::Event::kSendOk:
          break;
        case IbLink::Event::kRecv:
          OnRecv(now, static_cast<int>(i), ev);
          break;
        case IbLink::Event::kSendError:
        case IbLink::Event::kRecvError:
          if (ev.status == vx::kWcWrFlushErr) break;  // after the error that failed the link
          ++stats_.wc_errors;
          LinkError(now, static_cast<int>(i), "WC error " + l.ib->WcName(ev.status) + " on stream " +
                                                  std::to_string(ev.stream));
          break;
      }
    }
  }
}

void IbSendDriver::OnRecv(uint64_t now, int idx, const IbLink::Event& ev) {
  Link& l = links_[idx];
  if (IsCreditRecord(ev.data, ev.len)) {
    IbCredit c;
    memcpy(&c, ev.data, sizeof(c));
    l.ib->Grant(c);
  } else if (ev.len == sizeof(IbCts)) {
    IbCts c;
    memcpy(&c, ev.data, sizeof(c));
    if (c.magic != kCtsMagic) return LinkError(now, idx, "protocol error: bad CTS record");
    IbCts& slot = cts_[c.seq % RxTracker::kWindow];
    if (slot.magic != kCtsMagic || c.seq >= slot.seq) slot = c;  // re-publications repeat it
  } else if (ev.len == kHdr) {
    Frame f;
    memcpy(&f, ev.data, sizeof(f));
    core_->OnControl(now, idx, f);
    DrainCommands(now);
  } else {
    return LinkError(now, idx, "protocol error: control message of " + std::to_string(ev.len) + " bytes");
  }
  if (l.up) {
    Status st = l.ib->Repost(ev.stream, ev.slot);
    if (!st.ok()) LinkError(now, idx, st.message());
  }
}

void IbSendDriver::DrainCommands(uint64_t now) {
  net::LinkCommand c;
  while (core_->NextCommand(&c)) {
    SideSendLink* side = Side(c.link);
    if (c.kind == net::LinkCommand::kConnect) {
      if (side != nullptr) side->Connect(now, c.epoch);
      else Connect(now, c.link, c.epoch);
    } else {
      Close(c.link, c.notice);
    }
  }
}

void IbSendDriver::Connect(uint64_t now, int idx, uint32_t epoch) {
  Link& l = links_[idx];
  l.up = false;
  l.dialing = false;
  for (auto& q : l.fence) q.clear();
  Status st = l.ib ? Status::Ok() : IbLink::Create(*l.spec.dev, cfg_, &l.ib);
  if (st.ok()) st = l.ib->Prepare();
  IbLinkHello hello{}, answer{};
  bool answered = false;
  if (st.ok()) {
    hello.magic = kIbHelloMagic;
    hello.version = core_->grouped() ? kIbHelloVersionGrouped : kIbHelloVersion;
    hello.flags = static_cast<uint16_t>((core_->grouped() ? kIbHelloFlagGrouped : 0) | (side_.empty() ? 0 : kIbHelloFlagTcpLink));
    hello.link = static_cast<uint8_t>(idx);
    hello.streams = static_cast<uint8_t>(cfg_.streams);
    hello.conn_id = core_->conn_id();
    hello.epoch = epoch;
    hello.rail = static_cast<uint8_t>(l.spec.rail);
    hello.peer_rail = static_cast<uint8_t>(l.spec.peer_rail);
    hello.chunk = chunk_;
    hello.recv_slots = l.ib->recv_slots();
    l.ib->Endpoints(hello.ep);
    st = dialer_->Dial(now, hello, &answer, &answered);
  }
  if (!st.ok()) return ConnectFailed(now, idx, st);
  l.dialing = true;
  l.dial_epoch = epoch;
  if (answered) Answered(now, idx, answer);
}

void IbSendDriver::PollDials(uint64_t now) {
  for (size_t i = 0; i < links_.size(); ++i) {
    int idx = static_cast<int>(i);
    while (links_[i].dialing) {
      IbLinkHello answer{};
      bool answered = false;
      Status st = dialer_->Poll(now, idx, &answer, &answered);
      if (!st.ok()) {
        ConnectFailed(now, idx, st);
        break;
      }
      if (!answered) break;
      if (answer.link == idx && answer.epoch != links_[i].dial_epoch) continue;  // a stale answer
      Answered(now, idx, answer);
    }
  }
}

void IbSendDriver::ConnectFailed(uint64_t now, int idx, const Status& st) {
  Link& l = links_[idx];
  l.dialing = false;
  if (l.ib) l.ib->Fail();
  core_->OnConnectFailed(now, idx, st.message());
}

void IbSendDriver::Answered(uint64_t now, int idx, const IbLinkHello& answer) {
  Link& l = links_[idx];
  l.dialing = false;
  Status st;
  if (answer.magic != kIbHelloMagic || answer.link != idx || answer.streams != cfg_.streams ||
      answer.epoch != l.dial_epoch || answer.rail >= kCtsRails) {
    st = Status::Remote("handshake refused or malformed answer");
  }
  if (st.ok()) st = l.ib->Connect(answer.ep, answer.recv_slots);
  if (!st.ok()) return ConnectFailed(now, idx, st);
  l.peer_rail = answer.rail;
  l.up = true;
  ++stats_.connects;
  // We speak first: the receiver posts nothing on a new link until a message of ours arrived there
  // (our QPs are past RTR then, IbRecvDriver::Link::heard). A heartbeat (len 0: no action) does it.
  l.fence[0].push_back(Frame{net::FrameMagic(FrameType::kHeartbeat), 0, static_cast<uint32_t>(core_->conn_id()),
                             l.dial_epoch, 0, 0, 0});
  // Fence: notices of every link failed now go first on each stream of this one (see the header).
  for (const Frame& n : FailedLinkNotices(*core_, idx)) {
    for (auto& q : l.fence) q.push_back(n);
  }
  core_->OnLinkUp(now, idx);
}

void IbSendDriver::Close(int idx, const Frame& notice) {
  if (SideSendLink* side = Side(idx)) {
    side->Close(notice);
  } else {
    Link& l = links_[idx];
    if (l.ib) l.ib->Fail();  // no retransmission of its WRs after this
    l.up = false;
    l.dialing = false;  // an answer still on its way is stale now
    for (auto& q : l.fence) q.clear();
  }
  for (size_t j = 0; j < links_.size(); ++j) {
    if (static_cast<int>(j) == idx || !links_[j].up) continue;
    for (auto& q : links_[j].fence) q.push_back(notice);
  }
  for (auto& s : side_) {
    if (s.get() != Side(idx) && s->up()) s->Fence(notice);
  }
}

// Writes the pending notices of the link's streams; false when some are left (no room).
bool IbSendDriver::FlushFences(int idx) {
  Link& l = links_[idx];
  bool all = true;
  for (int s = 0; s < cfg_.streams && l.up; ++s) {
    auto& q = l.fence[s];
    while (!q.empty() && l.ib->Room(s, 1)) {
      Status st = l.ib->PostInline(s, &q.front(), kHdr);
      if (!st.ok()) return false;  // the link's next completion fails it
      q.pop_front();
    }
    all = all && q.empty();
  }
  return all;
}

int IbSendDriver::PickStream(Link& l) {
  for (int k = 0; k < cfg_.streams; ++k) {
    int s = l.ib->PickStream(2);
    if (s < 0) return -1;
    if (l.fence[s].empty()) return s;
  }
  return -1;
}

void IbSendDriver::Push(uint64_t now) {
  std::vector<std::pair<int, bool>> evs;
  {
    std::lock_guard<std::mutex> g(events_mu_);
    evs.swap(events_);
  }
  for (const auto& [rail, down] : evs) core_->OnRail(now, rail, down);
  DrainCommands(now);
  PollDials(now);
  if (core_->SampleDue(now)) {
    std::vector<net::LinkSample> samples(static_cast<size_t>(core_->links()));
    for (size_t i = 0; i < links_.size(); ++i) {
      if (links_[i].up) samples[i] = links_[i].ib->Sample();
    }
    for (size_t k = 0; k < side_.size(); ++k) samples[links_.size() + k] = side_[k]->Sample();
    core_->OnSamples(now, samples);
    DrainCommands(now);
  }
  core_->Poll(now);
  DrainCommands(now);
  for (size_t i = 0; i < links_.size(); ++i) {
    Link& l = links_[i];
    if (!l.up) continue;
    if (l.ib->CreditDue() && l.ib->CreditRoom()) {  // our control receives re-posted (ib_wire.h)
      IbCredit c;
      l.ib->FillCredit(&c);
      Status st = l.ib->PostInline(0, &c, sizeof(c));
      if (!st.ok()) {
        LinkError(now, static_cast<int>(i), "post: " + st.message());
        continue;
      }
    }
    FlushFences(static_cast<int>(i));
    net::TxFrame tx;
    for (int s; l.up && (s = PickStream(l)) >= 0 && l.ib->stage_free() > 0 && core_->NextTx(now, static_cast<int>(i), &tx);) {
      Write(now, static_cast<int>(i), s, tx);
    }
  }
  for (size_t k = 0; k < side_.size(); ++k) side_[k]->Pass(now);
}

// True when the core hands this chunk out for the first time (fresh chunks come in (seq, offset)
// order; everything below the mark was handed out before: a re-send).
bool IbSendDriver::IsFresh(const Frame& h) {
  if (h.seq < fresh_seq_ || (h.seq == fresh_seq_ && h.offset < fresh_off_)) return false;
  if (h.offset + h.len >= h.total) fresh_seq_ = h.seq + 1, fresh_off_ = 0;
  else fresh_seq_ = h.seq, fresh_off_ = h.offset + h.len;
  return true;
}

void IbSendDriver::Write(uint64_t now, int idx, int stream, const net::TxFrame& tx) {
  Link& l = links_[idx];
  const Frame& h = tx.hdr;
  Status st;
  if (net::TypeOf(h) != FrameType::kData || h.len == 0) {
    if (net::TypeOf(h) == FrameType::kData) IsFresh(h);
    st = l.ib->PostInline(stream, &h, kHdr);
  } else {
    st = PostData(l, stream, tx, IsFresh(h));
  }
  if (!st.ok()) {
    if (core_->state() == net::ConnState::kFailed) return;  // aborted: a protocol or usage error
    LinkError(now, idx, "post: " + st.message());
    return;
  }
  if (net::TypeOf(h) == FrameType::kData && idx < 16) ++stats_.link_chunks[idx];
  if (l.spec.rail >= 0) stats_.rail_bytes[static_cast<size_t>(l.spec.rail)] += kHdr + h.len;
  core_->OnWritten(idx, kHdr + h.len);
  core_->OnTxDone(now, idx, h);
}

bool IbSendDriver::HasCts(const Link& l, const Frame& h) const {
  const IbCts& c = cts_[h.seq % RxTracker::kWindow];
  return c.magic == kCtsMagic && c.seq == h.seq && h.offset + h.len <= c.cap && l.peer_rail < static_cast<int>(c.rails);
}

Status IbSendDriver::PostData(Link& l, int stream, const net::TxFrame& tx, bool fresh) {
  const Frame& h = tx.hdr;
  // A side link may have brought the credit before an IB link brought the CTS (the header).
  if (!fresh || net::IsEager(h) || (!side_.empty() && !HasCts(l, h))) {
    // The payload travels with the header: eager chunks (the core's unregistered copy) and every
    // re-send (the receiver may own the buffer again: it must be able to drop the bytes).
    int slot = -1;
    uint8_t* p = l.ib->StageAlloc(&slot);
    if (p == nullptr) return Status::Internal("no staging buffer");  // Push checked one was free
    memcpy(p, &h, kHdr);
    memcpy(p + kHdr, tx.payload, h.len);
    ++stats_.staged;
    stats_.resent += !fresh;
    return l.ib->PostStaged(stream, slot, kHdr + h.len);
  }
  const IbCts& c = cts_[h.seq % RxTracker::kWindow];
  const TxBuf& b = tx_[h.seq % RxTracker::kWindow];
  if (!HasCts(l, h)) return core_->Abort(Code::kInternalError, "no CTS for message " + std::to_string(h.seq) + " (credited)");
  const MrHandle* mh = b.seq == h.seq ? b.mh : nullptr;
  auto addr = reinterpret_cast<uintptr_t>(tx.payload);
  if (mh == nullptr || static_cast<size_t>(l.spec.rail) >= mh->keys.size() || addr < mh->base ||
      addr + h.len > mh->base + mh->len) {
    return core_->Abort(Code::kInvalidUsage, "send buffer of message " + std::to_string(h.seq) + " not registered");
  }
  RR_CHECK(l.ib->PostWrite(stream, tx.payload, h.len, mh->keys[l.spec.rail].lkey, c.addr + h.offset,
                           c.rkey[l.peer_rail]));
  ++stats_.written;
  return l.ib->PostInline(stream, &h, kHdr);  // after the bytes, on the same QP
}

}  // namespace rr::ib
