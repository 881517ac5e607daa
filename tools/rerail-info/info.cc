#include "info.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <regex>
#include <sstream>
#include <vector>

#include "net_loader.h"
#include "proxy_driver.h"
#include "rerail/params.h"
#include "rerail/version.h"
#if RERAIL_WITH_IB
#include "transports/ib/ib_devices.h"
#endif

namespace rr::info {
namespace {

using nlohmann::json;

std::string Hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof(b), "0x%016llx", static_cast<unsigned long long>(v));
  return b;
}

json DeviceJson(int dev, const rrNcclNetProperties_v12_t& p) {
  json vdevs = json::array();
  for (int i = 0; i < p.vProps.ndevs && i < RR_NCCL_NET_MAX_DEVS_PER_NIC_V12; ++i) vdevs.push_back(p.vProps.devs[i]);
  return json{{"dev", dev},
              {"name", p.name ? p.name : ""},
              {"pciPath", p.pciPath ? p.pciPath : ""},
              {"guid", Hex(p.guid)},
              {"ptrSupport", p.ptrSupport},
              {"ptrSupportNames", PtrSupportNames(p.ptrSupport)},
              {"regIsGlobal", p.regIsGlobal},
              {"forceFlush", p.forceFlush},
              {"speed", p.speed},
              {"port", p.port},
              {"latency", p.latency},
              {"maxComms", p.maxComms},
              {"maxRecvs", p.maxRecvs},
              {"netDeviceType", p.netDeviceType},
              {"netDeviceTypeName", DeviceTypeName(p.netDeviceType)},
              {"netDeviceVersion", p.netDeviceVersion},
              {"vProps", {{"ndevs", p.vProps.ndevs}, {"devs", vdevs}}},
              {"maxP2pBytes", p.maxP2pBytes},
              {"maxCollBytes", p.maxCollBytes},
              {"maxMultiRequestSize", p.maxMultiRequestSize},
              {"railId", p.railId},
              {"planeId", p.planeId}};
}

// "transports: tcp(eth0,eth1)+ib(mlx5_0)" in the init line → ["tcp", "ib"] and the raw text.
void ParseTransports(const std::string& line, json* net) {
  size_t at = line.find("transports: ");
  if (at == std::string::npos) return;
  std::string rest = line.substr(at + 12);
  std::string text = rest.substr(0, rest.find(", "));
  (*net)["transportsText"] = text;
  static const std::regex kName("(^|[+,])([a-z]+)\\(");
  json names = json::array();
  for (std::sregex_iterator it(text.begin(), text.end(), kName), end; it != end; ++it) names.push_back((*it)[2].str());
  (*net)["transports"] = names;
}

json NetJson(const std::string& path) {
  json net = {{"asked", path}};
  std::string err;
  std::unique_ptr<netdrv::NetPlugin> p = netdrv::NetPlugin::Open(path, &err);
  if (!p) {
    net["error"] = err;
    return net;
  }
  net["path"] = p->Path();
  net["abi"] = p->Version();
  net["name"] = p->Name();
  (void)netbench::LogCapture::Take();  // the plugin's lines during init: its INFO line names the transports
  void* ctx = nullptr;
  rrNcclResult_t rc = p->Init(&ctx, 0, netbench::LogCapture::Logger(), nullptr);
  json log = json::array();
  for (const netbench::LogLine& l : netbench::LogCapture::Take()) {
    log.push_back({{"level", l.level == 2 ? "WARN" : l.level == 3 ? "INFO" : "TRACE"}, {"text", l.text}});
    if (l.level == 3 && !net.contains("init") && l.text.find(" ABI v") != std::string::npos) {
      net["init"] = l.text;
      ParseTransports(l.text, &net);
    }
  }
  net["log"] = log;
  if (rc != rrNcclSuccess) {
    net["error"] = std::string("init returned ") + netdrv::ResultName(rc);
    return net;
  }
  int ndev = 0;
  rc = p->Devices(&ndev);
  json devs = json::array();
  for (int d = 0; rc == rrNcclSuccess && d < ndev; ++d) {
    rrNcclNetProperties_v12_t props;
    rrNcclResult_t prc = p->GetProperties(d, &props);
    if (prc != rrNcclSuccess) {
      devs.push_back({{"dev", d}, {"error", std::string("getProperties returned ") + netdrv::ResultName(prc)}});
      continue;
    }
    devs.push_back(DeviceJson(d, props));
  }
  if (rc != rrNcclSuccess) net["error"] = std::string("devices returned ") + netdrv::ResultName(rc);
  net["devices"] = devs;
  if (p->Finalize(ctx) != rrNcclSuccess) net["finalizeError"] = true;
  return net;
}

