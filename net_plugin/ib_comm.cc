#include "ib_comm.h"
#include "idle_sends.h"

#include <cstring>

#include "rerail/clock.h"
#include "rerail/log.h"
#include "rerail/params.h"
#include "rerail/prof_net_event.h"
#include "rerail/rails/board.h"

namespace rr::net {

namespace {
constexpr uint64_t kAckLingerMs = 1000;    // a closing receiver, for its queued acks
constexpr uint64_t kListenPollNs = 2'000'000;  // how often a recv comm looks for its TCP link
constexpr uint64_t kQuietListenPollNs = 100'000'000;  // ... before a hello announced one

// Port events the monitor published since the comm last looked, handed to its driver.
template <typename Driver>
void FeedRails(const RailSignals* rails, std::vector<uint64_t>* seen, Driver* drv) {
  for (size_t r = 0; r < seen->size(); ++r) {
    RailChange c = PollRail(rails, static_cast<int>(r), &(*seen)[r]);
    if (c != RailChange::kNone) drv->OnRailEvent(static_cast<int>(r), c == RailChange::kDown);
  }
}

std::vector<uint64_t> RailGens(const RailSignals* rails, size_t n) {
  std::vector<uint64_t> g(n);
  for (size_t r = 0; r < n; ++r) g[r] = RailGen(rails, static_cast<int>(r));
  return g;
}

// RERAIL_CONNECT_TIMEOUT_MS has passed since `since_ns` (connect and accept stop waiting for a link).
bool ConnectTimedOut(uint64_t since_ns) {
  return NowNs() - since_ns >= static_cast<uint64_t>(Params::Int(ParamId::ConnectTimeoutMs)) * 1000000ull;
}

// The bytes per rail a driver counted since the last call, onto the board (sent or received).
void BoardBytes(rails::BoardWriter* board, const std::vector<uint64_t>& counted, std::vector<uint64_t>* reported,
                bool sent) {
  if (board == nullptr) return;
  if (reported->size() < counted.size()) reported->resize(counted.size());
  for (size_t r = 0; r < counted.size(); ++r) {
    uint64_t d = counted[r] - (*reported)[r];
    if (d == 0) continue;
    (*reported)[r] = counted[r];
    board->AddBytes(static_cast<int>(r), sent ? d : 0, sent ? 0 : d);
  }
}

std::vector<SendCore::LinkSpec> Specs(const IbContext& ib, const std::vector<ib::IbSendLinkSpec>& plan,
                                      const IbTcpPlan& tcp) {
  std::vector<SendCore::LinkSpec> out;
  for (const auto& p : plan) {
    SendCore::LinkSpec s;
    s.rail = p.rail;
    s.nominal_bps = ib.info[p.rail].speed_mbps * 1e6;
    s.name = "ib " + ib.info[p.rail].name + " to peer rail " + std::to_string(p.peer_rail);
    out.push_back(std::move(s));
  }
  if (tcp.transport != nullptr) {  // the last resort (ib_tcp_fallback.h)
    const DeviceInfo& d = tcp.transport->Device(tcp.dev);
    SendCore::LinkSpec s;
    s.rail = IbTcpRail(tcp.dev);
    s.nominal_bps = d.speed_mbps > 0 ? d.speed_mbps * 1e6 : 1e9;
    s.name = "tcp fallback " + d.name + " to " + tcp.remote.ToString();
    s.last_resort = true;
    out.push_back(std::move(s));
  }
  return out;
}
}  // namespace

// ---- IbContext

Status IbContext::Open(const ib::IbDiscovery& d, std::unique_ptr<IbContext>* out) {
  if (d.ports.empty()) return Status::InvalidUsage("RERAIL_TRANSPORT=ib but no IB port is usable: " + d.why);
  auto c = std::make_unique<IbContext>();
  for (const ib::IbPort& p : d.ports) {
    if (c->devs.size() == static_cast<size_t>(ib::kCtsRails)) break;  // an IbCts carries this many rkeys
    std::unique_ptr<ib::IbDevice> dev;
    RR_CHECK(ib::IbDevice::Open(ib::VerbsLib::Default(), p, &dev));
    DeviceInfo info;
    info.name = p.name;
    info.pci_path = p.pci_path;
    info.guid = p.guid ^ static_cast<uint64_t>(p.port);  // distinct per port of one HCA
    info.speed_mbps = p.speed_mbps;
    c->info.push_back(std::move(info));
    c->devs.push_back(std::move(dev));
  }
  c->reg = std::make_unique<ib::VerbsRegistrar>(c->rails());
  c->mrs = std::make_unique<ib::MrCache>(c->reg.get());
  c->link.streams = static_cast<int>(Params::Int(ParamId::IbQpsPerLink));
  c->link.recv_slots = 32;
  c->link.qp.max_send = 64;
  c->link.qp.max_recv = 64;
  c->link.qp.timeout = static_cast<uint8_t>(Params::Int(ParamId::IbTimeout));
  c->link.qp.retry_cnt = static_cast<uint8_t>(Params::Int(ParamId::IbRetryCnt));
  *out = std::move(c);
  return Status::Ok();
}

std::vector<ib::IbDevice*> IbContext::rails() const {
  std::vector<ib::IbDevice*> r;
  for (const auto& d : devs) r.push_back(d.get());
  return r;
}

// ---- IbBootstrap

void IbBootstrap::Send(const ib::IbLinkHello& h) {
  const auto* p = reinterpret_cast<const uint8_t*>(&h);
  out_.insert(out_.end(), p, p + sizeof(h));
}

Status IbBootstrap::Flush() {
  while (out_done_ < out_.size()) {
    iovec iov{out_.data() + out_done_, out_.size() - out_done_};
    size_t n = 0;
    int err = 0;
    IoState st = link_->Writev(0, &iov, 1, &n, &err);
    if (st == IoState::kAgain) return Status::Ok();
    if (st == IoState::kClosed) return error_ = Status::Remote("IB bootstrap stream closed by the peer");
    if (st == IoState::kError) return error_ = Status::System("IB bootstrap stream write", err);
    out_done_ += n;
  }
  out_.clear();
  out_done_ = 0;
  return Status::Ok();
}

Status IbBootstrap::Next(ib::IbLinkHello* h, bool* got) {
  *got = false;
  RR_CHECK(error_);
  RR_CHECK(Flush());
  while (in_got_ < sizeof(in_)) {
    size_t n = 0;
    int err = 0;
    IoState st = link_->Read(0, in_ + in_got_, sizeof(in_) - in_got_, &n, &err);
    if (st == IoState::kAgain) return Status::Ok();
    if (st == IoState::kClosed) return error_ = Status::Remote("IB bootstrap stream closed by the peer");
    if (st == IoState::kError) return error_ = Status::System("IB bootstrap stream read", err);
    bool had_magic = in_got_ >= sizeof(uint32_t);
    in_got_ += n;
    uint32_t magic = 0;
    memcpy(&magic, in_, sizeof(magic));
    if (!had_magic && in_got_ >= sizeof(magic) && magic != ib::kIbHelloMagic && magic != 0) {
      // A TCP-mode peer's frames (TCP's hello / data / heartbeats), never a record of ours.
      return error_ = Status::InvalidUsage("the peer sent something other than an IB link handshake on " +
                                           link_->Describe() + ": it does not use RERAIL_TRANSPORT=ib (both ends must)");
    }
  }
  memcpy(h, in_, sizeof(*h));
  in_got_ = 0;
  *got = true;
  return Status::Ok();
}

// ---- IbSendComm

IbSendComm::IbSendComm(const ConnConfig& cfg, IbContext* ib, uint64_t conn_id, std::vector<ib::IbSendLinkSpec> plan,
                       std::unique_ptr<Connector> boot, IbTcpPlan tcp)
    : Comm(kIbSendCommMagic), cfg_(cfg), ib_(ib), tcp_(std::move(tcp)), rail_gen_(RailGens(cfg.rails, ib->devs.size())),
      plan_(std::move(plan)), connector_(std::move(boot)), answers_(plan_.size()) {
  conn_id_ = conn_id;
  // The TCP link dials once the receiver answered on the bootstrap (its comm exists, so the listener
  // routes the TCP link to it), or after the connect grace (every IB port of this side down: no hello
  // goes out, no answer comes; the listener holds a TCP link that overtook its bootstrap).
  tcp_.may_dial = [this] { return boot_heard_ || NowNs() - boot_ns_ > cfg_.connect_grace_ns; };
  tcp_report_cfg_ = cfg_;
  tcp_report_cfg_.board = nullptr;  // the board has slots for the IB devices only
}

int IbSendComm::RailOf(int link) const {
  return link < static_cast<int>(plan_.size()) ? plan_[link].rail : IbTcpRail(tcp_.dev);
}

const ConnConfig& IbSendComm::ReportCfg(int link) const {
  return link < static_cast<int>(plan_.size()) ? cfg_ : tcp_report_cfg_;
}

IbSendComm::~IbSendComm() {
  IdleSends::Get().Remove(this);
  if (core_) LingerUntilAcked(*core_, [this] { return Progress(); });
}

uint64_t IbSendComm::IdleProgress() {
  return core_ ? IdleProgressWith(*core_, [this] { return Progress(); }) : 0;
}

Status IbSendComm::PollConnect(bool* ready) {
  *ready = false;
  if (!boot_) {
    std::unique_ptr<Link> link;
    RR_CHECK(connector_->Poll(&link));
    if (!link) return Status::Ok();
    connector_.reset();
    boot_ = std::make_unique<IbBootstrap>(std::move(link));
    core_ = std::make_unique<SendCore>(cfg_.core(), conn_id_, Specs(*ib_, plan_, tcp_), static_cast<CoreObserver*>(this),
                                       NowNs());
    drv_ = std::make_unique<ib::IbSendDriver>(core_.get(), plan_, ib_->link, cfg_.chunk,
                                                 static_cast<ib::IbDialer*>(this));
    if (tcp_.transport != nullptr) drv_->AddSideLink(std::make_unique<IbTcpSendLink>(tcp_));
    RR_INFO(log::kFlagNet, "conn %016lx: IB bootstrap %s, %zu link(s)%s", static_cast<unsigned long>(conn_id_),
            boot_->link().Describe().c_str(), plan_.size(), tcp_.transport != nullptr ? " + a TCP fallback link" : "");
    boot_ns_ = NowNs();
  }
  RR_CHECK(Progress());  // the hellos go out, their answers come in
  for (size_t i = 0; i < plan_.size() && !*ready; ++i) *ready = drv_->connected(static_cast<int>(i));
  if (!*ready && tcp_.transport != nullptr && drv_->connected(static_cast<int>(plan_.size())) &&
      NowNs() - boot_ns_ > cfg_.connect_grace_ns) {
    *ready = true;  // every IB port down at connect: the TCP link carries until one comes up
  }
  if (!*ready && ConnectTimedOut(boot_ns_)) *ready = true;
  return Status::Ok();
}

Status IbSendComm::Dial(uint64_t /*now*/, const ib::IbLinkHello& hello, ib::IbLinkHello* /*answer*/, bool* answered) {
  *answered = false;
  boot_->Send(hello);
  return Status::Ok();
}

Status IbSendComm::PumpBoot() {
  for (bool got = true; got;) {
    ib::IbLinkHello h;
    RR_CHECK(boot_->Next(&h, &got));
    if (!got) break;
    boot_heard_ = true;
    if (h.link >= answers_.size()) return Status::Remote("IB handshake answer for unknown link " + std::to_string(h.link));
    if (h.magic == ib::kIbHelloMagic && h.streams == 0) {  // the receiver dropped this link (ib_wire.h, version 3)
      if (core_) core_->OnPeerDroppedLink(NowNs(), h.link, h.epoch);
      continue;
    }
    answers_[h.link].push_back(h);
  }
  return Status::Ok();
}

Status IbSendComm::Poll(uint64_t /*now*/, int link, ib::IbLinkHello* answer, bool* answered) {
  *answered = false;
  RR_CHECK(PumpBoot());
  if (answers_[link].empty()) return Status::Ok();
  *answer = answers_[link].front();
  answers_[link].pop_front();
  *answered = true;
  return Status::Ok();
}

Status IbSendComm::Progress() {
  uint64_t now = NowNs();
  MarkDriven(now);
  FeedRails(cfg_.rails, &rail_gen_, drv_.get());
  drv_->Progress(now);
  if (!boot_dead_) {
    Status st = PumpBoot();
    if (!st.ok()) {  // the receiver's process closed the connection (or died)
      // What it sent before closing (the last acks) is in our CQs by now: take it in first, so a
      // message it received completes here instead of being failed by the close.
      drv_->Progress(now);
      boot_dead_ = true;
      if (st.code() == Code::kInvalidUsage) {  // a TCP-mode listener: a configuration error, not a fault
        RR_WARN("conn %016lx: %s", static_cast<unsigned long>(conn_id_), st.message().c_str());
        (void)core_->Abort(Code::kInvalidUsage, st.message());
      } else {
        drv_->OnPeerClosed(now, "receiver closed the connection: " + st.message());
      }
    }
  }
  BoardBytes(cfg_.board, drv_->stats().rail_bytes, &board_bytes_, true);
  DrainCompletions(*core_);
  return core_->status();
}

void IbSendComm::OnFailover(int link, const std::string& why, uint64_t bytes, uint64_t chunks, int to_link,
                            uint64_t stall_ns, bool was_probing) {
  ReportFailover(ReportCfg(link), RailOf(link), to_link >= 0 ? RailOf(to_link) : -1, why, bytes, chunks, stall_ns,
                 was_probing);
}

void IbSendComm::OnRetransmit(int to_link, uint64_t bytes, uint64_t chunks) {
  ReportRetransmit(ReportCfg(to_link), RailOf(to_link), bytes, chunks);
}

void IbSendComm::OnFailback(int link) { ReportFailback(ReportCfg(link), RailOf(link)); }

void IbSendComm::OnLinkState(int link, LinkState from, LinkState to, const std::string& why) {
  ReportLinkState(ReportCfg(link), RailOf(link), from, to, why);
}

void IbSendComm::OnBandwidth(int link, uint64_t bytes_per_s) {
  if (ReportCfg(link).board) cfg_.board->SetBandwidth(RailOf(link), bytes_per_s);
}

Status IbSendComm::Isend(const void* data, size_t size, int tag, ib::MrHandle* mh, void* phandle, Request** req) {
  std::lock_guard<std::mutex> drive(drive_mu_);   // IdleSends may be driving this comm
  *req = nullptr;
  if (core_->state() == ConnState::kFailed || core_->state() == ConnState::kPeerClosed) return PostAfterEnd(true, size, req);
  if (mh == nullptr && size > 0) return Status::Internal("isend over IB without a memory registration (regMr)");
  Request* r = pool_.Get(true);
  if (r == nullptr) return Progress();
  bool posted = false;
  Status st = drv_->Isend(NowNs(), data, size, mh, r, &posted, tag);
  if (!st.ok() || !posted) {
    pool_.Put(r);
    return st.ok() ? Progress() : st;
  }
  r->seq = core_->last_seq();
  r->size = size;
  ProfStart(cfg_.prof, r, phandle, plan_[0].rail);
  *req = r;
  (void)Progress();  // a failure found here is reported by test() on this request
  return Status::Ok();
}

Status IbSendComm::Test(Request* r, int* done, int* size) {
  std::lock_guard<std::mutex> drive(drive_mu_);   // IdleSends may be driving this comm
  *done = 0;
  if (r->seq == kSeqPostedAfterEnd) return EndedStatus(*core_, "isend after the receiver closed the connection");
  if (r->state != ReqState::kDone) {
    Status st = Progress();
    if (!st.ok() && r->state != ReqState::kDone) return st;
  }
  if (r->state != ReqState::kDone) return Status::Ok();
  *done = 1;
  if (size != nullptr) *size = static_cast<int>(r->size);
  ProfStop(cfg_.prof, r);
  pool_.Put(r);
  MaybeListIdle(*core_);
  return Status::Ok();
}

// ---- IbRecvComm

// Closing: the ack of the last message may still be a posted SEND that a destroyed QP would never
// execute (a TCP close still delivers what was written); drive I/O until every control frame went out.
IbRecvComm::~IbRecvComm() {
  IdleSends::Get().Remove(this);
  core_.FlushHeld(NowNs());  // an ack held back (eager messages) goes with the rest
  Deadline dl = Deadline::AfterMs(kAckLingerMs);
  while (!drv_.Quiet() && core_.state() == ConnState::kActive && !dl.Expired()) (void)Progress();
}

IbRecvComm::IbRecvComm(const ConnConfig& cfg, IbContext* ib, std::unique_ptr<Link> boot, std::unique_ptr<Listener> more)
    : Comm(kIbRecvCommMagic),
      cfg_(cfg),
      rail_gen_(RailGens(cfg.rails, ib->devs.size())),
      more_(std::move(more)),
      boot_(std::move(boot)),
      core_(cfg.core(), boot_.link().identity().conn_id, boot_.link().identity().chunk_size, this),
      drv_(&core_, ib->rails(), ib->link) {
  conn_id_ = boot_.link().identity().conn_id;
}

// Answers every hello that arrived (a refusal = the hello back with magic 0), then one driver pass. The
// bootstrap's end = the sender closed (or died): handled after the pass, so what its QPs delivered
// before is placed first.
// The sender's TCP link (ib_tcp_fallback.h): link >= 1 of this connection on the listener; each
// (re)connection replaces the one before. Looked for every kListenPollNs, as TCP comms do, once a hello
// said the sender has one (kIbHelloFlagTcpLink); before that only every kQuietListenPollNs (a sender whose
// IB links could not even send a hello still dials its TCP link), so a comm without one costs no syscall
// per call.
void IbRecvComm::PollTcpLinks(uint64_t now) {
  if (!more_ || now < next_more_poll_ns_) return;
  next_more_poll_ns_ = now + (tcp_announced_ ? kListenPollNs : kQuietListenPollNs);
  for (;;) {
    std::unique_ptr<Link> link;
    Status st = more_->Poll(&link);
    if (!st.ok()) {
      RR_WARN("conn %016lx: polling for the TCP link: %s", static_cast<unsigned long>(conn_id_), st.ToString().c_str());
      return;
    }
    if (!link) return;
    const int idx = link->identity().link;
    if (idx < 1 || (tcp_ && tcp_->link() != idx)) {
      RR_WARN("conn %016lx: refused a TCP link (%s, link %d): an IB connection has one TCP link after its IB links",
              static_cast<unsigned long>(conn_id_), link->Describe().c_str(), idx);
      continue;
    }
    if (!tcp_) {
      tcp_ = std::make_unique<IbTcpRecvLink>(&core_, idx);
      drv_.AddSideLink(tcp_.get());
    }
    if (!tcp_->Attach(std::move(link), now)) {
      RR_WARN("conn %016lx: refused a stale TCP link %d", static_cast<unsigned long>(conn_id_), idx);
    }
  }
}

Status IbRecvComm::Progress() {
  FeedRails(cfg_.rails, &rail_gen_, &drv_);
  uint64_t now = NowNs();
  MarkDriven(now);
  PollTcpLinks(now);
  Status closed;
  for (bool got = !boot_dead_; got;) {
    ib::IbLinkHello h;
    closed = boot_.Next(&h, &got);
    if (!closed.ok()) break;
    if (!got) break;
    if ((h.flags & ib::kIbHelloFlagTcpLink) != 0 && !tcp_announced_) tcp_announced_ = true, next_more_poll_ns_ = 0;
    ib::IbLinkHello answer{};
    Status st = drv_.Accept(now, h, &answer);
    if (!st.ok()) {
      if (drv_.rail_down(h.peer_rail)) {
        // A failback probe while the port is down: expected at every back-off step (the failover the
        // port event caused has WARNed once).
        RR_INFO(log::kFlagNet, "conn %016lx: IB link %u (epoch %u) refused: %s", static_cast<unsigned long>(conn_id_),
                h.link, h.epoch, st.message().c_str());
      } else {
        RR_WARN("conn %016lx: IB link %u (epoch %u) refused: %s", static_cast<unsigned long>(conn_id_), h.link, h.epoch,
                st.ToString().c_str());
      }
      answer = h;
      answer.magic = 0;
    }
    boot_.Send(answer);
  }
  drv_.Progress(now);
  int dropped = -1;
  uint32_t epoch = 0;
  while (drv_.NextDropped(&dropped, &epoch)) {  // the sender may be unable to see it die (ib_wire.h, version 3)
    if (boot_dead_ || !closed.ok()) continue;
    ib::IbLinkHello h{};
    h.magic = ib::kIbHelloMagic;
    h.version = ib::kIbHelloVersion;
    h.link = static_cast<uint8_t>(dropped);
    h.streams = 0;
    h.conn_id = conn_id_;
    h.epoch = epoch;
    boot_.Send(h);
    (void)boot_.Flush();  // an error here is the sender's close, which the next read reports
  }
  if (!closed.ok()) {
    boot_dead_ = true;
    if (closed.code() == Code::kInvalidUsage) {  // a TCP-mode sender: a configuration error, not a fault
      RR_WARN("conn %016lx: %s", static_cast<unsigned long>(conn_id_), closed.message().c_str());
      (void)core_.Abort(Code::kInvalidUsage, closed.message());
    } else {
      drv_.OnPeerClosed(now, "sender closed the connection: " + closed.message());
    }
  }
  BoardBytes(cfg_.board, drv_.stats().rail_bytes, &board_bytes_, false);
  Completion c;
  while (drv_.NextCompletion(&c)) {
    auto* r = static_cast<Request*>(c.owner);
    if (c.index >= 0 && c.index < kMaxRecvs) r->sizes[c.index] = c.size;
    if (++r->ndone < r->n) continue;  // a grouped receive completes with its last element
    r->size = r->sizes[0];
    r->state = ReqState::kDone;
  }
  return core_.status();
}

void IbRecvComm::OnFailover(int link, const std::string& why, uint64_t /*bytes*/, uint64_t /*chunks*/, int /*to_link*/,
                            uint64_t /*stall_ns*/, bool /*was_probing*/) {
  int rail = drv_.link_rail(link);
  if (rail >= 0) ReportRecvFailover(cfg_, rail, why);
}

// NCCL holds none of the comm's receives while the sender may still wait for an ack (RecvCore::
// OwesIdleProgress): IdleSends drives it, so the sender's new links are answered and carry the ack.
uint64_t IbRecvComm::IdleProgress() {
  return IdleProgressWith(core_, [this] { return Progress(); });
}

Status IbRecvComm::Irecv(int n, void* const* data, const size_t* caps, const int* tags, ib::MrHandle* const* mhs,
                         void* phandle, Request** req) {
  std::lock_guard<std::mutex> drive(drive_mu_);   // IdleSends may be driving this comm
  *req = nullptr;
  if (core_.state() == ConnState::kFailed) {
    size_t total = 0;
    for (int k = 0; k < n; ++k) total += caps[k];
    return PostAfterEnd(false, total, req);
  }
  for (int k = 0; k < n; ++k) {
    if (mhs[k] == nullptr && caps[k] > 0) return Status::Internal("irecv over IB without a memory registration (regMr)");
  }
  Request* r = pool_.Get(false);
  if (r == nullptr) return Status::Ok();
  bool posted = false;
  Status st = drv_.IrecvGroup(NowNs(), n, data, caps, tags, mhs, r, &posted, r->slots);
  if (!st.ok() || !posted) {
    pool_.Put(r);
    return st.ok() ? Progress() : st;
  }
  r->seq = core_.posted() - 1;
  r->n = n;
  ProfStart(cfg_.prof, r, phandle, cfg_.dev);
  *req = r;
  (void)Progress();
  return Status::Ok();
}

Status IbRecvComm::Test(Request* r, int* done, int* size) {
  std::lock_guard<std::mutex> drive(drive_mu_);   // IdleSends may be driving this comm
  *done = 0;
  if (r->seq == kSeqPostedAfterEnd) return EndedStatus(core_, "irecv after the connection ended");
  if (r->state != ReqState::kDone) {
    Status st = Progress();
    if (!st.ok() && r->state != ReqState::kDone) return st;
  }
  if (r->state != ReqState::kDone) return Status::Ok();
  *done = 1;
  for (int k = 0; k < r->n; ++k) {
    if (size != nullptr) size[k] = static_cast<int>(r->sizes[k]);
    core_.Release(r->slots[k]);
  }
  ProfStop(cfg_.prof, r);
  pool_.Put(r);
  MaybeListIdle(core_);
  return Status::Ok();
}

// ---- IbListenComm

namespace {
// A recv comm's further TCP links: those that arrived before its bootstrap stream, then the hub's.
class EarlyFirst final : public Listener {
 public:
  EarlyFirst(std::deque<std::unique_ptr<Link>> early, std::unique_ptr<Listener> rest)
      : early_(std::move(early)), rest_(std::move(rest)) {}
  Status Poll(std::unique_ptr<Link>* out) override {
    if (early_.empty()) return rest_->Poll(out);
    *out = std::move(early_.front());
    early_.pop_front();
    return Status::Ok();
  }

