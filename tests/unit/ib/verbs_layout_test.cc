// rerail's own verbs declarations (net_plugin/transports/ib/verbs_api.h) against rdma-core's real
// <infiniband/verbs.h>: every field rerail reads sits at the same offset with the same size, and the
// enum values match. Built only where libibverbs-dev is installed; the plugin itself never includes it.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstddef>

#include "transports/ib/verbs_api.h"

namespace {

namespace vx = rr::ib::vx;

#define RR_SAME_FIELD(ours, theirs, field)                                              \
  static_assert(offsetof(ours, field) == offsetof(theirs, field), #field " offset");    \
  static_assert(sizeof(ours::field) == sizeof(theirs::field), #field " size")

static_assert(sizeof(vx::Gid) == sizeof(ibv_gid));
static_assert(offsetof(vx::Gid, global.interface_id) == offsetof(ibv_gid, global.interface_id));

static_assert(sizeof(vx::DeviceAttr) == sizeof(ibv_device_attr));
RR_SAME_FIELD(vx::DeviceAttr, ibv_device_attr, fw_ver);
RR_SAME_FIELD(vx::DeviceAttr, ibv_device_attr, node_guid);
RR_SAME_FIELD(vx::DeviceAttr, ibv_device_attr, vendor_id);
RR_SAME_FIELD(vx::DeviceAttr, ibv_device_attr, vendor_part_id);
RR_SAME_FIELD(vx::DeviceAttr, ibv_device_attr, max_qp_wr);
RR_SAME_FIELD(vx::DeviceAttr, ibv_device_attr, max_sge);
RR_SAME_FIELD(vx::DeviceAttr, ibv_device_attr, max_cqe);
RR_SAME_FIELD(vx::DeviceAttr, ibv_device_attr, max_qp_rd_atom);
RR_SAME_FIELD(vx::DeviceAttr, ibv_device_attr, atomic_cap);
RR_SAME_FIELD(vx::DeviceAttr, ibv_device_attr, max_srq_sge);
RR_SAME_FIELD(vx::DeviceAttr, ibv_device_attr, max_pkeys);
RR_SAME_FIELD(vx::DeviceAttr, ibv_device_attr, phys_port_cnt);

static_assert(sizeof(vx::PortAttr) == sizeof(ibv_port_attr));
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, state);
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, max_mtu);
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, active_mtu);
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, gid_tbl_len);
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, port_cap_flags);
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, max_msg_sz);
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, lid);
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, sm_lid);
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, active_width);
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, active_speed);
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, phys_state);
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, link_layer);
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, flags);
RR_SAME_FIELD(vx::PortAttr, ibv_port_attr, port_cap_flags2);

constexpr int I(int v) { return v; }  // compare enum values across the two enum types
static_assert(I(vx::kPortActive) == I(IBV_PORT_ACTIVE) && I(vx::kPortDown) == I(IBV_PORT_DOWN) &&
              I(vx::kPortActiveDefer) == I(IBV_PORT_ACTIVE_DEFER));
static_assert(I(vx::kLinkLayerInfiniband) == I(IBV_LINK_LAYER_INFINIBAND) &&
              I(vx::kLinkLayerEthernet) == I(IBV_LINK_LAYER_ETHERNET) &&
              I(vx::kLinkLayerUnspecified) == I(IBV_LINK_LAYER_UNSPECIFIED));
static_assert(sizeof(vx::PortAttr::state) == sizeof(enum ibv_port_state));

static_assert(sizeof(vx::Mr) == sizeof(ibv_mr));
RR_SAME_FIELD(vx::Mr, ibv_mr, addr);
RR_SAME_FIELD(vx::Mr, ibv_mr, length);
RR_SAME_FIELD(vx::Mr, ibv_mr, lkey);
RR_SAME_FIELD(vx::Mr, ibv_mr, rkey);
RR_SAME_FIELD(vx::Pd, ibv_pd, context);
RR_SAME_FIELD(vx::Pd, ibv_pd, handle);