// A tuner or profiler plugin: which of the ABI tables NCCL looks for it exports.
json OtherPluginJson(const std::string& path, const std::vector<const char*>& symbols) {
  json out = {{"asked", path}};
  void* dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (dl == nullptr) {
    const char* e = dlerror();
    out["error"] = e ? e : "dlopen failed";
    return out;
  }
  struct link_map* lm = nullptr;
  out["path"] = (dlinfo(dl, RTLD_DI_LINKMAP, &lm) == 0 && lm != nullptr) ? lm->l_name : path;
  json found = json::array();
  for (const char* s : symbols)
    if (dlsym(dl, s) != nullptr) found.push_back(s);
  out["exports"] = found;
  dlclose(dl);
  return out;
}

// The IB ports rerail's loader and discovery see (the plugin offers them once the verbs data path
// exists); "none" holds the reason when there is none.
json IbJson() {
  json ib;
#if RERAIL_WITH_IB
  const ib::VerbsLib& lib = ib::VerbsLib::Default();
  ib["lib"] = lib.Describe();
  ib["libState"] = ib::StateName(lib.state());
  if (lib.loaded()) ib["dmabuf"] = lib.has_reg_dmabuf_mr();
  ib::IbOptions opt;
  ib::IbDiscovery d;
  Status st = ib::IbOptions::FromParams(&opt);
  if (st.ok()) st = ib::DiscoverIb(lib, opt, &d);
  if (!st.ok()) {
    ib["error"] = st.message();
    return ib;
  }
  json ports = json::array();
  for (const ib::IbPort& p : d.ports) {
    ports.push_back({{"name", p.name},
                     {"dev", p.dev},
                     {"port", p.port},
                     {"guid", Hex(p.guid)},
                     {"linkLayer", ib::LinkLayerName(p.link_layer)},
                     {"roceVersion", p.roce_version},
                     {"gidIndex", p.gid_index},
                     {"gidAuto", p.gid_auto},
                     {"gid", ib::GidToString(p.gid)},
                     {"netdev", p.netdev},
                     {"lid", p.lid},
                     {"speed", p.speed_mbps},
                     {"laneMbps", ib::LaneMbps(p.active_speed)},
                     {"lanes", ib::Lanes(p.active_width)},
                     {"speedName", ib::SpeedName(p.active_speed)},
                     {"mtu", p.active_mtu},
                     {"pciPath", p.pci_path}});
  }
  ib["ports"] = ports;
  if (ports.empty()) ib["none"] = d.why;
  ib["skipped"] = d.skipped;
#else
  ib["none"] = "built without the IB transport (RERAIL_ENABLE_IB=OFF)";
  ib["ports"] = json::array();
#endif
  return ib;
}

json ParamsJson() {
  json params = json::array();
  for (const ParamState& p : Params::State()) {
    json j = {{"name", std::string("RERAIL_") + p.def->name},
              {"value", p.value},
              {"source", SourceName(p.source)},
              {"default", p.def->def},
              {"units", p.def->units},
              {"help", p.def->help}};
    if (p.source != ParamState::Source::kDefault) j["env"] = p.env;
    params.push_back(j);
  }
  return params;
}

}  // namespace

std::string PtrSupportNames(int mask) {
  std::string s;
  auto add = [&](int bit, const char* name) {
    if (mask & bit) s += (s.empty() ? "" : "|") + std::string(name);
  };
  add(RR_NCCL_PTR_HOST, "HOST");
  add(RR_NCCL_PTR_CUDA, "CUDA");
  add(RR_NCCL_PTR_DMABUF, "DMABUF");
  int rest = mask & ~(RR_NCCL_PTR_HOST | RR_NCCL_PTR_CUDA | RR_NCCL_PTR_DMABUF);
  if (rest != 0) s += (s.empty() ? "" : "|") + std::to_string(rest);
  return s.empty() ? "none" : s;
}

std::string DeviceTypeName(int type) {
  if (type == RR_NCCL_NET_DEVICE_HOST) return "HOST";
  if (type == RR_NCCL_NET_DEVICE_UNPACK) return "UNPACK";
  return std::to_string(type);
}

json Collect(const Paths& paths, bool load_net) {
  Status load = Params::Load();
  json doc = {{"version", Version()}};
  if (load_net) doc["net"] = NetJson(paths.net);
  if (load_net && !paths.tuner.empty()) doc["tuner"] = OtherPluginJson(paths.tuner, {"ncclTunerPlugin_v5", "ncclTunerPlugin_v6"});
  if (load_net && !paths.profiler.empty())
    doc["profiler"] = OtherPluginJson(paths.profiler, {"ncclProfiler_v5", "ncclProfiler_v6"});
  if (load_net) doc["ib"] = IbJson();
  doc["params"] = ParamsJson();
  if (!load.ok()) doc["paramsError"] = load.message();
  doc["unknownEnv"] = Params::UnknownInEnv();
  return doc;
}

bool Ok(const json& doc) {
  if (!doc.contains("net")) return false;
  const json& net = doc.at("net");
  return !net.contains("error") && net.contains("devices") && !net["devices"].empty();
}

}  // namespace rr::info