 private:
  std::deque<std::unique_ptr<Link>> early_;
  std::unique_ptr<Listener> rest_;
};

// An IB sender's bootstrap: link 0, one stream. A TCP-mode sender's links have RERAIL_TCP_STREAMS.
bool IsBootstrap(const Link& l) { return l.identity().link == 0 && l.streams() == 1; }

void RefuseTcpModeSender(const Link& l) {
  RR_WARN("refused %s: %d streams, link %d, not an IB bootstrap stream: the sender does not use RERAIL_TRANSPORT=ib "
          "(both ends must)", l.Describe().c_str(), l.streams(), l.identity().link);
}
}  // namespace

Status IbListenComm::NextBootstrap(std::unique_ptr<Link>* boot, std::deque<std::unique_ptr<Link>>* early) {
  for (size_t i = 0; i < early_.size(); ++i) {  // connections waiting for their bootstrap (claimed in the hub)
    Early& e = early_[i];
    std::unique_ptr<Link> l;
    RR_CHECK(hub_->PollConn(e.conn, &l));
    bool done = false;
    if (l && IsBootstrap(*l)) {
      *boot = std::move(l);
      *early = std::move(e.links);
      done = true;
    } else if (l && l->identity().link == 0) {
      RefuseTcpModeSender(*l);
      done = true;
    } else if (l) {
      e.links.push_back(std::move(l));
    } else if (ConnectTimedOut(e.since_ns)) {
      RR_WARN("conn %016lx: closed %zu TCP link(s) whose IB bootstrap stream did not come within RERAIL_CONNECT_TIMEOUT_MS",
              static_cast<unsigned long>(e.conn), e.links.size());
      done = true;
    }
    if (!done) continue;
    if (!*boot) hub_->Release(e.conn);  // its other links are closed too
    early_.erase(early_.begin() + static_cast<long>(i));
    return Status::Ok();
  }
  std::unique_ptr<Link> link;
  RR_CHECK(hub_->PollNew(&link));
  if (!link) return Status::Ok();
  if (IsBootstrap(*link)) {
    *boot = std::move(link);
  } else if (link->identity().link != 0) {  // a TCP link ahead of its bootstrap
    const uint64_t conn = link->identity().conn_id;
    early_.push_back(Early{conn, {}, NowNs()});
    early_.back().links.push_back(std::move(link));
  } else {
    RefuseTcpModeSender(*link);
    hub_->Release(link->identity().conn_id);
  }
  return Status::Ok();
}

Status IbListenComm::Accept(std::unique_ptr<IbRecvComm>* out) {
  if (!pending_) {
    std::unique_ptr<Link> boot;
    std::deque<std::unique_ptr<Link>> early;
    RR_CHECK(NextBootstrap(&boot, &early));
    if (!boot) return Status::Ok();
    const uint64_t conn = boot->identity().conn_id;
    pending_ = std::make_unique<IbRecvComm>(
        cfg_, ib_, std::move(boot), std::make_unique<EarlyFirst>(std::move(early), std::make_unique<HubListener>(hub_, conn)));
    pending_ns_ = NowNs();
  }
  // An error (the sender went away) is the recv comm's to report, at its first call.
  Status st = pending_->Progress();
  if (st.ok() && !ConnectTimedOut(pending_ns_) && !pending_->AnyLinkUp()) return Status::Ok();
  *out = std::move(pending_);
  return Status::Ok();
}

bool IbRecvComm::AnyLinkUp() const { return drv_.AnyLinkUp() || (tcp_ && tcp_->up()); }

}  // namespace rr::net
