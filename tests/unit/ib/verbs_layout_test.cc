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

// The function types match the real prototypes (argument and result types, modulo the opaque structs).
template <typename Ours, typename Theirs>
constexpr bool kSameArity = false;
template <typename R1, typename... A1, typename R2, typename... A2>
constexpr bool kSameArity<R1 (*)(A1...), R2 (*)(A2...)> = sizeof...(A1) == sizeof...(A2) && sizeof(R1) == sizeof(R2);
static_assert(kSameArity<vx::GetDeviceListFn, decltype(&ibv_get_device_list)>);
static_assert(kSameArity<vx::QueryDeviceFn, decltype(&ibv_query_device)>);
static_assert(kSameArity<vx::QueryGidFn, decltype(&ibv_query_gid)>);
static_assert(kSameArity<vx::GetDeviceGuidFn, decltype(&ibv_get_device_guid)>);
static_assert(kSameArity<vx::OpenDeviceFn, decltype(&ibv_open_device)>);

// The checks above are compile-time; this records in the test log which header they ran against.
TEST(VerbsLayout, CheckedAgainstRdmaCoreHeader) {
  EXPECT_EQ(sizeof(vx::PortAttr), sizeof(ibv_port_attr));
  EXPECT_EQ(offsetof(vx::DeviceAttr, phys_port_cnt), offsetof(ibv_device_attr, phys_port_cnt));
}

}  // namespace
