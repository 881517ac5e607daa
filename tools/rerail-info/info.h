// rerail-info: what NCCL would see from this installation (like ibv_devinfo / fi_info).
//
// Contract
//   * Collect() loads the net plugin the way NCCL does (dlopen RTLD_NOW|RTLD_LOCAL, highest ABI table
//     exported), calls init, devices and getProperties for every device, then finalize, and reports
//     the fields exactly as getProperties filled them. It also dlopens the tuner and profiler plugins
//     and lists the ABI tables they export, and lists every RERAIL_* parameter with its effective value
//     and source (rr::Params::State()) plus RERAIL_* variables that are no parameter.
//   * The result is one JSON document; the text output is rendered from it, so both always agree.
//   * Nothing is sent on the network; init may open a netlink socket and read sysfs (as in NCCL).
//   * A failure to load or init a plugin is recorded in the document ("error") rather than thrown;
//     Ok() says whether the net plugin loaded, initialised and reported its devices.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace rr::info {

struct Paths {
  std::string net;       // net plugin file or bare name ("rerail" → libnccl-net-rerail.so)
  std::string tuner;     // "" to skip
  std::string profiler;  // "" to skip
};

// load_net=false: only the version and the parameters (no plugin is loaded).
nlohmann::json Collect(const Paths& paths, bool load_net);
bool Ok(const nlohmann::json& doc);

// The human-readable rendering of Collect()'s document (sections: version, plugins, devices, params).
std::string Text(const nlohmann::json& doc, bool params_only);

// "HOST|CUDA|DMABUF" for a ptrSupport bit mask; "HOST", "UNPACK" or the number for netDeviceType.
std::string PtrSupportNames(int mask);
std::string DeviceTypeName(int type);

}  // namespace rr::info
