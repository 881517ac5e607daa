// rerail — libibverbs, opened at run time (never linked), so the plugin loads with RTLD_NOW on hosts
// without RDMA software and then offers TCP devices only.
//
// Contract
//   * VerbsLib::Open(path) dlopens `path` (RTLD_NOW | RTLD_LOCAL) and resolves every entry point rerail
//     uses with dlvsym at its rdma-core symbol version, like NCCL's src/misc/ibvsymbols.cc:
//     IBVERBS_1.1 for the core verbs (required), IBVERBS_1.8 ibv_reg_mr_iova2 and IBVERBS_1.12
//     ibv_reg_dmabuf_mr (optional: has_reg_mr_iova2() / has_reg_dmabuf_mr()). A library of the same
//     name under other version nodes (a stub, a foreign build) is "broken", not used; an unversioned
//     one passes dlvsym (glibc accepts it for any version) only if it has every required entry point.
//   * The result is one of: loaded; absent (dlopen failed: dlerror() text in why()); broken (a required
//     symbol is missing: why() names it); disabled (RERAIL_IB_LIB=none). Only loaded() libraries hand
//     out entry points; others have every pointer null.
//   * A loaded library is never dlclosed (libibverbs keeps provider libraries and global state, and
//     NCCL never closes it either); a failed open leaves nothing loaded.
//   * Default() is the process-wide library named by RERAIL_IB_LIB (default "libibverbs.so.1": the
//     SONAME, resolved by the dynamic loader's search; a value with '/' is a path), opened once on
//     first use; thread-safe. Open() may be called directly (tests open several libraries).
//   * This is the only place rerail calls dlopen/dlvsym for verbs; no libibverbs header is included.
#pragma once

#include <memory>
#include <string>

#include "rerail/status.h"
#include "transports/ib/verbs_api.h"

namespace rr::ib {

class VerbsLib {
 public:
  enum class State {
    kLoaded,    // every required symbol resolved
    kAbsent,    // dlopen failed (no libibverbs on this host, or a bad RERAIL_IB_LIB path)
    kBroken,    // the library opened but lacks a required IBVERBS_1.1 symbol
    kDisabled,  // RERAIL_IB_LIB=none
  };

  // Never null; the state says whether it is usable.
  static std::unique_ptr<VerbsLib> Open(const std::string& path);
  static std::unique_ptr<VerbsLib> Disabled(const std::string& why);

  // The library RERAIL_IB_LIB names, opened once. Params must be loaded (Params::Load) before; a bad
  // value (empty) yields kDisabled with why() saying so, and CheckLibParam() reports it as an error.
  static const VerbsLib& Default();
  // InvalidUsage when RERAIL_IB_LIB is set to an unusable value (empty); plugins fail init on it.
  static Status CheckLibParam();

  State state() const { return state_; }
  bool loaded() const { return state_ == State::kLoaded; }
  // "absent: libfoo.so: cannot open shared object file: No such file or directory"
  std::string Describe() const;
  const std::string& why() const { return why_; }
  const std::string& asked() const { return asked_; }  // the name or path given to Open
  const std::string& path() const { return path_; }    // the file the loader mapped (loaded only)
  bool has_reg_mr_iova2() const { return reg_mr_iova2 != nullptr; }
  bool has_reg_dmabuf_mr() const { return reg_dmabuf_mr != nullptr; }

  // Entry points (null unless loaded(); the optional ones may be null even then).
  vx::GetDeviceListFn get_device_list = nullptr;
  vx::FreeDeviceListFn free_device_list = nullptr;
  vx::GetDeviceNameFn get_device_name = nullptr;
  vx::GetDeviceGuidFn get_device_guid = nullptr;
  vx::OpenDeviceFn open_device = nullptr;
  vx::CloseDeviceFn close_device = nullptr;
  vx::QueryDeviceFn query_device = nullptr;
  vx::QueryPortFn query_port = nullptr;
  vx::QueryGidFn query_gid = nullptr;
  vx::ForkInitFn fork_init = nullptr;
  vx::PortStateStrFn port_state_str = nullptr;
  vx::StrFn event_type_str = nullptr;
  vx::StrFn wc_status_str = nullptr;
  vx::AllocPdFn alloc_pd = nullptr;
  vx::DeallocPdFn dealloc_pd = nullptr;
  vx::RegMrFn reg_mr = nullptr;
  vx::DeregMrFn dereg_mr = nullptr;
  vx::CreateCqFn create_cq = nullptr;
  vx::DestroyCqFn destroy_cq = nullptr;
  vx::CreateQpFn create_qp = nullptr;
  vx::ModifyQpFn modify_qp = nullptr;
  vx::QueryQpFn query_qp = nullptr;
  vx::DestroyQpFn destroy_qp = nullptr;
  vx::GetAsyncEventFn get_async_event = nullptr;
  vx::AckAsyncEventFn ack_async_event = nullptr;
  // Resolved now; typed by the stage that calls them (GPU memory, issue 9).
  vx::GenericFn reg_mr_iova2 = nullptr;   // IBVERBS_1.8, optional
  vx::GenericFn reg_dmabuf_mr = nullptr;  // IBVERBS_1.12, optional

  ~VerbsLib() = default;  // never dlcloses (see contract)

 private:
  VerbsLib() = default;
  bool Resolve(void* dl);  // fills the pointers; false (all null, why_ set) when a required one is missing

  State state_ = State::kAbsent;
  std::string asked_;
  std::string path_;
  std::string why_;
};

const char* StateName(VerbsLib::State s);  // "loaded", "absent", "broken", "disabled"

}  // namespace rr::ib
