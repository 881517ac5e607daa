// rerail — its own minimal declarations of the libibverbs ABI (rdma-core, IBVERBS_1.1 and later).
//
// Contract
//   * Written from rdma-core's <infiniband/verbs.h> (v44) for the fields rerail reads; rerail never
//     includes that header in the plugin and never links libibverbs: the symbols come from
//     VerbsLib (verbs_loader.h) at run time. Every struct whose layout rerail relies on is checked
//     against the real header, field by field, in tests/unit/ib/verbs_layout_test.cc (built wherever
//     libibverbs-dev is installed).
//   * Structs rerail only passes around (device, context, and later pd/cq/qp/mr) are opaque here;
//     they grow declarations, and layout checks, when a stage of the data path needs a field.
//   * Names live in rr::ib::vx so they never clash with the real header in the layout test.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rr::ib::vx {

// Opaque handles (struct ibv_device, struct ibv_context).
struct Device;
struct Context;

// union ibv_gid: 16 raw bytes; for RoCE an IPv6 address (IPv4-mapped ::ffff:a.b.c.d for IPv4).
union Gid {
  uint8_t raw[16];
  struct {
    uint64_t subnet_prefix;  // big endian
    uint64_t interface_id;   // big endian
  } global;
};

// enum ibv_port_state
enum PortState : int {
  kPortNop = 0,
  kPortDown = 1,
  kPortInit = 2,
  kPortArmed = 3,
  kPortActive = 4,
  kPortActiveDefer = 5,
};

// IBV_LINK_LAYER_*
enum LinkLayer : uint8_t {
  kLinkLayerUnspecified = 0,
  kLinkLayerInfiniband = 1,
  kLinkLayerEthernet = 2,
};

// struct ibv_device_attr (what ibv_query_device@IBVERBS_1.1 fills).
struct DeviceAttr {
  char fw_ver[64];
  uint64_t node_guid;       // big endian
  uint64_t sys_image_guid;  // big endian
  uint64_t max_mr_size;
  uint64_t page_size_cap;
  uint32_t vendor_id;
  uint32_t vendor_part_id;
  uint32_t hw_ver;
  int max_qp;
  int max_qp_wr;
  unsigned int device_cap_flags;
  int max_sge;
  int max_sge_rd;
  int max_cq;
  int max_cqe;
  int max_mr;
  int max_pd;
  int max_qp_rd_atom;
  int max_ee_rd_atom;
  int max_res_rd_atom;
  int max_qp_init_rd_atom;
  int max_ee_init_rd_atom;
  int atomic_cap;  // enum ibv_atomic_cap
  int max_ee;
  int max_rdd;
  int max_mw;
  int max_raw_ipv6_qp;
  int max_raw_ethy_qp;
  int max_mcast_grp;
  int max_mcast_qp_attach;
  int max_total_mcast_qp_attach;
  int max_ah;
  int max_fmr;
  int max_map_per_fmr;
  int max_srq;
  int max_srq_wr;
  int max_srq_sge;
  uint16_t max_pkeys;
  uint8_t local_ca_ack_delay;
  uint8_t phys_port_cnt;
};

// struct ibv_port_attr. ibv_query_port@IBVERBS_1.1 is declared with the older, shorter
// _compat_ibv_port_attr, but the providers fill the whole current struct (NCCL passes it the same
// way); rerail always passes a full PortAttr.
struct PortAttr {
  int state;       // PortState
  int max_mtu;     // enum ibv_mtu: 1 = 256 ... 5 = 4096
  int active_mtu;  // enum ibv_mtu
  int gid_tbl_len;
  uint32_t port_cap_flags;
  uint32_t max_msg_sz;
  uint32_t bad_pkey_cntr;
  uint32_t qkey_viol_cntr;
  uint16_t pkey_tbl_len;
  uint16_t lid;
  uint16_t sm_lid;
  uint8_t lmc;
  uint8_t max_vl_num;
  uint8_t sm_sl;
  uint8_t subnet_timeout;
  uint8_t init_type_reply;
  uint8_t active_width;  // bit mask: 1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x
  uint8_t active_speed;  // bit mask: 1 = SDR ... 128 = NDR
  uint8_t phys_state;
  uint8_t link_layer;    // LinkLayer
  uint8_t flags;
  uint16_t port_cap_flags2;
};

