#include "transports/ib/ib_devices.h"

#include <arpa/inet.h>
#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "rerail/params.h"

namespace rr::ib {
namespace {

// NCCL's ibvSpeeds/ibvWidths (net_ib init.cc). Index = lowest set bit of the verbs bit mask.
constexpr int kLaneMbps[] = {2500, 5000, 10000, 10000, 14000, 25000, 50000, 100000, 200000};
constexpr const char* kSpeedNames[] = {"SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR"};
constexpr int kLanes[] = {1, 4, 8, 12, 2};

int FirstBit(int v, int max) {
  int i = 0;
  while (i < max && (v & (1 << i)) == 0) ++i;
  return i;
}

bool ReadLine(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f || !std::getline(f, *out)) return false;
  while (!out->empty() && (out->back() == '\n' || out->back() == ' ' || out->back() == '\0')) out->pop_back();
  return true;
}

std::string PortDir(const std::string& root, const std::string& dev, int port) {
  return root + "/class/infiniband/" + dev + "/ports/" + std::to_string(port);
}

bool SafeName(const std::string& s) { return !s.empty() && s.find('/') == std::string::npos && s != "." && s != ".."; }

bool IsDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Strict positive decimal ("1", "12"); NCCL's atoi would take "1x" or "x" (as 0).
bool ParsePort(const std::string& s, int* port) {
  if (s.size() > 3 || !IsDigits(s)) return false;
  *port = std::atoi(s.c_str());
  return *port > 0;
}

uint64_t Be64ToHost(uint64_t v) {
  uint8_t b[8];
  memcpy(b, &v, 8);
  uint64_t r = 0;
  for (uint8_t x : b) r = (r << 8) | x;
  return r;
}

}  // namespace

// ---- HCA filter ----------------------------------------------------------------------------------

Status HcaFilter::Parse(const std::string& spec, HcaFilter* out) {
  HcaFilter f;
  std::string s = spec;
  if (!s.empty() && s[0] == '^') f.exclude_ = true, s.erase(0, 1);
  if (!s.empty() && s[0] == '=') f.exact_ = true, s.erase(0, 1);
  if (s.empty() && !spec.empty())
    return Status::InvalidUsage("RERAIL_IB_HCA='" + spec + "': no device listed after '^'/'='");
  size_t at = 0;
  while (!s.empty() && at <= s.size()) {
    size_t comma = s.find(',', at);
    std::string item = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? s.size() + 1 : comma + 1;
    if (item.empty()) return Status::InvalidUsage("RERAIL_IB_HCA='" + spec + "': empty element");
    Item it;
    size_t colon = item.find(':');
    it.name = item.substr(0, colon);
    if (it.name.empty()) return Status::InvalidUsage("RERAIL_IB_HCA='" + spec + "': element '" + item + "' has no device name");
    if (colon != std::string::npos && !ParsePort(item.substr(colon + 1), &it.port))
      return Status::InvalidUsage("RERAIL_IB_HCA='" + spec + "': port in '" + item +
                                  "' is not a positive number (syntax: mlx5_0:1,mlx5_1)");
    f.items_.push_back(it);
  }
  *out = std::move(f);
  return Status::Ok();
}

bool HcaFilter::Match(const std::string& dev, int port) const {
  if (items_.empty()) return true;
  bool hit = false;
  for (const Item& it : items_) {
    bool name = exact_ ? dev == it.name : dev.compare(0, it.name.size(), it.name) == 0;
    if (name && (it.port == -1 || port == -1 || it.port == port)) {
      hit = true;
      break;
    }
  }
  return hit != exclude_;
}

// ---- speed tables ---------------------------------------------------------------------------------

int LaneMbps(uint8_t s) { return kLaneMbps[FirstBit(s, std::size(kLaneMbps) - 1)]; }
int Lanes(uint8_t w) { return kLanes[FirstBit(w, std::size(kLanes) - 1)]; }
int PortSpeedMbps(uint8_t s, uint8_t w) { return LaneMbps(s) * Lanes(w); }
const char* SpeedName(uint8_t s) { return kSpeedNames[FirstBit(s, std::size(kSpeedNames) - 1)]; }

const char* LinkLayerName(uint8_t ll) {
  switch (ll) {
    case vx::kLinkLayerInfiniband: return "InfiniBand";
    case vx::kLinkLayerEthernet: return "Ethernet";
    default: return "unspecified";
  }
}

// ---- GIDs -----------------------------------------------------------------------------------------

bool GidIsIpv4Mapped(const vx::Gid& g) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g.raw, kPrefix, sizeof(kPrefix)) == 0;
}

bool GidIsZero(const vx::Gid& g) {
  static const vx::Gid kZero{};
  return memcmp(g.raw, kZero.raw, sizeof(kZero.raw)) == 0;
}

bool GidIsValid(const vx::Gid& g) {
  static const uint8_t kZero[16] = {};
  bool tail_zero = memcmp(g.raw + 4, kZero, 12) == 0;
  bool head_zero = memcmp(g.raw, kZero, 4) == 0;
  bool fe80 = g.raw[0] == 0xfe && g.raw[1] == 0x80 && g.raw[2] == 0 && g.raw[3] == 0;
  if ((head_zero && tail_zero) || (fe80 && tail_zero)) return false;  // not configured
  bool link_local = fe80 && memcmp(g.raw + 4, kZero, 4) == 0;
  return !link_local;
}

