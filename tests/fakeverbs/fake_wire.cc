// fakeverbs — the data path: post_send / post_recv / poll_cq (reached through ibv_context.ops, as the
// verbs.h inlines reach a provider) and the wire-time progress step poll_cq runs. QPs whose responder
// is another process (FAKEVERBS_WIRE) are driven by fake_host.cc instead.
//
// What a posted send WR goes through at wire time, in this order (IB spec semantics, RC):
//   local port down or device dead -> LOC_QP_OP_ERR; local SGE key/PD/bounds/access -> LOC_PROT_ERR;
//   no responder (AV or QPN wrong, peer QP not RTR/RTS or not connected back to us, PSN mismatch, port
//   down, black-hole fault) -> retried until 4.096 us x 2^timeout x (retry_cnt+1) -> RETRY_EXC_ERR;
//   responder rkey/PD/bounds/MR access/QP access -> REM_ACCESS_ERR (and the responder QP to ERR);
//   WRITE_WITH_IMM/SEND without a posted receive -> RNR wait (rnr_retry 7: forever) -> RNR_RETRY_EXC_ERR;
//   SEND longer than the receive -> REM_INV_REQ_ERR / LOC_LEN_ERR; else the bytes move, the receive
//   completes after them, the sender completes if signalled. The first error completes its WR even if
//   unsignalled, moves the QP to ERR, and every WR after it completes with WR_FLUSH_ERR.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fake_fabric.h"
#include "fakeverbs.h"

namespace fakeverbs {

Device* DevOf(const Qp* q) { return q->pd->ctx->dev; }
bool PortUp(const Device* d) { return !d->fatal && d->port.state == vx::kPortActive; }

uint64_t Total(const std::vector<vx::Sge>& sge) {
  uint64_t n = 0;
  for (const vx::Sge& s : sge) n += s.length;
  return n;
}

uint8_t* Resolve(const std::map<uint32_t, Mr*>& keys, uint32_t key, const Pd* pd, uint64_t addr, uint64_t len,
                 int need) {
  auto it = keys.find(key);
  if (it == keys.end()) return nullptr;
  const Mr* m = it->second;
  if (m->pd != pd || (m->access & need) != need) return nullptr;
  if (addr < m->iova || addr - m->iova > m->head.length || len > m->head.length - (addr - m->iova)) return nullptr;
  return static_cast<uint8_t*>(m->head.addr) + (addr - m->iova);
}

double DeadPathMs(const Qp* q) {
  return 4.096e-3 * static_cast<double>(1ull << q->timeout) * (q->retry_cnt + 1);
}

double RnrMs(int rnr_retry, int min_rnr_timer) {
  return 0.01 * (1 << (min_rnr_timer / 2 + 1)) * (rnr_retry + 1);
}

void EventTo(Context* c, int type, void* element) {
  c->events.push_back(Event{type, 1, element});
  char one = 1;
  ssize_t w = write(c->event_wr, &one, 1);
  (void)w;
}

namespace {

int WcOpcode(int wr_opcode) {
  switch (wr_opcode) {
    case vx::kWrRdmaRead: return vx::kWcRdmaRead;
    case vx::kWrSend:
    case vx::kWrSendWithImm: return vx::kWcSend;
    default: return vx::kWcRdmaWrite;
  }
}

}  // namespace

void SendCompletion(Fabric& f, Qp* q, const SendOp& op, int status, uint32_t byte_len) {
  Cqe e{};
  e.wc.wr_id = op.wr.wr_id;
  e.wc.status = status;
  e.wc.opcode = WcOpcode(op.wr.opcode);
  e.wc.byte_len = byte_len;
  e.wc.qp_num = q->head.qp_num;
  e.send_side = true;
  e.seq = op.seq;
  f.Push(q->scq, e);
}

void RecvCompletion(Fabric& f, Qp* r, const RecvOp& rv, int status, int opcode, uint32_t byte_len, bool with_imm,
                    uint32_t imm, uint32_t src_qp) {
  Cqe e{};
  e.wc.wr_id = rv.wr_id;
  e.wc.status = status;
  e.wc.opcode = opcode;
  e.wc.byte_len = byte_len;
  e.wc.qp_num = r->head.qp_num;
  e.wc.src_qp = src_qp;
  if (with_imm) {
    e.wc.imm_data = imm;
    e.wc.wc_flags = vx::kWcWithImm;
  }
  f.Push(r->rcq, e);
}

void FailOp(Fabric& f, Qp* q, const SendOp& op, int status) {
  SendCompletion(f, q, op, status);
  f.ToError(q);
}

void FlushQp(Fabric& f, Qp* q) {
  while (!q->sq.empty()) {
    SendCompletion(f, q, q->sq.front(), vx::kWcWrFlushErr);
    q->sq.pop_front();
  }
  q->emitted = 0;
  while (!q->rq.empty()) {
    RecvCompletion(f, q, q->rq.front(), vx::kWcWrFlushErr, vx::kWcRecv, 0, false, 0, 0);
    q->rq.pop_front();
  }
}

namespace {

enum class Outcome { kDone, kWait };
constexpr int kWcRemInvReqErr = 9;

Qp* QpOf(vx::Qp* q) { return reinterpret_cast<Qp*>(q); }
Cq* CqOf(vx::Cq* c) { return reinterpret_cast<Cq*>(c); }

bool Expired(SendOp& op, double ms, Clock::time_point now) {
  if (!op.trying) op.trying = true, op.first_try = now;
  return std::chrono::duration<double, std::milli>(now - op.first_try).count() >= ms;
}

class Wire {
 public:
  Wire(Fabric& f, Clock::time_point now) : f_(f), now_(now) {}

