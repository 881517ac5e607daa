#include "transports/ib/ib_link.h"

#include <algorithm>
#include <cstring>

namespace rr::ib {
namespace {
constexpr int kAccess = vx::kAccessLocalWrite | vx::kAccessRemoteWrite | vx::kAccessRemoteRead;
constexpr uint64_t kIdMask = (1ull << 40) - 1;
}  // namespace

Status IbLink::Create(IbDevice& dev, const IbLinkConfig& cfg, std::unique_ptr<IbLink>* out) {
  if (cfg.streams < 1 || cfg.streams > net::kMaxStreams || cfg.recv_streams < 0 || cfg.recv_streams > cfg.streams)
    return Status::Internal("IbLink: bad stream counts");
  std::unique_ptr<IbLink> l(new IbLink(dev, cfg));
  // Every WR of every QP may complete at once (a flush): the CQs hold them all.
  int send_cqe = cfg.streams * static_cast<int>(cfg.qp.max_send) + 16;
  int recv_cqe = cfg.streams * static_cast<int>(cfg.qp.max_recv) + 16;
  RR_CHECK(IbCq::Create(dev, send_cqe, &l->scq_));
  RR_CHECK(IbCq::Create(dev, recv_cqe, &l->rcq_));
  if (static_cast<uint32_t>(cfg.recv_slots) > cfg.qp.max_recv) return Status::Internal("IbLink: recv_slots > max_recv");
  l->s_.resize(static_cast<size_t>(cfg.streams));
  for (auto& s : l->s_) RR_CHECK(IbQp::Create(dev, *l->scq_, *l->rcq_, cfg.qp, &s.qp));
  size_t rbytes = static_cast<size_t>(cfg.recv_streams) * cfg.recv_slots * cfg.recv_bytes;
  if (rbytes > 0) {
    l->recv_mem_.assign(rbytes, 0);
    RR_CHECK(IbMr::Register(dev, l->recv_mem_.data(), rbytes, kAccess, &l->recv_mr_));
  }
  size_t sbytes = static_cast<size_t>(cfg.stage_slots) * cfg.stage_bytes;
  if (sbytes > 0) {
    l->stage_mem_.assign(sbytes, 0);
    RR_CHECK(IbMr::Register(dev, l->stage_mem_.data(), sbytes, kAccess, &l->stage_mr_));
  }
  l->ClearAccounting();
  *out = std::move(l);
  return Status::Ok();
}

IbLink::~IbLink() {
  for (auto& s : s_) s.qp.reset();  // QPs before their CQs and MRs
}

void IbLink::Endpoints(QpEndpoint* out) const {
  for (int i = 0; i < cfg_.streams; ++i) out[i] = s_[i].qp->Endpoint();
}

uint64_t IbLink::SendId(int stream, uint64_t n) const {
  return (static_cast<uint64_t>(gen_) << 48) | (static_cast<uint64_t>(stream) << 40) | (n & kIdMask);
}
uint64_t IbLink::RecvId(int stream, uint32_t slot) const { return SendId(stream, slot); }

void IbLink::ClearAccounting() {
  for (auto& s : s_) {
    s.wrs.clear();
    s.next_id = 0;
    s.posted_bytes = s.done_bytes = s.acked_bytes = 0;
    s.sends = s.credit = s.reposted = s.reported = 0;
    s.granted = 0;
  }
  stage_free_.clear();
  for (int i = cfg_.stage_slots - 1; i >= 0; --i) stage_free_.push_back(i);
}

Status IbLink::Reset() {
  connected_ = false;
  Status first;
  for (auto& s : s_) {
    Status st = s.qp->Reset();
    if (!st.ok() && first.ok()) first = st;
  }
  ++gen_;  // completions of the old incarnation still queued (a provider may keep them) are stale
  ClearAccounting();
  return first;
}

Status IbLink::Prepare() {
  bool fresh = !connected_;
  for (const auto& st : s_) fresh = fresh && st.qp->QueryState() == vx::kQpsReset;
  return fresh ? Status::Ok() : Reset();
}

Status IbLink::Connect(const QpEndpoint* remote, uint32_t peer_slots) {
  RR_CHECK(Prepare());
  for (auto& s : s_) s.credit = peer_slots;
  for (int i = 0; i < cfg_.streams; ++i) RR_CHECK(s_[i].qp->Connect(remote[i]));
  for (int i = 0; i < cfg_.recv_streams; ++i) {
    for (int k = 0; k < cfg_.recv_slots; ++k) RR_CHECK(PostRecvSlot(i, static_cast<uint32_t>(k)));
  }
  connected_ = true;
  return Status::Ok();
}

void IbLink::Fail() {
  connected_ = false;
  for (auto& s : s_) (void)s.qp->ToError();  // a QP already in ERR (or the device gone) is as good
}

Status IbLink::PostRecvSlot(int stream, uint32_t slot) {
  return s_[stream].qp->PostRecv(RecvId(stream, slot), RecvBuf(stream, slot), cfg_.recv_bytes, recv_mr_->lkey());
}

Status IbLink::Repost(int stream, uint32_t slot) {
  if (!connected_) return Status::Ok();  // the next Connect posts every slot
  RR_CHECK(PostRecvSlot(stream, slot));
  ++s_[stream].reposted;
  return Status::Ok();
}

// Every frame has exactly one SEND; the stream's last credit is kept for IbCredit records.
bool IbLink::Room(int stream, int wrs) const {
  const Stream& s = s_[stream];
  return connected_ && s.wrs.size() + static_cast<size_t>(wrs) <= cfg_.qp.max_send && s.sends + 1 < s.credit;
}

bool IbLink::CreditRoom() const {
  const Stream& s = s_[0];
  return connected_ && s.wrs.size() < cfg_.qp.max_send && s.sends < s.credit;
}

void IbLink::Grant(const IbCredit& c) {
  for (int i = 0; i < cfg_.streams && i < c.streams; ++i) {
    Stream& s = s_[i];
    s.credit += static_cast<uint16_t>(c.posted[i] - s.granted);
    s.granted = c.posted[i];
  }
}

// A quarter of a stream's receives re-posted since the last report (ib_wire.h: not every one).
bool IbLink::CreditDue() const {
  uint64_t quarter = std::max(1, cfg_.recv_slots / 4);
  for (int i = 0; i < cfg_.recv_streams; ++i) {
    if (s_[i].reposted - s_[i].reported >= quarter) return true;
  }
  return false;
}

void IbLink::FillCredit(IbCredit* c) {
  *c = IbCredit{};
  c->magic = kCreditMagic;
  c->streams = static_cast<uint16_t>(cfg_.recv_streams);
  for (int i = 0; i < cfg_.recv_streams; ++i) {
    c->posted[i] = static_cast<uint16_t>(s_[i].reposted);
    s_[i].reported = s_[i].reposted;
  }
}

int IbLink::PickStream(int wrs) {
  for (int k = 0; k < cfg_.streams; ++k) {
    int i = (rotate_ + k) % cfg_.streams;
    if (Room(i, wrs)) {
      rotate_ = (i + 1) % cfg_.streams;
      return i;
    }
  }
  return -1;
}

Status IbLink::Track(int stream, uint64_t id, uint32_t bytes, int stage, Status posted) {
  if (!posted.ok()) return posted;
  Stream& s = s_[stream];
  s.wrs.push_back(WrRecord{id, bytes, stage});
  s.posted_bytes += bytes;
  ++s.next_id;
  return Status::Ok();
}

Status IbLink::PostWrite(int stream, const void* laddr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey) {
  uint64_t id = SendId(stream, s_[stream].next_id);
  return Track(stream, id, len, -1, s_[stream].qp->PostWrite(id, laddr, len, lkey, raddr, rkey, false, 0, true));
}

Status IbLink::PostInline(int stream, const void* data, uint32_t len) {
  uint64_t id = SendId(stream, s_[stream].next_id);
  RR_CHECK(Track(stream, id, len, -1, s_[stream].qp->PostSend(id, data, len, 0, true)));
  ++s_[stream].sends;
  return Status::Ok();
}

uint8_t* IbLink::StageAlloc(int* slot) {
  if (stage_free_.empty()) return nullptr;
  *slot = stage_free_.back();
  stage_free_.pop_back();
  return stage_mem_.data() + static_cast<size_t>(*slot) * cfg_.stage_bytes;
}

void IbLink::StageFree(int slot) { stage_free_.push_back(slot); }

Status IbLink::PostStaged(int stream, int slot, uint32_t len) {
  uint64_t id = SendId(stream, s_[stream].next_id);
  const uint8_t* p = stage_mem_.data() + static_cast<size_t>(slot) * cfg_.stage_bytes;
  Status st = Track(stream, id, len, slot, s_[stream].qp->PostSend(id, p, len, stage_mr_->lkey(), false));
  if (!st.ok()) StageFree(slot);
  else ++s_[stream].sends;
  return st;
}

// Completions come back in posting order per QP (every WR is signalled; errors and flushes too).
void IbLink::Complete(int stream, uint64_t id, bool ok) {
  Stream& s = s_[stream];
  while (!s.wrs.empty()) {
    WrRecord r = s.wrs.front();
    s.wrs.pop_front();
    s.done_bytes += r.bytes;
    if (r.stage >= 0) StageFree(r.stage);
    if (r.id == id) {
      if (ok) s.acked_bytes += r.bytes;
      return;
    }
    // An earlier record without a completion cannot happen with every WR signalled; counted as gone.
  }
}

Status IbLink::Poll(std::vector<Event>* out) {
  vx::Wc wc[32];
  int n = 0;
  RR_CHECK(scq_->Poll(32, wc, &n));
  for (int i = 0; i < n; ++i) {
    if ((wc[i].wr_id >> 48) != gen_) continue;  // an earlier incarnation's
    int stream = static_cast<int>((wc[i].wr_id >> 40) & 0xff);
    if (stream >= cfg_.streams) continue;
    bool ok = wc[i].status == vx::kWcSuccess;
    Complete(stream, wc[i].wr_id, ok);
    out->push_back(Event{ok ? Event::kSendOk : Event::kSendError, stream, wc[i].status, nullptr, 0, 0});
  }
  RR_CHECK(rcq_->Poll(32, wc, &n));
  for (int i = 0; i < n; ++i) {
    if ((wc[i].wr_id >> 48) != gen_) continue;
    int stream = static_cast<int>((wc[i].wr_id >> 40) & 0xff);
    auto slot = static_cast<uint32_t>(wc[i].wr_id & kIdMask);
    if (stream >= cfg_.recv_streams || slot >= static_cast<uint32_t>(cfg_.recv_slots)) continue;
    if (wc[i].status != vx::kWcSuccess) {
      out->push_back(Event{Event::kRecvError, stream, wc[i].status, nullptr, 0, slot});
      continue;
    }
    out->push_back(Event{Event::kRecv, stream, 0, RecvBuf(stream, slot), wc[i].byte_len, slot});
  }
  return Status::Ok();
}

net::LinkSample IbLink::Sample() const {
  net::LinkSample ls;
  ls.valid = connected_;
  ls.streams = cfg_.streams;
  for (int i = 0; i < cfg_.streams; ++i) {
    const Stream& s = s_[i];
    ls.s[i].acked_bytes = s.acked_bytes;
    ls.s[i].in_flight = s.posted_bytes - s.done_bytes;
    ls.s[i].outq = ls.s[i].in_flight;
  }
  return ls;
}

}  // namespace rr::ib