static_assert(sizeof(vx::ContextOps) == sizeof(ibv_context_ops));
RR_SAME_FIELD(vx::ContextOps, ibv_context_ops, poll_cq);
RR_SAME_FIELD(vx::ContextOps, ibv_context_ops, req_notify_cq);
RR_SAME_FIELD(vx::ContextOps, ibv_context_ops, post_send);
RR_SAME_FIELD(vx::ContextOps, ibv_context_ops, post_recv);
static_assert(offsetof(vx::ContextHead, ops) == offsetof(ibv_context, ops));
static_assert(offsetof(vx::ContextHead, async_fd) == offsetof(ibv_context, async_fd));
static_assert(offsetof(vx::ContextHead, num_comp_vectors) == offsetof(ibv_context, num_comp_vectors));
static_assert(offsetof(vx::CqHead, cqe) == offsetof(ibv_cq, cqe));
static_assert(offsetof(vx::QpHead, context) == offsetof(ibv_qp, context));
static_assert(offsetof(vx::QpHead, qp_num) == offsetof(ibv_qp, qp_num));
static_assert(offsetof(vx::QpHead, state) == offsetof(ibv_qp, state));
static_assert(offsetof(vx::QpHead, qp_type) == offsetof(ibv_qp, qp_type));

static_assert(sizeof(vx::QpCap) == sizeof(ibv_qp_cap));
RR_SAME_FIELD(vx::QpCap, ibv_qp_cap, max_inline_data);
static_assert(sizeof(vx::QpInitAttr) == sizeof(ibv_qp_init_attr));
RR_SAME_FIELD(vx::QpInitAttr, ibv_qp_init_attr, cap);
RR_SAME_FIELD(vx::QpInitAttr, ibv_qp_init_attr, qp_type);
RR_SAME_FIELD(vx::QpInitAttr, ibv_qp_init_attr, sq_sig_all);
static_assert(sizeof(vx::GlobalRoute) == sizeof(ibv_global_route));
RR_SAME_FIELD(vx::GlobalRoute, ibv_global_route, sgid_index);
RR_SAME_FIELD(vx::GlobalRoute, ibv_global_route, hop_limit);
RR_SAME_FIELD(vx::GlobalRoute, ibv_global_route, traffic_class);
static_assert(sizeof(vx::AhAttr) == sizeof(ibv_ah_attr));
RR_SAME_FIELD(vx::AhAttr, ibv_ah_attr, dlid);
RR_SAME_FIELD(vx::AhAttr, ibv_ah_attr, is_global);
RR_SAME_FIELD(vx::AhAttr, ibv_ah_attr, port_num);
static_assert(sizeof(vx::QpAttr) == sizeof(ibv_qp_attr));
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, qp_state);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, path_mtu);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, rq_psn);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, sq_psn);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, dest_qp_num);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, qp_access_flags);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, ah_attr);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, pkey_index);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, max_rd_atomic);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, max_dest_rd_atomic);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, min_rnr_timer);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, port_num);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, timeout);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, retry_cnt);
RR_SAME_FIELD(vx::QpAttr, ibv_qp_attr, rnr_retry);
static_assert(sizeof(vx::Sge) == sizeof(ibv_sge));
RR_SAME_FIELD(vx::Sge, ibv_sge, lkey);
static_assert(sizeof(vx::SendWr) == sizeof(ibv_send_wr));
RR_SAME_FIELD(vx::SendWr, ibv_send_wr, next);
RR_SAME_FIELD(vx::SendWr, ibv_send_wr, sg_list);
RR_SAME_FIELD(vx::SendWr, ibv_send_wr, num_sge);
RR_SAME_FIELD(vx::SendWr, ibv_send_wr, opcode);
RR_SAME_FIELD(vx::SendWr, ibv_send_wr, send_flags);
RR_SAME_FIELD(vx::SendWr, ibv_send_wr, imm_data);
static_assert(offsetof(vx::SendWr, rdma.remote_addr) == offsetof(ibv_send_wr, wr.rdma.remote_addr));
static_assert(offsetof(vx::SendWr, rdma.rkey) == offsetof(ibv_send_wr, wr.rdma.rkey));
static_assert(sizeof(vx::RecvWr) == sizeof(ibv_recv_wr));
RR_SAME_FIELD(vx::RecvWr, ibv_recv_wr, num_sge);
static_assert(sizeof(vx::Wc) == sizeof(ibv_wc));
RR_SAME_FIELD(vx::Wc, ibv_wc, status);
RR_SAME_FIELD(vx::Wc, ibv_wc, opcode);
RR_SAME_FIELD(vx::Wc, ibv_wc, byte_len);
RR_SAME_FIELD(vx::Wc, ibv_wc, imm_data);
RR_SAME_FIELD(vx::Wc, ibv_wc, qp_num);
RR_SAME_FIELD(vx::Wc, ibv_wc, wc_flags);

