#include "transports/ib/ib_qp.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "rerail/params.h"

namespace rr::ib {
namespace {

vx::QpHead* Head(vx::Qp* qp) { return reinterpret_cast<vx::QpHead*>(qp); }
vx::ContextOps& Ops(vx::Qp* qp) { return reinterpret_cast<vx::ContextHead*>(Head(qp)->context)->ops; }

// PSNs are 24 bits; a fresh random one per connection (as NCCL's ncclIbCreateQp callers do) keeps a
// stale packet of an earlier incarnation of the QP from matching.
uint32_t NewPsn() {
  static thread_local std::mt19937 rng{std::random_device{}()};
  return rng() & 0xffffff;
}

}  // namespace

QpOptions QpOptions::FromParams() {
  QpOptions o;
  o.timeout = static_cast<uint8_t>(Params::Int(ParamId::IbTimeout));
  o.retry_cnt = static_cast<uint8_t>(Params::Int(ParamId::IbRetryCnt));
  return o;
}

double DeadPathMs(uint8_t timeout, uint8_t retry_cnt) {
  return 4.096e-3 * static_cast<double>(1ull << timeout) * (retry_cnt + 1);
}

Status IbQp::Create(IbDevice& dev, IbCq& send_cq, IbCq& recv_cq, const QpOptions& opt, std::unique_ptr<IbQp>* out) {
  std::unique_ptr<IbQp> q(new IbQp(dev, opt));
  vx::QpInitAttr init{};
  init.send_cq = send_cq.cq();
  init.recv_cq = recv_cq.cq();
  init.qp_type = vx::kQptRc;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = opt.max_send;
  init.cap.max_recv_wr = opt.max_recv;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = dev.max_inline();
  q->qp_ = dev.lib().create_qp(dev.pd(), &init);
  if (q->qp_ == nullptr)
    return Status(Code::kSystemError, "ibv_create_qp(" + dev.port().name + "): " + strerror(errno));
  q->psn_ = NewPsn();
  *out = std::move(q);
  return Status::Ok();
}

IbQp::~IbQp() {
  if (qp_) dev_.lib().destroy_qp(qp_);
}

uint32_t IbQp::qpn() const { return Head(qp_)->qp_num; }

QpEndpoint IbQp::Endpoint() const {
  QpEndpoint e;
  e.gid = dev_.port().gid;
  e.qpn = qpn();
  e.psn = psn_;
  e.lid = dev_.port().lid;
  e.mtu = static_cast<uint8_t>(dev_.mtu_enum());
  e.link_layer = dev_.port().link_layer;
  return e;
}

Status IbQp::Modify(vx::QpAttr* attr, int mask, const char* what) {
  if (dev_.lib().modify_qp(qp_, attr, mask) != 0) {
    int e = errno;
    return Status(Code::kSystemError, std::string("ibv_modify_qp(") + what + ", " + dev_.port().name + ", qpn " +
                                          std::to_string(qpn()) + "): " + strerror(e));
  }
  return Status::Ok();
}

Status IbQp::Connect(const QpEndpoint& remote) {
  if (remote.link_layer != dev_.port().link_layer)
    return Status::Remote("peer QP is on a different link layer (" + std::string(LinkLayerName(remote.link_layer)) +
                          " vs " + LinkLayerName(dev_.port().link_layer) + ")");
  vx::QpAttr a{};
  a.qp_state = vx::kQpsInit;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(dev_.port().port);
  a.qp_access_flags = vx::kAccessRemoteWrite | vx::kAccessRemoteRead | vx::kAccessLocalWrite;
  RR_CHECK(Modify(&a, vx::kQpState | vx::kQpPkeyIndex | vx::kQpPort | vx::kQpAccessFlags, "INIT"));

  a = vx::QpAttr{};
  a.qp_state = vx::kQpsRtr;
  a.path_mtu = std::min<int>(dev_.mtu_enum(), remote.mtu);
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<uint8_t>(dev_.port().port);
  if (dev_.port().link_layer == vx::kLinkLayerEthernet) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = remote.gid;
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(dev_.port().gid_index);
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = opt_.traffic_class;
  } else {
    a.ah_attr.dlid = remote.lid;
  }
  RR_CHECK(Modify(&a, vx::kQpState | vx::kQpAv | vx::kQpPathMtu | vx::kQpDestQpn | vx::kQpRqPsn |
                          vx::kQpMaxDestRdAtomic | vx::kQpMinRnrTimer, "RTR"));