  void SendCompletion(Qp* q, const SendOp& op, int status, uint32_t byte_len = 0) {
    fakeverbs::SendCompletion(f_, q, op, status, byte_len);
  }

  void RecvCompletion(Qp* r, const RecvOp& rv, int status, int opcode, uint32_t byte_len, const vx::SendWr* wr,
                      uint32_t src_qp) {
    bool imm = wr && (wr->opcode == vx::kWrRdmaWriteWithImm || wr->opcode == vx::kWrSendWithImm);
    fakeverbs::RecvCompletion(f_, r, rv, status, opcode, byte_len, imm, imm ? wr->imm_data : 0, src_qp);
  }

  void Fail(Qp* q, const SendOp& op, int status) { FailOp(f_, q, op, status); }

  // The responder QP for q's path, or null when nothing answers (a dead path).
  Qp* Responder(Qp* q) {
    auto it = f_.qps.find(q->dest_qpn);
    if (it == f_.qps.end() || q->dest_dev == nullptr) return nullptr;
    Qp* r = it->second;
    Device* ld = DevOf(q);
    if (DevOf(r) != q->dest_dev || !PortUp(q->dest_dev)) return nullptr;
    if (ld->port.fault == FAKEVERBS_FAULT_DROP_DATA || q->dest_dev->port.fault == FAKEVERBS_FAULT_DROP_DATA) return nullptr;
    if (ld->port.fault == FAKEVERBS_FAULT_DROP_OUT) return nullptr;  // what this port sends is lost
    if (r->head.state != vx::kQpsRtr && r->head.state != vx::kQpsRts) return nullptr;
    if (r->dest_qpn != q->head.qp_num || r->dest_dev != ld) return nullptr;  // its acks would go elsewhere
    if (r->rq_psn != q->sq_psn) return nullptr;  // out-of-sequence packets are dropped and retried
    return r;
  }

  Outcome DeadPath(Qp* q, SendOp& op) {
    if (q->timeout == 0) return Outcome::kWait;  // timeout 0: wait forever (IB spec)
    if (!Expired(op, DeadPathMs(q), now_)) return Outcome::kWait;
    Fail(q, op, vx::kWcRetryExcErr);
    return Outcome::kDone;
  }