static_assert(I(vx::kQpsRts) == I(IBV_QPS_RTS) && I(vx::kQpsErr) == I(IBV_QPS_ERR) && I(vx::kQptRc) == I(IBV_QPT_RC));
static_assert(I(vx::kQpState) == I(IBV_QP_STATE) && I(vx::kQpAccessFlags) == I(IBV_QP_ACCESS_FLAGS) &&
              I(vx::kQpPkeyIndex) == I(IBV_QP_PKEY_INDEX) && I(vx::kQpPort) == I(IBV_QP_PORT) &&
              I(vx::kQpAv) == I(IBV_QP_AV) && I(vx::kQpPathMtu) == I(IBV_QP_PATH_MTU) &&
              I(vx::kQpTimeout) == I(IBV_QP_TIMEOUT) && I(vx::kQpRetryCnt) == I(IBV_QP_RETRY_CNT) &&
              I(vx::kQpRnrRetry) == I(IBV_QP_RNR_RETRY) && I(vx::kQpRqPsn) == I(IBV_QP_RQ_PSN) &&
              I(vx::kQpMaxQpRdAtomic) == I(IBV_QP_MAX_QP_RD_ATOMIC) && I(vx::kQpMinRnrTimer) == I(IBV_QP_MIN_RNR_TIMER) &&
              I(vx::kQpSqPsn) == I(IBV_QP_SQ_PSN) && I(vx::kQpMaxDestRdAtomic) == I(IBV_QP_MAX_DEST_RD_ATOMIC) &&
              I(vx::kQpDestQpn) == I(IBV_QP_DEST_QPN));
static_assert(I(vx::kAccessLocalWrite) == I(IBV_ACCESS_LOCAL_WRITE) && I(vx::kAccessRemoteWrite) == I(IBV_ACCESS_REMOTE_WRITE) &&
              I(vx::kAccessRemoteRead) == I(IBV_ACCESS_REMOTE_READ));
static_assert(I(vx::kWrRdmaWrite) == I(IBV_WR_RDMA_WRITE) && I(vx::kWrRdmaWriteWithImm) == I(IBV_WR_RDMA_WRITE_WITH_IMM) &&
              I(vx::kWrSend) == I(IBV_WR_SEND) && I(vx::kWrSendWithImm) == I(IBV_WR_SEND_WITH_IMM) &&
              I(vx::kWrRdmaRead) == I(IBV_WR_RDMA_READ));
static_assert(I(vx::kSendSignaled) == I(IBV_SEND_SIGNALED) && I(vx::kSendInline) == I(IBV_SEND_INLINE) &&
              I(vx::kSendFence) == I(IBV_SEND_FENCE) && I(vx::kSendSolicited) == I(IBV_SEND_SOLICITED));
static_assert(I(vx::kWcSuccess) == I(IBV_WC_SUCCESS) && I(vx::kWcLocLenErr) == I(IBV_WC_LOC_LEN_ERR) &&
              I(vx::kWcLocQpOpErr) == I(IBV_WC_LOC_QP_OP_ERR) && I(vx::kWcLocProtErr) == I(IBV_WC_LOC_PROT_ERR) &&
              I(vx::kWcWrFlushErr) == I(IBV_WC_WR_FLUSH_ERR) && I(vx::kWcRemAccessErr) == I(IBV_WC_REM_ACCESS_ERR) &&
              I(vx::kWcRemOpErr) == I(IBV_WC_REM_OP_ERR) && I(vx::kWcRetryExcErr) == I(IBV_WC_RETRY_EXC_ERR) &&
              I(vx::kWcRnrRetryExcErr) == I(IBV_WC_RNR_RETRY_EXC_ERR) && I(vx::kWcFatalErr) == I(IBV_WC_FATAL_ERR));