std::string GidToString(const vx::Gid& g) {
  char buf[INET6_ADDRSTRLEN];
  return inet_ntop(AF_INET6, g.raw, buf, sizeof(buf)) ? buf : "?";
}

int ChooseGidIndex(const std::vector<GidEntry>& table, AddrFamily af, int roce_version) {
  auto family = [](const GidEntry& e) { return GidIsIpv4Mapped(e.gid) ? AddrFamily::kIpv4 : AddrFamily::kIpv6; };
  const GidEntry* cur = nullptr;
  for (const GidEntry& e : table)
    if (e.index == 0) cur = &e;
  GidEntry zero;  // index 0 absent from the table: an unpopulated (invalid) entry
  if (cur == nullptr) cur = &zero;
  for (const GidEntry& cand : table) {
    if (cand.index <= 0) continue;
    if (family(cand) != family(*cur) && family(cand) == af) {
      cur = &cand;
      continue;
    }
    if (family(cand) != af || !GidIsValid(cand.gid)) continue;
    if ((cur->roce_version != cand.roce_version || !GidIsValid(cur->gid)) && cand.roce_version == roce_version) cur = &cand;
  }
  return cur->index;
}

// ---- sysfs ----------------------------------------------------------------------------------------

namespace ibsysfs {

int RoceVersion(const std::string& root, const std::string& dev, int port, int index) {
  std::string t;
  if (!SafeName(dev) || !ReadLine(PortDir(root, dev, port) + "/gid_attrs/types/" + std::to_string(index), &t)) return 0;
  if (t == "IB/RoCE v1") return 1;
  if (t == "RoCE v2") return 2;
  return 0;
}

bool ReadGid(const std::string& root, const std::string& dev, int port, int index, vx::Gid* gid) {
  std::string t;
  if (!SafeName(dev) || !ReadLine(PortDir(root, dev, port) + "/gids/" + std::to_string(index), &t)) return false;
  return inet_pton(AF_INET6, t.c_str(), gid->raw) == 1;
}

std::vector<GidEntry> GidTable(const std::string& root, const std::string& dev, int port, int len) {
  std::vector<int> indices;
  if (len > 0) {
    for (int i = 0; i < len; ++i) indices.push_back(i);
  } else if (DIR* d = SafeName(dev) ? opendir((PortDir(root, dev, port) + "/gids").c_str()) : nullptr) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() <= 5 && IsDigits(name)) indices.push_back(std::atoi(name.c_str()));
    }
    closedir(d);
    std::sort(indices.begin(), indices.end());
  }
  std::vector<GidEntry> out;
  for (int i : indices) {
    GidEntry e;
    e.index = i;
    if (!ReadGid(root, dev, port, i, &e.gid) || GidIsZero(e.gid)) continue;
    e.roce_version = RoceVersion(root, dev, port, i);
    out.push_back(e);
  }
  return out;
}

std::string GidNetdev(const std::string& root, const std::string& dev, int port, int index) {
  std::string t;
  if (!SafeName(dev) || !ReadLine(PortDir(root, dev, port) + "/gid_attrs/ndevs/" + std::to_string(index), &t)) return "";
  return t;
}

std::string PciPath(const std::string& root, const std::string& dev) {
  if (!SafeName(dev)) return "";
  char buf[PATH_MAX];
  std::string link = root + "/class/infiniband/" + dev + "/device";
  return realpath(link.c_str(), buf) ? buf : "";
}

}  // namespace ibsysfs

// ---- discovery ------------------------------------------------------------------------------------

Status IbOptions::FromParams(IbOptions* out) {
  IbOptions o;
  o.hca = Params::Str(ParamId::IbHca);
  HcaFilter f;
  RR_CHECK(HcaFilter::Parse(o.hca, &f));
  o.gid_index = static_cast<int>(Params::Int(ParamId::IbGidIndex));
  o.af = Params::Str(ParamId::IbAddrFamily) == "ipv6" ? AddrFamily::kIpv6 : AddrFamily::kIpv4;
  o.roce_version = static_cast<int>(Params::Int(ParamId::IbRoceVersion));
  *out = std::move(o);
  return Status::Ok();
}