// ---- data-path objects ----------------------------------------------------------------------------
// Only the leading, stable fields of the objects libibverbs allocates are declared: rerail reads them
// and never allocates or copies these structs itself.

struct Cq;
struct Qp;
struct Srq;
struct CompChannel;
struct RecvWr;
struct SendWr;
struct Wc;

// struct ibv_pd (leading fields).
struct Pd {
  Context* context;
  uint32_t handle;
};

// struct ibv_mr (whole struct; allocated by libibverbs).
struct Mr {
  Context* context;
  Pd* pd;
  void* addr;
  size_t length;
  uint32_t handle;
  uint32_t lkey;
  uint32_t rkey;
};

// struct ibv_context_ops: post and poll are reached through this table (the verbs.h inlines do the
// same: ibv_post_send(qp, ...) is qp->context->ops.post_send(qp, ...)). Slots rerail never calls are
// untyped placeholders of pointer size.
struct ContextOps {
  void* compat_query_device;
  void* compat_query_port;
  void* compat_alloc_pd;
  void* compat_dealloc_pd;
  void* compat_reg_mr;
  void* compat_rereg_mr;
  void* compat_dereg_mr;
  void* alloc_mw;
  void* bind_mw;
  void* dealloc_mw;
  void* compat_create_cq;
  int (*poll_cq)(Cq* cq, int num_entries, Wc* wc);
  int (*req_notify_cq)(Cq* cq, int solicited_only);
  void* compat_cq_event;
  void* compat_resize_cq;
  void* compat_destroy_cq;
  void* compat_create_srq;
  void* compat_modify_srq;
  void* compat_query_srq;
  void* compat_destroy_srq;
  void* post_srq_recv;
  void* compat_create_qp;
  void* compat_query_qp;
  void* compat_modify_qp;
  void* compat_destroy_qp;
  int (*post_send)(Qp* qp, SendWr* wr, SendWr** bad_wr);
  int (*post_recv)(Qp* qp, RecvWr* wr, RecvWr** bad_wr);
  void* compat_create_ah;
  void* compat_destroy_ah;
  void* compat_attach_mcast;
  void* compat_detach_mcast;
  void* compat_async_event;
};

// struct ibv_context (leading fields: the ops table and the async event descriptor).
struct ContextHead {
  Device* device;
  ContextOps ops;
  int cmd_fd;
  int async_fd;
  int num_comp_vectors;
};

// struct ibv_cq (leading fields).
struct CqHead {
  Context* context;
  CompChannel* channel;
  void* cq_context;
  uint32_t handle;
  int cqe;
};

// enum ibv_qp_state
enum QpState : int { kQpsReset = 0, kQpsInit, kQpsRtr, kQpsRts, kQpsSqd, kQpsSqe, kQpsErr, kQpsUnknown };
// enum ibv_qp_type (RC only)
enum QpType : int { kQptRc = 2 };

// struct ibv_qp (leading fields).
struct QpHead {
  Context* context;
  void* qp_context;
  Pd* pd;
  Cq* send_cq;
  Cq* recv_cq;
  Srq* srq;
  uint32_t handle;
  uint32_t qp_num;
  int state;    // QpState
  int qp_type;  // QpType
};

// struct ibv_qp_cap
struct QpCap {
  uint32_t max_send_wr;
  uint32_t max_recv_wr;
  uint32_t max_send_sge;
  uint32_t max_recv_sge;
  uint32_t max_inline_data;
};

// struct ibv_qp_init_attr
struct QpInitAttr {
  void* qp_context;
  Cq* send_cq;
  Cq* recv_cq;
  Srq* srq;
  QpCap cap;
  int qp_type;  // QpType
  int sq_sig_all;
};