static_assert(I(vx::kWcSend) == I(IBV_WC_SEND) && I(vx::kWcRdmaWrite) == I(IBV_WC_RDMA_WRITE) &&
              I(vx::kWcRdmaRead) == I(IBV_WC_RDMA_READ) && I(vx::kWcRecv) == I(IBV_WC_RECV) &&
              I(vx::kWcRecvRdmaWithImm) == I(IBV_WC_RECV_RDMA_WITH_IMM) && I(vx::kWcWithImm) == I(IBV_WC_WITH_IMM));

static_assert(sizeof(vx::AsyncEvent) == sizeof(ibv_async_event));
static_assert(offsetof(vx::AsyncEvent, element.port_num) == offsetof(ibv_async_event, element.port_num));
static_assert(offsetof(vx::AsyncEvent, event_type) == offsetof(ibv_async_event, event_type));
static_assert(I(vx::kEventCqErr) == I(IBV_EVENT_CQ_ERR) && I(vx::kEventQpFatal) == I(IBV_EVENT_QP_FATAL) &&
              I(vx::kEventQpReqErr) == I(IBV_EVENT_QP_REQ_ERR) && I(vx::kEventQpAccessErr) == I(IBV_EVENT_QP_ACCESS_ERR) &&
              I(vx::kEventCommEst) == I(IBV_EVENT_COMM_EST) && I(vx::kEventPathMigErr) == I(IBV_EVENT_PATH_MIG_ERR) &&
              I(vx::kEventDeviceFatal) == I(IBV_EVENT_DEVICE_FATAL) && I(vx::kEventPortActive) == I(IBV_EVENT_PORT_ACTIVE) &&
              I(vx::kEventPortErr) == I(IBV_EVENT_PORT_ERR) && I(vx::kEventLidChange) == I(IBV_EVENT_LID_CHANGE) &&
              I(vx::kEventGidChange) == I(IBV_EVENT_GID_CHANGE));

// The function types match the real prototypes (argument and result types, modulo the opaque structs).
template <typename T>
constexpr size_t kSizeOr0 = sizeof(T);
template <>
constexpr size_t kSizeOr0<void> = 0;
template <typename Ours, typename Theirs>
constexpr bool kSameArity = false;
template <typename R1, typename... A1, typename R2, typename... A2>
constexpr bool kSameArity<R1 (*)(A1...), R2 (*)(A2...)> =
    sizeof...(A1) == sizeof...(A2) && kSizeOr0<R1> == kSizeOr0<R2> && ((kSizeOr0<A1> == kSizeOr0<A2>) && ...);
static_assert(kSameArity<vx::GetDeviceListFn, decltype(&ibv_get_device_list)>);
static_assert(kSameArity<vx::QueryDeviceFn, decltype(&ibv_query_device)>);
static_assert(kSameArity<vx::QueryGidFn, decltype(&ibv_query_gid)>);
static_assert(kSameArity<vx::GetDeviceGuidFn, decltype(&ibv_get_device_guid)>);
static_assert(kSameArity<vx::OpenDeviceFn, decltype(&ibv_open_device)>);
static_assert(kSameArity<vx::AllocPdFn, decltype(&ibv_alloc_pd)>);
static_assert(kSameArity<vx::CreateCqFn, decltype(&ibv_create_cq)>);
static_assert(kSameArity<vx::CreateQpFn, decltype(&ibv_create_qp)>);
static_assert(kSameArity<vx::ModifyQpFn, decltype(&ibv_modify_qp)>);
static_assert(kSameArity<vx::QueryQpFn, decltype(&ibv_query_qp)>);
static_assert(kSameArity<vx::DestroyQpFn, decltype(&ibv_destroy_qp)>);
static_assert(kSameArity<vx::DeregMrFn, decltype(&ibv_dereg_mr)>);
static_assert(kSameArity<vx::StrFn, decltype(&ibv_wc_status_str)>);
static_assert(kSameArity<vx::GetAsyncEventFn, decltype(&ibv_get_async_event)>);
static_assert(kSameArity<vx::AckAsyncEventFn, decltype(&ibv_ack_async_event)>);

// The checks above are compile-time; this records in the test log which header they ran against.
TEST(VerbsLayout, CheckedAgainstRdmaCoreHeader) {
  EXPECT_EQ(sizeof(vx::PortAttr), sizeof(ibv_port_attr));
  EXPECT_EQ(offsetof(vx::DeviceAttr, phys_port_cnt), offsetof(ibv_device_attr, phys_port_cnt));
}

}  // namespace