namespace {

// Fills the GID fields of a kept port; false (and *why) when the port has no usable GID.
bool PickGid(const VerbsLib& lib, vx::Context* ctx, const IbOptions& opt, const vx::PortAttr& pa, IbPort* p,
             std::string* why) {
  if (p->link_layer == vx::kLinkLayerInfiniband) {
    p->gid_index = 0;  // IB routes by LID; NCCL's FLID index is for routable IB only
  } else if (opt.gid_index >= 0) {
    p->gid_auto = false;
    p->gid_index = opt.gid_index;
    if (opt.gid_index >= pa.gid_tbl_len) {
      *why = "RERAIL_IB_GID_INDEX=" + std::to_string(opt.gid_index) + " beyond the GID table (" +
             std::to_string(pa.gid_tbl_len) + " entries)";
      return false;
    }
  } else {
    std::vector<GidEntry> table = ibsysfs::GidTable(opt.sysfs_root, p->dev, p->port, pa.gid_tbl_len);
    p->gid_index = ChooseGidIndex(table, opt.af, opt.roce_version);
  }
  // The verbs value is authoritative (sysfs only chose the index).
  if (lib.query_gid(ctx, static_cast<uint8_t>(p->port), p->gid_index, &p->gid) != 0) {
    *why = "ibv_query_gid(index " + std::to_string(p->gid_index) + ") failed: " + strerror(errno);
    return false;
  }
  if (p->link_layer == vx::kLinkLayerEthernet) {
    // A link-local GID (the automatic choice when the netdev has no address of the wanted family, or
    // an explicit index) works within one L2 segment, as with NCCL; an unpopulated one never does.
    if (GidIsZero(p->gid)) {
      *why = "RoCE GID index " + std::to_string(p->gid_index) + " is not populated (no address on the netdev?)";
      return false;
    }
    p->roce_version = ibsysfs::RoceVersion(opt.sysfs_root, p->dev, p->port, p->gid_index);
    p->netdev = ibsysfs::GidNetdev(opt.sysfs_root, p->dev, p->port, p->gid_index);
  }
  return true;
}

void ScanDevice(const VerbsLib& lib, vx::Device* d, const IbOptions& opt, const HcaFilter& filter, IbDiscovery* out) {
  std::string dev = lib.get_device_name(d) ? lib.get_device_name(d) : "?";
  vx::Context* ctx = lib.open_device(d);
  if (ctx == nullptr) {
    out->skipped.push_back(dev + ": ibv_open_device failed: " + strerror(errno));
    return;
  }
  vx::DeviceAttr da{};
  if (lib.query_device(ctx, &da) != 0) {
    out->skipped.push_back(dev + ": ibv_query_device failed: " + strerror(errno));
    lib.close_device(ctx);
    return;
  }
  for (int port = 1; port <= da.phys_port_cnt; ++port) {
    std::string pname = da.phys_port_cnt > 1 ? dev + ":" + std::to_string(port) : dev;
    if (!filter.Match(dev, port)) {
      out->skipped.push_back(pname + ": not selected by RERAIL_IB_HCA");
      continue;
    }
    vx::PortAttr pa{};
    if (lib.query_port(ctx, static_cast<uint8_t>(port), &pa) != 0) {
      out->skipped.push_back(pname + ": ibv_query_port failed: " + strerror(errno));
      continue;
    }
    if (pa.state != vx::kPortActive) {
      out->skipped.push_back(pname + ": port " + lib.port_state_str(pa.state));
      continue;
    }
    if (pa.link_layer != vx::kLinkLayerInfiniband && pa.link_layer != vx::kLinkLayerEthernet) {
      out->skipped.push_back(pname + ": link layer " + LinkLayerName(pa.link_layer));
      continue;
    }
    IbPort p;
    p.dev = dev;
    p.port = port;
    p.name = pname;
    p.guid = Be64ToHost(lib.get_device_guid(d));
    p.link_layer = pa.link_layer;
    p.state = pa.state;
    p.active_speed = pa.active_speed;
    p.active_width = pa.active_width;
    p.speed_mbps = PortSpeedMbps(pa.active_speed, pa.active_width);
    p.active_mtu = pa.active_mtu >= 1 && pa.active_mtu <= 5 ? 128 << pa.active_mtu : 0;
    p.lid = pa.lid;
    p.pci_path = ibsysfs::PciPath(opt.sysfs_root, dev);
    std::string why;
    if (!PickGid(lib, ctx, opt, pa, &p, &why)) {
      out->skipped.push_back(pname + ": " + why);
      continue;
    }
    out->ports.push_back(std::move(p));
  }
  lib.close_device(ctx);
}

}  // namespace

Status DiscoverIb(const VerbsLib& lib, const IbOptions& opt, IbDiscovery* out) {
  *out = IbDiscovery();
  HcaFilter filter;
  RR_CHECK(HcaFilter::Parse(opt.hca, &filter));
  if (!lib.loaded()) {
    out->why = "libibverbs " + lib.Describe();
    return Status::Ok();
  }
  int n = 0;
  errno = 0;
  vx::Device** list = lib.get_device_list(&n);
  if (list == nullptr) {
    int e = errno;
    out->why = std::string("ibv_get_device_list failed: ") + strerror(e) +
               (e == ENOSYS ? " (this kernel has no RDMA subsystem)" : "");
    return Status::Ok();
  }
  for (int i = 0; i < n; ++i) ScanDevice(lib, list[i], opt, filter, out);
  lib.free_device_list(list);
  if (out->ports.empty()) {
    if (n == 0) out->why = "no RDMA device (ibv_get_device_list found none)";
    else out->why = "no usable port among " + std::to_string(n) + " device(s)";
  }
  return Status::Ok();
}

}  // namespace rr::ib
