// The text rendering of rerail-info's document (info.h): sections like ibv_devinfo's.
#include <cstdio>
#include <sstream>

#include "info.h"

namespace rr::info {
namespace {

using nlohmann::json;

std::string Str(const json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

void Plugin(std::ostringstream& o, const char* title, const json& p) {
  o << title << ":\n";
  o << "  path:        " << (p.contains("path") ? Str(p["path"]) : Str(p["asked"]) + " (not loaded)") << "\n";
  if (p.contains("error")) o << "  error:       " << Str(p["error"]) << "\n";
  if (p.contains("exports")) {
    o << "  exports:    ";
    for (const json& s : p["exports"]) o << " " << Str(s);
    o << "\n";
  }
}

void Device(std::ostringstream& o, const json& d) {
  o << "  dev " << d["dev"].get<int>() << ":\n";
  if (d.contains("error")) {
    o << "    error:               " << Str(d["error"]) << "\n";
    return;
  }
  char lat[32];
  snprintf(lat, sizeof(lat), "%g", d["latency"].get<double>());
  std::string vdevs;
  for (const json& v : d["vProps"]["devs"]) vdevs += (vdevs.empty() ? "" : ",") + Str(v);
  o << "    name:                " << Str(d["name"]) << "\n"
    << "    pciPath:             " << Str(d["pciPath"]) << "\n"
    << "    guid:                " << Str(d["guid"]) << "\n"
    << "    ptrSupport:          " << Str(d["ptrSupport"]) << " (" << Str(d["ptrSupportNames"]) << ")\n"
    << "    regIsGlobal:         " << Str(d["regIsGlobal"]) << "\n"
    << "    forceFlush:          " << Str(d["forceFlush"]) << "\n"
    << "    speed:               " << Str(d["speed"]) << " Mbps\n"
    << "    port:                " << Str(d["port"]) << "\n"
    << "    latency:             " << lat << " us\n"
    << "    maxComms:            " << Str(d["maxComms"]) << "\n"
    << "    maxRecvs:            " << Str(d["maxRecvs"]) << "\n"
    << "    netDeviceType:       " << Str(d["netDeviceType"]) << " (" << Str(d["netDeviceTypeName"]) << ")\n"
    << "    netDeviceVersion:    " << Str(d["netDeviceVersion"]) << "\n"
    << "    vProps:              ndevs " << Str(d["vProps"]["ndevs"]) << " [" << vdevs << "]\n"
    << "    maxP2pBytes:         " << Str(d["maxP2pBytes"]) << "\n"
    << "    maxCollBytes:        " << Str(d["maxCollBytes"]) << "\n"
    << "    maxMultiRequestSize: " << Str(d["maxMultiRequestSize"]) << "\n"
    << "    railId:              " << Str(d["railId"]) << "\n"
    << "    planeId:             " << Str(d["planeId"]) << "\n";
}

void IbSection(std::ostringstream& o, const json& ib) {
  if (ib.contains("error")) {
    o << "IB devices: error: " << Str(ib["error"]) << "\n";
    return;
  }
  if (ib.contains("none")) o << "IB devices: none: " << Str(ib["none"]) << "\n";
  else o << "IB devices: " << ib["ports"].size() << " (libibverbs " << Str(ib["lib"]) << ")\n";
  for (const json& p : ib["ports"]) {
    std::string ll = Str(p["linkLayer"]);
    if (p["roceVersion"].get<int>() > 0) ll += " (RoCE v" + Str(p["roceVersion"]) + ")";
    o << "  " << Str(p["name"]) << " port " << Str(p["port"]) << ":\n"
      << "    link layer:          " << ll << "\n"
      << "    guid:                " << Str(p["guid"]) << "\n"
      << "    gid:                 index " << Str(p["gidIndex"]) << (p["gidAuto"].get<bool>() ? " (auto) " : " (RERAIL_IB_GID_INDEX) ")
      << Str(p["gid"]) << (Str(p["netdev"]).empty() ? "" : " on " + Str(p["netdev"])) << "\n"
      << "    speed:               " << Str(p["speed"]) << " Mbps (" << Str(p["lanes"]) << "x " << Str(p["speedName"]) << " "
      << Str(p["laneMbps"]) << " Mbps)\n"
      << "    mtu:                 " << Str(p["mtu"]) << "\n"
      << "    lid:                 " << Str(p["lid"]) << "\n"
      << "    pciPath:             " << (Str(p["pciPath"]).empty() ? "(none)" : Str(p["pciPath"])) << "\n";
  }
  for (const json& s : ib.value("skipped", json::array())) o << "  skipped: " << Str(s) << "\n";
}

void ParamsSection(std::ostringstream& o, const json& doc) {
  o << "params (RERAIL_*):\n";
  size_t w = 0;
  for (const json& p : doc["params"]) w = std::max(w, Str(p["name"]).size());
  for (const json& p : doc["params"]) {
    std::string name = Str(p["name"]);
    std::string value = Str(p["value"]);
    o << "  " << name << std::string(w - name.size() + 1, ' ') << "= " << (value.empty() ? "\"\"" : value);
    if (!Str(p["units"]).empty()) o << " " << Str(p["units"]);
    o << "  [" << Str(p["source"]);
    if (Str(p["source"]) == "env-invalid") o << ": '" << Str(p["env"]) << "' rejected, default in effect";
    o << "]\n";
  }
  if (doc.contains("paramsError")) o << "  error: " << Str(doc["paramsError"]) << "\n";
  for (const json& u : doc["unknownEnv"]) o << "  unknown: RERAIL_" << Str(u) << " is not a rerail parameter\n";
}

}  // namespace

std::string Text(const json& doc, bool params_only) {
  std::ostringstream o;
  if (!params_only) {
    o << "rerail " << Str(doc["version"]) << "\n";
    const json& net = doc["net"];
    Plugin(o, "net plugin", net);
    if (net.contains("name")) o << "  name:        " << Str(net["name"]) << " (ncclNetPlugin_v" << Str(net["abi"]) << ")\n";
    if (net.contains("transports")) {
      o << "  transports: ";
      for (const json& t : net["transports"]) o << " " << Str(t);
      o << "  (" << Str(net["transportsText"]) << ")\n";
    }
    if (net.contains("init")) o << "  init:        " << Str(net["init"]) << "\n";
    for (const json& l : net.value("log", json::array()))
      if (Str(l["level"]) == "WARN") o << "  warning:     " << Str(l["text"]) << "\n";
    if (net.contains("devices")) {
      o << "devices: " << net["devices"].size() << "\n";
      for (const json& d : net["devices"]) Device(o, d);
    }
    if (doc.contains("ib")) IbSection(o, doc["ib"]);
    if (doc.contains("tuner")) Plugin(o, "tuner plugin", doc["tuner"]);
    if (doc.contains("profiler")) Plugin(o, "profiler plugin", doc["profiler"]);
  }
  ParamsSection(o, doc);
  return o.str();
}

}  // namespace rr::info
