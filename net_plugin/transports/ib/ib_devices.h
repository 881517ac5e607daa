// rerail — IB/RoCE device discovery: which HCA ports rerail can use as rails, and their properties.
//
// Contract
//   * DiscoverIb() enumerates devices through VerbsLib (never linked), keeps every ACTIVE port with an
//     InfiniBand or Ethernet (RoCE) link layer that RERAIL_IB_HCA selects, and fills one IbPort per
//     port: GUID, link layer, speed = per-lane rate x lanes (NCCL's tables), the GID rerail will use
//     (RoCE: RERAIL_IB_GID_INDEX or NCCL's automatic choice; IB: index 0), the GID's netdev, and
//     pciPath = realpath(<sysfs>/class/infiniband/<dev>/device).
//   * "No IB here" is not an error: the result says why (library absent, ibv_get_device_list failed,
//     no device, every port filtered or down) and the caller offers TCP only. Only bad configuration
//     (a malformed RERAIL_IB_* value) returns a non-Ok Status (kInvalidUsage, naming the variable).
//   * The pure parts are separate and unit-tested without hardware: HcaFilter (NCCL's list syntax),
//     the speed/width tables, ChooseGidIndex over a list of GID entries, and the sysfs readers, which
//     take the sysfs root as an argument so tests point them at a file tree in a temp directory.
//   * Blocking: reads sysfs and opens/closes each device once (milliseconds). Not thread-safe against
//     itself; called at plugin init and by rerail-info.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rerail/status.h"
#include "transports/ib/verbs_api.h"
#include "transports/ib/verbs_loader.h"

namespace rr::ib {

// RERAIL_IB_HCA, NCCL's NCCL_IB_HCA syntax: "mlx5_0:1,mlx5_1" selects port 1 of mlx5_0 and every port
// of devices whose name starts with "mlx5_1"; a leading '^' excludes the listed ones instead; '=' (after
// '^' if both) makes names exact instead of prefixes. Empty selects everything.
class HcaFilter {
 public:
  // InvalidUsage for an empty element (",,"), an element with no name (":1") or a port that is not a
  // positive decimal number ("mlx5_0:x"). NCCL reads those with atoi and silently mis-selects.
  static Status Parse(const std::string& spec, HcaFilter* out);
  bool Match(const std::string& dev, int port) const;
  bool empty() const { return items_.empty(); }

 private:
  struct Item {
    std::string name;
    int port = -1;  // -1: every port
  };
  std::vector<Item> items_;
  bool exclude_ = false;
  bool exact_ = false;
};

// NCCL's tables (net_ib init.cc): active_speed bit → per-lane Mbps (SDR 2500 ... NDR 100000) and
// active_width bit → lanes (1x, 4x, 8x, 12x, 2x). The lowest set bit counts; no bit → the last entry.
int LaneMbps(uint8_t active_speed);
int Lanes(uint8_t active_width);
int PortSpeedMbps(uint8_t active_speed, uint8_t active_width);  // LaneMbps x Lanes
const char* SpeedName(uint8_t active_speed);                     // "EDR", "HDR", ...
const char* LinkLayerName(uint8_t link_layer);                   // "InfiniBand", "Ethernet", "unspecified"

enum class AddrFamily { kIpv4, kIpv6 };

// One row of a port's GID table.
struct GidEntry {
  int index = 0;
  int roce_version = 0;  // 1 ("IB/RoCE v1"), 2 ("RoCE v2"), 0 unknown / entry not populated
  vx::Gid gid{};
};

bool GidIsIpv4Mapped(const vx::Gid& g);  // ::ffff:a.b.c.d
bool GidIsZero(const vx::Gid& g);        // an unpopulated table entry
// Neither zero, nor the bare fe80:: prefix, nor link-local (NCCL's validGid()).
bool GidIsValid(const vx::Gid& g);
std::string GidToString(const vx::Gid& g);  // "::ffff:10.0.0.1" / "fe80::5054:ff:fe12:3456"

// NCCL's automatic RoCE GID index (ncclIbGetGidIndex/ncclUpdateGidIndex with no address range):
// start at index 0; a later entry replaces the choice when it is of the wanted family and the current
// one is not, or when both are of that family, it is valid, and it has the wanted RoCE version where
// the current one differs in version or is not valid. `table` in index order; missing indices allowed.
int ChooseGidIndex(const std::vector<GidEntry>& table, AddrFamily af, int roce_version);

// sysfs readers, rooted at `root` (normally "/sys").
namespace ibsysfs {
// <root>/class/infiniband/<dev>/ports/<port>/gid_attrs/types/<index> → 1, 2, or 0 when unreadable.
int RoceVersion(const std::string& root, const std::string& dev, int port, int index);
// <root>/class/infiniband/<dev>/ports/<port>/gids/<index> ("fe80:0000:...:3456") → *gid.
bool ReadGid(const std::string& root, const std::string& dev, int port, int index, vx::Gid* gid);
// Every populated (non-zero) GID of the port, indices [0, len) (len <= 0: every file in gids/).
std::vector<GidEntry> GidTable(const std::string& root, const std::string& dev, int port, int len);
// <root>/class/infiniband/<dev>/ports/<port>/gid_attrs/ndevs/<index> → "eth0", "" when none.
std::string GidNetdev(const std::string& root, const std::string& dev, int port, int index);
// realpath of <root>/class/infiniband/<dev>/device; "" when there is none (soft devices: rxe, siw).
std::string PciPath(const std::string& root, const std::string& dev);
}  // namespace ibsysfs

// One usable HCA port: one rail.
struct IbPort {
  std::string dev;       // "mlx5_0", "rxe0"
  int port = 1;
  std::string name;      // "mlx5_0:1" when the device has several ports, else the device name
  uint64_t guid = 0;     // node GUID, host order
  uint8_t link_layer = vx::kLinkLayerUnspecified;
  int state = 0;         // vx::PortState (always active for a kept port)
  uint8_t active_speed = 0, active_width = 0;
  int speed_mbps = 0;
  int active_mtu = 0;    // bytes
  uint16_t lid = 0;
  int gid_index = 0;
  int roce_version = 0;  // RoCE: version of the chosen GID; IB: 0
  bool gid_auto = true;  // chosen automatically (false: RERAIL_IB_GID_INDEX)
  vx::Gid gid{};
  std::string netdev;    // RoCE: the netdev of the chosen GID
  std::string pci_path;  // "" for soft devices without a PCI parent
};

struct IbOptions {
  std::string hca;       // RERAIL_IB_HCA
  int gid_index = -1;    // RERAIL_IB_GID_INDEX
  AddrFamily af = AddrFamily::kIpv4;
  int roce_version = 2;
  std::string sysfs_root = "/sys";
  // From the RERAIL_IB_* parameters (Params must be loaded); InvalidUsage on a malformed value.
  static Status FromParams(IbOptions* out);
};

struct IbDiscovery {
  std::vector<IbPort> ports;         // usable rails, in device then port order
  std::string why;                   // when ports is empty: the one-line reason ("none: ...")
  std::vector<std::string> skipped;  // "mlx5_1:1: port DOWN", "mlx5_2: filtered by RERAIL_IB_HCA"
};

// See the contract. `lib` not loaded → ports empty, why = lib.Describe().
Status DiscoverIb(const VerbsLib& lib, const IbOptions& opt, IbDiscovery* out);

}  // namespace rr::ib