// struct ibv_global_route
struct GlobalRoute {
  Gid dgid;
  uint32_t flow_label;
  uint8_t sgid_index;
  uint8_t hop_limit;
  uint8_t traffic_class;
};

// struct ibv_ah_attr
struct AhAttr {
  GlobalRoute grh;
  uint16_t dlid;
  uint8_t sl;
  uint8_t src_path_bits;
  uint8_t static_rate;
  uint8_t is_global;
  uint8_t port_num;
};

// struct ibv_qp_attr
struct QpAttr {
  int qp_state;      // QpState
  int cur_qp_state;  // QpState
  int path_mtu;      // enum ibv_mtu
  int path_mig_state;
  uint32_t qkey;
  uint32_t rq_psn;
  uint32_t sq_psn;
  uint32_t dest_qp_num;
  unsigned int qp_access_flags;
  QpCap cap;
  AhAttr ah_attr;
  AhAttr alt_ah_attr;
  uint16_t pkey_index;
  uint16_t alt_pkey_index;
  uint8_t en_sqd_async_notify;
  uint8_t sq_draining;
  uint8_t max_rd_atomic;
  uint8_t max_dest_rd_atomic;
  uint8_t min_rnr_timer;
  uint8_t port_num;
  uint8_t timeout;
  uint8_t retry_cnt;
  uint8_t rnr_retry;
  uint8_t alt_port_num;
  uint8_t alt_timeout;
  uint32_t rate_limit;
};

// enum ibv_qp_attr_mask
enum QpAttrMask : int {
  kQpState = 1 << 0,
  kQpAccessFlags = 1 << 3,
  kQpPkeyIndex = 1 << 4,
  kQpPort = 1 << 5,
  kQpAv = 1 << 7,
  kQpPathMtu = 1 << 8,
  kQpTimeout = 1 << 9,
  kQpRetryCnt = 1 << 10,
  kQpRnrRetry = 1 << 11,
  kQpRqPsn = 1 << 12,
  kQpMaxQpRdAtomic = 1 << 13,
  kQpMinRnrTimer = 1 << 15,
  kQpSqPsn = 1 << 16,
  kQpMaxDestRdAtomic = 1 << 17,
  kQpDestQpn = 1 << 20,
};

// enum ibv_access_flags
enum Access : int { kAccessLocalWrite = 1, kAccessRemoteWrite = 1 << 1, kAccessRemoteRead = 1 << 2 };

// struct ibv_sge
struct Sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

// enum ibv_wr_opcode / ibv_send_flags
enum WrOpcode : int { kWrRdmaWrite = 0, kWrRdmaWriteWithImm = 1, kWrSend = 2, kWrSendWithImm = 3, kWrRdmaRead = 4 };
enum SendFlags : unsigned { kSendFence = 1, kSendSignaled = 1 << 1, kSendSolicited = 1 << 2, kSendInline = 1 << 3 };

// struct ibv_send_wr. The trailing unions (XRC, memory-window bind, TSO) are never used by rerail: kept
// as zeroed bytes of the right size.
struct SendWr {
  uint64_t wr_id;
  SendWr* next;
  Sge* sg_list;
  int num_sge;
  int opcode;  // WrOpcode
  unsigned int send_flags;
  uint32_t imm_data;  // big endian on the wire (htonl)
  struct {
    uint64_t remote_addr;
    uint32_t rkey;
    uint32_t pad_atomic[5];  // the atomic/ud members of the union are larger
  } rdma;
  uint32_t qp_type_xrc_remote_srqn;
  uint32_t pad;
  uint64_t bind_mw_tso[6];
};

// struct ibv_recv_wr
struct RecvWr {
  uint64_t wr_id;
  RecvWr* next;
  Sge* sg_list;
  int num_sge;
};

