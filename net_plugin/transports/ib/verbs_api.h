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
// Entry points resolved now for the data path's stages; called through typed casts there.
using GenericFn = void (*)();

}  // namespace rr::ib::vx