  a = vx::QpAttr{};
  a.qp_state = vx::kQpsRts;
  a.timeout = opt_.timeout;
  a.retry_cnt = opt_.retry_cnt;
  a.rnr_retry = opt_.rnr_retry;
  a.sq_psn = psn_;
  a.max_rd_atomic = 1;
  return Modify(&a, vx::kQpState | vx::kQpTimeout | vx::kQpRetryCnt | vx::kQpRnrRetry | vx::kQpSqPsn | vx::kQpMaxQpRdAtomic,
                "RTS");
}

Status IbQp::Reset() {
  vx::QpAttr a{};
  a.qp_state = vx::kQpsReset;
  RR_CHECK(Modify(&a, vx::kQpState, "RESET"));
  psn_ = NewPsn();
  return Status::Ok();
}

Status IbQp::ToError() {
  vx::QpAttr a{};
  a.qp_state = vx::kQpsErr;
  return Modify(&a, vx::kQpState, "ERR");
}

int IbQp::QueryState() const {
  vx::QpAttr a{};
  vx::QpInitAttr init{};
  if (dev_.lib().query_qp(qp_, &a, vx::kQpState, &init) != 0) return vx::kQpsUnknown;
  return a.qp_state;
}

Status IbQp::Post(vx::SendWr* wr) {
  vx::SendWr* bad = nullptr;
  int rc = Ops(qp_).post_send(qp_, wr, &bad);
  if (rc != 0)
    return Status(Code::kSystemError, "ibv_post_send(" + dev_.port().name + ", qpn " + std::to_string(qpn()) +
                                          "): " + strerror(rc));
  return Status::Ok();
}

Status IbQp::PostWrite(uint64_t wr_id, const void* laddr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
                       bool with_imm, uint32_t imm, bool signaled, bool inline_data) {
  vx::Sge sge{reinterpret_cast<uint64_t>(laddr), len, lkey};
  vx::SendWr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = len ? &sge : nullptr;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = with_imm ? vx::kWrRdmaWriteWithImm : vx::kWrRdmaWrite;
  wr.send_flags = (signaled ? vx::kSendSignaled : 0u) | (inline_data ? vx::kSendInline : 0u);
  wr.imm_data = htonl(imm);
  wr.rdma.remote_addr = raddr;
  wr.rdma.rkey = rkey;
  return Post(&wr);
}

Status IbQp::PostRead(uint64_t wr_id, void* laddr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey) {
  vx::Sge sge{reinterpret_cast<uint64_t>(laddr), len, lkey};
  vx::SendWr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = vx::kWrRdmaRead;
  wr.send_flags = vx::kSendSignaled;
  wr.rdma.remote_addr = raddr;
  wr.rdma.rkey = rkey;
  return Post(&wr);
}

Status IbQp::PostSend(uint64_t wr_id, const void* laddr, uint32_t len, uint32_t lkey, bool inline_data) {
  vx::Sge sge{reinterpret_cast<uint64_t>(laddr), len, lkey};
  vx::SendWr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = len ? &sge : nullptr;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = vx::kWrSend;
  wr.send_flags = vx::kSendSignaled | (inline_data ? vx::kSendInline : 0u);
  return Post(&wr);
}

Status IbQp::PostRecv(uint64_t wr_id) { return PostRecv(wr_id, nullptr, 0, 0); }

Status IbQp::PostRecv(uint64_t wr_id, void* addr, uint32_t len, uint32_t lkey) {
  vx::Sge sge{reinterpret_cast<uint64_t>(addr), len, lkey};
  vx::RecvWr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = len ? &sge : nullptr;
  wr.num_sge = len ? 1 : 0;
  vx::RecvWr* bad = nullptr;
  int rc = Ops(qp_).post_recv(qp_, &wr, &bad);
  if (rc != 0)
    return Status(Code::kSystemError, "ibv_post_recv(" + dev_.port().name + ", qpn " + std::to_string(qpn()) +
                                          "): " + strerror(rc));
  return Status::Ok();
}

}  // namespace rr::ib
