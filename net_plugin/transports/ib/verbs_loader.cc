#include "transports/ib/verbs_loader.h"

#include <dlfcn.h>
#include <link.h>

#include <mutex>

#include "rerail/params.h"

namespace rr::ib {
namespace {

constexpr const char* kV11 = "IBVERBS_1.1";

struct Sym {
  const char* name;
  const char* version;
  bool required;
  void** slot;
};

}  // namespace

const char* StateName(VerbsLib::State s) {
  switch (s) {
    case VerbsLib::State::kLoaded: return "loaded";
    case VerbsLib::State::kAbsent: return "absent";
    case VerbsLib::State::kBroken: return "broken";
    case VerbsLib::State::kDisabled: return "disabled";
  }
  return "?";
}

std::string VerbsLib::Describe() const {
  if (loaded()) return std::string("loaded: ") + path_;
  return std::string(StateName(state_)) + ": " + why_;
}

bool VerbsLib::Resolve(void* dl) {
  // The function-pointer members are filled through void** as dlvsym returns data pointers (POSIX
  // guarantees the two convert; NCCL's ibvsymbols.cc does the same).
  const Sym syms[] = {
      {"ibv_get_device_list", kV11, true, reinterpret_cast<void**>(&get_device_list)},
      {"ibv_free_device_list", kV11, true, reinterpret_cast<void**>(&free_device_list)},
      {"ibv_get_device_name", kV11, true, reinterpret_cast<void**>(&get_device_name)},
      {"ibv_get_device_guid", kV11, true, reinterpret_cast<void**>(&get_device_guid)},
      {"ibv_open_device", kV11, true, reinterpret_cast<void**>(&open_device)},
      {"ibv_close_device", kV11, true, reinterpret_cast<void**>(&close_device)},
      {"ibv_query_device", kV11, true, reinterpret_cast<void**>(&query_device)},
      {"ibv_query_port", kV11, true, reinterpret_cast<void**>(&query_port)},
      {"ibv_query_gid", kV11, true, reinterpret_cast<void**>(&query_gid)},
      {"ibv_fork_init", kV11, true, reinterpret_cast<void**>(&fork_init)},
      {"ibv_port_state_str", kV11, true, reinterpret_cast<void**>(&port_state_str)},
      {"ibv_get_async_event", kV11, true, reinterpret_cast<void**>(&get_async_event)},
      {"ibv_ack_async_event", kV11, true, reinterpret_cast<void**>(&ack_async_event)},
      {"ibv_event_type_str", kV11, true, reinterpret_cast<void**>(&event_type_str)},
      {"ibv_wc_status_str", kV11, true, reinterpret_cast<void**>(&wc_status_str)},
      {"ibv_alloc_pd", kV11, true, reinterpret_cast<void**>(&alloc_pd)},
      {"ibv_dealloc_pd", kV11, true, reinterpret_cast<void**>(&dealloc_pd)},
      {"ibv_reg_mr", kV11, true, reinterpret_cast<void**>(&reg_mr)},
      {"ibv_dereg_mr", kV11, true, reinterpret_cast<void**>(&dereg_mr)},
      {"ibv_create_cq", kV11, true, reinterpret_cast<void**>(&create_cq)},
      {"ibv_destroy_cq", kV11, true, reinterpret_cast<void**>(&destroy_cq)},
      {"ibv_create_qp", kV11, true, reinterpret_cast<void**>(&create_qp)},
      {"ibv_modify_qp", kV11, true, reinterpret_cast<void**>(&modify_qp)},
      {"ibv_query_qp", kV11, true, reinterpret_cast<void**>(&query_qp)},
      {"ibv_destroy_qp", kV11, true, reinterpret_cast<void**>(&destroy_qp)},
      {"ibv_reg_mr_iova2", "IBVERBS_1.8", false, reinterpret_cast<void**>(&reg_mr_iova2)},
      {"ibv_reg_dmabuf_mr", "IBVERBS_1.12", false, reinterpret_cast<void**>(&reg_dmabuf_mr)},
  };
  for (const Sym& s : syms) {
    *s.slot = dlvsym(dl, s.name, s.version);
    if (*s.slot == nullptr && s.required) {
      why_ = std::string(asked_) + " has no " + s.name + "@" + s.version;
      for (const Sym& t : syms) *t.slot = nullptr;  // a broken library hands out no entry point
      return false;
    }
  }
  return true;
}

std::unique_ptr<VerbsLib> VerbsLib::Open(const std::string& path) {
  std::unique_ptr<VerbsLib> lib(new VerbsLib());
  lib->asked_ = path;
  void* dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (dl == nullptr) {
    const char* e = dlerror();
    lib->state_ = State::kAbsent;
    lib->why_ = e ? e : (path + ": dlopen failed");
    return lib;
  }
  if (!lib->Resolve(dl)) {
    lib->state_ = State::kBroken;
    dlclose(dl);  // nothing of it was used
    return lib;
  }
  struct link_map* lm = nullptr;
  lib->path_ = (dlinfo(dl, RTLD_DI_LINKMAP, &lm) == 0 && lm != nullptr && lm->l_name[0]) ? lm->l_name : path;
  lib->state_ = State::kLoaded;
  return lib;
}

std::unique_ptr<VerbsLib> VerbsLib::Disabled(const std::string& why) {
  std::unique_ptr<VerbsLib> lib(new VerbsLib());
  lib->state_ = State::kDisabled;
  lib->why_ = why;
  return lib;
}

Status VerbsLib::CheckLibParam() {
  const std::string& v = Params::Str(ParamId::IbLib);
  if (v.empty())
    return Status::InvalidUsage("RERAIL_IB_LIB is empty: give libibverbs' name or path, or 'none' to disable IB");
  return Status::Ok();
}

const VerbsLib& VerbsLib::Default() {
  static std::once_flag once;
  static std::unique_ptr<VerbsLib> lib;  // intentionally never destroyed before exit (see contract)
  std::call_once(once, [] {
    const std::string& v = Params::Str(ParamId::IbLib);
    if (v == "none") lib = Disabled("RERAIL_IB_LIB=none");
    else if (!CheckLibParam().ok()) lib = Disabled("RERAIL_IB_LIB is empty");
    else lib = Open(v);
  });
  return *lib;
}

}  // namespace rr::ib