  Outcome Execute(Qp* q, SendOp& op) {
    Device* ld = DevOf(q);
    if (!PortUp(ld)) return Fail(q, op, vx::kWcLocQpOpErr), Outcome::kDone;
    const bool read = op.wr.opcode == vx::kWrRdmaRead;
    const bool send = op.wr.opcode == vx::kWrSend || op.wr.opcode == vx::kWrSendWithImm;
    const uint64_t len = op.is_inline ? op.inline_data.size() : Total(op.sge);
    // Local buffers (lkey, PD, bounds; a READ writes them, so it needs LOCAL_WRITE).
    std::vector<uint8_t*> local;
    if (!op.is_inline) {
      for (const vx::Sge& s : op.sge) {
        uint8_t* p = Resolve(f_.lkeys, s.lkey, q->pd, s.addr, s.length, read ? vx::kAccessLocalWrite : 0);
        if (!p && s.length) return Fail(q, op, vx::kWcLocProtErr), Outcome::kDone;
        local.push_back(p);
      }
    }
    if (op.delivered) return AckLost(q, op, len);
    Qp* r = Responder(q);
    if (!r) return DeadPath(q, op);
    if (read && (ld->port.fault == FAKEVERBS_FAULT_DROP_ACKS || r->pd->ctx->dev->port.fault == FAKEVERBS_FAULT_DROP_ACKS))
      return DeadPath(q, op);  // the read response is what is lost
    uint8_t* remote = nullptr;
    if (!send) {
      int need = read ? vx::kAccessRemoteRead : vx::kAccessRemoteWrite;
      remote = Resolve(f_.rkeys, op.wr.rdma.rkey, r->pd, op.wr.rdma.remote_addr, len, need);
      if ((!remote && len) || (r->access & need) != static_cast<unsigned>(need)) {
        EventTo(r->pd->ctx, vx::kEventQpAccessErr, r);
        f_.ToError(r);
        return Fail(q, op, vx::kWcRemAccessErr), Outcome::kDone;
      }
    }
    const bool consumes = send || op.wr.opcode == vx::kWrRdmaWriteWithImm;
    if (consumes && r->rq.empty()) {
      if (q->rnr_retry == 7) return Outcome::kWait;  // receiver not ready: retried forever
      if (!Expired(op, RnrMs(q->rnr_retry, r->min_rnr_timer), now_)) return Outcome::kWait;
      return Fail(q, op, vx::kWcRnrRetryExcErr), Outcome::kDone;
    }
    // The bytes move (inline bytes were copied at post time; others are read now, at wire time).
    if (send) {
      RecvOp rv = r->rq.front();
      if (len > Total(rv.sge)) {
        r->rq.pop_front();
        RecvCompletion(r, rv, vx::kWcLocLenErr, vx::kWcRecv, 0, nullptr, q->head.qp_num);
        f_.ToError(r);
        return Fail(q, op, kWcRemInvReqErr), Outcome::kDone;
      }
      std::vector<uint8_t*> dst;
      for (const vx::Sge& s : rv.sge) {
        uint8_t* p = Resolve(f_.lkeys, s.lkey, r->pd, s.addr, s.length, vx::kAccessLocalWrite);
        if (!p && s.length) {
          r->rq.pop_front();
          RecvCompletion(r, rv, vx::kWcLocProtErr, vx::kWcRecv, 0, nullptr, q->head.qp_num);
          f_.ToError(r);
          return Fail(q, op, kWcRemInvReqErr), Outcome::kDone;
        }
        dst.push_back(p);
      }
      Scatter(op, local, rv.sge, dst);
    } else if (read) {
      uint64_t off = 0;
      for (size_t i = 0; i < op.sge.size(); ++i) memcpy(local[i], remote + off, op.sge[i].length), off += op.sge[i].length;
    } else {
      Gather(op, local, remote);
    }
    q->sq_psn = (q->sq_psn + 1) & 0xffffff;
    r->rq_psn = (r->rq_psn + 1) & 0xffffff;
    if (consumes) {
      RecvOp rv = r->rq.front();
      r->rq.pop_front();
      RecvCompletion(r, rv, vx::kWcSuccess, send ? vx::kWcRecv : vx::kWcRecvRdmaWithImm, static_cast<uint32_t>(len),
                     &op.wr, q->head.qp_num);
    }
    op.delivered = true;
    return AckLost(q, op, len);
  }

  // After delivery: the ack reaches the sender unless a port drops acks (then the sender retries
  // until the dead-path time and fails although the data landed).
  Outcome AckLost(Qp* q, SendOp& op, uint64_t len) {
    Device* rd = q->dest_dev;
    if (DevOf(q)->port.fault == FAKEVERBS_FAULT_DROP_ACKS || (rd && rd->port.fault == FAKEVERBS_FAULT_DROP_ACKS))
      return DeadPath(q, op);
    if (op.signaled) SendCompletion(q, op, vx::kWcSuccess, op.wr.opcode == vx::kWrRdmaRead ? static_cast<uint32_t>(len) : 0);
    return Outcome::kDone;
  }

  void Gather(const SendOp& op, const std::vector<uint8_t*>& local, uint8_t* dst) {
    if (op.is_inline) {
      if (!op.inline_data.empty()) memcpy(dst, op.inline_data.data(), op.inline_data.size());
      return;
    }
    for (size_t i = 0; i < op.sge.size(); ++i) {
      if (op.sge[i].length) memcpy(dst, local[i], op.sge[i].length);
      dst += op.sge[i].length;
    }
  }

  void Scatter(const SendOp& op, const std::vector<uint8_t*>& local, const std::vector<vx::Sge>& rsge,
               const std::vector<uint8_t*>& dst) {
    std::vector<uint8_t> bytes(op.is_inline ? op.inline_data : std::vector<uint8_t>());
    if (!op.is_inline)
      for (size_t i = 0; i < op.sge.size(); ++i) bytes.insert(bytes.end(), local[i], local[i] + op.sge[i].length);
    size_t off = 0;
    for (size_t i = 0; i < rsge.size() && off < bytes.size(); ++i) {
      size_t n = std::min<size_t>(rsge[i].length, bytes.size() - off);
      memcpy(dst[i], bytes.data() + off, n);
      off += n;
    }
  }