// enum ibv_wc_status (the ones rerail distinguishes; others are errors all the same)
enum WcStatus : int {
  kWcSuccess = 0,
  kWcLocLenErr = 1,
  kWcLocQpOpErr = 2,
  kWcLocProtErr = 4,
  kWcWrFlushErr = 5,
  kWcRemAccessErr = 10,
  kWcRemOpErr = 11,
  kWcRetryExcErr = 12,
  kWcRnrRetryExcErr = 13,
  kWcFatalErr = 19,
};
// enum ibv_wc_opcode
enum WcOpcode : int { kWcSend = 0, kWcRdmaWrite = 1, kWcRdmaRead = 2, kWcRecv = 1 << 7, kWcRecvRdmaWithImm = (1 << 7) + 1 };
enum WcFlags : unsigned { kWcWithImm = 1 << 1 };

// struct ibv_wc
struct Wc {
  uint64_t wr_id;
  int status;  // WcStatus
  int opcode;  // WcOpcode
  uint32_t vendor_err;
  uint32_t byte_len;
  uint32_t imm_data;  // big endian
  uint32_t qp_num;
  uint32_t src_qp;
  unsigned int wc_flags;
  uint16_t pkey_index;
  uint16_t slid;
  uint8_t sl;
  uint8_t dlid_path_bits;
};

// enum ibv_event_type (the ones rerail reacts to)
enum EventType : int {
  kEventCqErr = 0,
  kEventQpFatal = 1,
  kEventQpReqErr = 2,
  kEventQpAccessErr = 3,
  kEventCommEst = 4,
  kEventPathMigErr = 7,
  kEventDeviceFatal = 8,
  kEventPortActive = 9,
  kEventPortErr = 10,
  kEventLidChange = 11,
  kEventGidChange = 18,
};

// struct ibv_async_event
struct AsyncEvent {
  union {
    Cq* cq;
    Qp* qp;
    Srq* srq;
    void* wq;
    int port_num;
  } element;
  int event_type;  // EventType
};

// Function types of the IBVERBS_1.1 entry points discovery needs (the data path adds its own).
using GetDeviceListFn = Device** (*)(int* num_devices);
using FreeDeviceListFn = void (*)(Device** list);
using GetDeviceNameFn = const char* (*)(Device* device);
using GetDeviceGuidFn = uint64_t (*)(Device* device);  // big endian
using OpenDeviceFn = Context* (*)(Device* device);
using CloseDeviceFn = int (*)(Context* context);
using QueryDeviceFn = int (*)(Context* context, DeviceAttr* attr);
using QueryPortFn = int (*)(Context* context, uint8_t port_num, PortAttr* attr);
using QueryGidFn = int (*)(Context* context, uint8_t port_num, int index, Gid* gid);
using ForkInitFn = int (*)();
using PortStateStrFn = const char* (*)(int state);
using StrFn = const char* (*)(int value);  // ibv_event_type_str, ibv_wc_status_str
using AllocPdFn = Pd* (*)(Context* context);
using DeallocPdFn = int (*)(Pd* pd);
using RegMrFn = Mr* (*)(Pd* pd, void* addr, size_t length, int access);
using DeregMrFn = int (*)(Mr* mr);
using CreateCqFn = Cq* (*)(Context* context, int cqe, void* cq_context, CompChannel* channel, int comp_vector);
using DestroyCqFn = int (*)(Cq* cq);
using CreateQpFn = Qp* (*)(Pd* pd, QpInitAttr* attr);
using ModifyQpFn = int (*)(Qp* qp, QpAttr* attr, int attr_mask);
using QueryQpFn = int (*)(Qp* qp, QpAttr* attr, int attr_mask, QpInitAttr* init_attr);
using DestroyQpFn = int (*)(Qp* qp);
using GetAsyncEventFn = int (*)(Context* context, AsyncEvent* event);
using AckAsyncEventFn = void (*)(AsyncEvent* event);
// Entry points resolved now for later stages (GPU memory); typed there.
using GenericFn = void (*)();

}  // namespace rr::ib::vx
