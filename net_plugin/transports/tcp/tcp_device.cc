#include <sstream>

#include "rerail/log.h"
#include "rerail/sysfs.h"
#include "tcp.h"

namespace rr::net::tcp {
namespace {

// NCCL treats speed <= 0 as 10 Gb/s; report the same so topology math agrees.
constexpr int kDefaultSpeedMbps = 10000;
constexpr uint64_t kGuidBase = 0x7272000000000000ull;  // "rr" in the top bytes, device index below

DeviceInfo FromInterface(const sock::Interface& ifc, int index) {
  DeviceInfo d;
  d.name = ifc.name;
  d.pci_path = sysfs::NetPciPath(ifc.name);
  d.guid = kGuidBase | static_cast<uint64_t>(index);
  d.speed_mbps = sysfs::NetSpeedMbps(ifc.name, kDefaultSpeedMbps);
  d.addr = ifc.addr;
  d.loopback = ifc.loopback;
  return d;
}

}  // namespace

Status DiscoverTcpDevices(const std::string& spec, std::vector<DeviceInfo>* out) {
  sock::IfFilter filter(spec);
  std::vector<sock::Interface> all = sock::ListInterfaces();
  std::vector<sock::Interface> chosen, loop;
  for (const auto& ifc : all) {
    if (!filter.Match(ifc.name)) continue;
    if (!ifc.loopback || filter.Selects(ifc.name)) chosen.push_back(ifc);
    else loop.push_back(ifc);
  }
  if (chosen.empty()) chosen = loop;  // loopback only when nothing else qualifies
  if (chosen.empty()) {
    std::ostringstream have;
    for (const auto& ifc : all) have << (have.tellp() > 0 ? "," : "") << ifc.name;
    return Status::InvalidUsage("no network interface matches RERAIL_TCP_IFNAME='" + spec +
                                "' (interfaces up with an address: " + have.str() + ")");
  }
  out->clear();
  for (size_t i = 0; i < chosen.size(); ++i) out->push_back(FromInterface(chosen[i], static_cast<int>(i)));
  return Status::Ok();
}

Status TuneStream(int fd, const TcpConfig& cfg) {
  RR_CHECK(sock::SetNoDelay(fd));
  RR_CHECK(sock::SetBufSizes(fd, cfg.sockbuf));
  if (cfg.user_timeout_ms > 0) RR_CHECK(sock::SetUserTimeout(fd, cfg.user_timeout_ms));
  return Status::Ok();
}

}  // namespace rr::net::tcp