  Clock::time_point now() const { return now_; }

 private:
  Fabric& f_;
  Clock::time_point now_;
};

}  // namespace

void Fabric::Push(Cq* cq, const Cqe& e) {
  if (cq->overrun) return;
  if (static_cast<int>(cq->q.size()) >= cq->head.cqe) {
    cq->overrun = true;  // the CQ is lost: poll_cq fails from now on
    EventTo(cq->ctx, vx::kEventCqErr, cq);
    return;
  }
  cq->q.push_back(e);
}

void Fabric::ToError(Qp* q) { q->head.state = vx::kQpsErr; }

void Fabric::Progress() {
  std::vector<Qp*> order;
  for (auto& [qpn, q] : qps) order.push_back(q);
  if (order.empty()) return;
  size_t start = rotate++ % order.size();
  Wire w(*this, Clock::now());
  for (size_t k = 0; k < order.size(); ++k) {
    Qp* q = order[(start + k) % order.size()];
    if (link && q->dest_host >= 0 && q->dest_host != host) {  // the responder is another process
      if (q->head.state == vx::kQpsRts) link->Progress(q, w.now());
      continue;
    }
    for (int n = 0; n < burst && q->head.state == vx::kQpsRts && !q->sq.empty(); ++n) {
      if (w.Execute(q, q->sq.front()) == Outcome::kWait) break;
      q->sq.pop_front();
    }
  }
  for (Qp* q : order)
    if (q->head.state == vx::kQpsErr) FlushQp(*this, q);
}

int PollCq(vx::Cq* cq, int n, vx::Wc* wc) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  f.Progress();
  Cq* c = CqOf(cq);
  if (c->overrun) return -1;
  int got = 0;
  while (got < n && !c->q.empty()) {
    const Cqe& e = c->q.front();
    wc[got++] = e.wc;
    if (e.send_side) {  // the send-queue slots up to this WR are free again (unsignalled ones too)
      auto it = f.qps.find(e.wc.qp_num);
      if (it != f.qps.end() && e.seq + 1 > it->second->sq_freed) it->second->sq_freed = e.seq + 1;
    }
    c->q.pop_front();
  }
  return got;
}

int PostSend(vx::Qp* qp, vx::SendWr* wr, vx::SendWr** bad) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  Qp* q = QpOf(qp);
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (DevOf(q)->fatal) return EIO;
    int st = q->head.state;
    if (st == vx::kQpsReset || st == vx::kQpsInit || st == vx::kQpsRtr) return EINVAL;
    if (q->sq_posted - q->sq_freed >= q->cap.max_send_wr) return ENOMEM;  // send queue full
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > q->cap.max_send_sge) return EINVAL;
    if (wr->opcode != vx::kWrRdmaWrite && wr->opcode != vx::kWrRdmaWriteWithImm && wr->opcode != vx::kWrSend &&
        wr->opcode != vx::kWrSendWithImm && wr->opcode != vx::kWrRdmaRead)
      return EINVAL;
    SendOp op;
    op.wr = *wr;
    op.wr.next = nullptr;
    op.sge.assign(wr->sg_list, wr->sg_list + wr->num_sge);
    op.wr.sg_list = nullptr;
    op.signaled = q->sig_all || (wr->send_flags & vx::kSendSignaled);
    if (wr->send_flags & vx::kSendInline) {
      if (wr->opcode == vx::kWrRdmaRead || Total(op.sge) > q->cap.max_inline_data) return EINVAL;
      op.is_inline = true;
      for (const vx::Sge& s : op.sge) {
        const auto* p = reinterpret_cast<const uint8_t*>(s.addr);
        op.inline_data.insert(op.inline_data.end(), p, p + s.length);  // copied now: the caller may reuse it
      }
    }
    op.seq = q->sq_posted++;
    q->sq.push_back(std::move(op));
  }
  *bad = nullptr;
  // The doorbell: towards another process the WRs leave without waiting for a poll (the HCA thread
  // sends them), as a real requester's do.
  if (f.link && q->dest_host >= 0 && q->dest_host != f.host) f.link->Kick();
  return 0;
}

int PostRecv(vx::Qp* qp, vx::RecvWr* wr, vx::RecvWr** bad) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  Qp* q = QpOf(qp);
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (DevOf(q)->fatal) return EIO;
    if (q->head.state == vx::kQpsReset) return EINVAL;
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > q->cap.max_recv_sge) return EINVAL;
    if (q->rq.size() >= q->cap.max_recv_wr) return ENOMEM;
    q->rq.push_back(RecvOp{wr->wr_id, std::vector<vx::Sge>(wr->sg_list, wr->sg_list + wr->num_sge)});
  }
  *bad = nullptr;
  return 0;
}

}  // namespace fakeverbs
