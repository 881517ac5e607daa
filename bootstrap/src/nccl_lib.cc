// libnccl resolved at run time, store-less init and recovery helpers (rerail/boot/nccl.h).
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "rerail/boot/exchange.h"
#include "rerail/boot/nccl.h"
#include "rerail/log.h"
#include "rerail/params.h"

namespace rr::boot {
namespace {

// ncclUniqueId is passed by value: a 128-byte struct, same ABI as NCCL's.
struct RawId {
  char internal[kNcclIdBytes];
};
using GetVersionFn = int (*)(int*);
using GetUniqueIdFn = int (*)(RawId*);
using CommInitRankFn = int (*)(void**, int, RawId, int);
using CommAbortFn = int (*)(void*);
using CommRevokeFn = int (*)(void*, int);
using CommShrinkFn = int (*)(void*, int*, int, void**, void*, int);
using GetErrorStringFn = const char* (*)(int);
using GetLastErrorFn = const char* (*)(void*);

constexpr int kNcclShrinkAbort = 1;  // NCCL_SHRINK_ABORT: abort the parent's pending work first

}  // namespace

Status NcclLib::Open(const std::string& path, std::unique_ptr<NcclLib>* out) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (h == nullptr) {
    const char* e = dlerror();
    return Status::InvalidUsage("cannot load libnccl '" + path + "': " + (e ? e : "?") +
                                " (set RERAIL_NCCL_LIB to its path)");
  }
  auto lib = std::unique_ptr<NcclLib>(new NcclLib());
  lib->handle_ = h;
  lib->path_ = path;
  for (const char* fn : {"ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommAbort", "ncclGetErrorString"})
    if (lib->Symbol(fn) == nullptr) return Status::InvalidUsage("'" + path + "' is not a usable libnccl: it has no " + fn);
  RR_CHECK(lib->Check(reinterpret_cast<GetVersionFn>(lib->Symbol("ncclGetVersion"))(&lib->version_), "ncclGetVersion"));
  *out = std::move(lib);
  return Status::Ok();
}

Status NcclLib::Default(NcclLib** out) {
  static std::mutex mu;
  static std::unique_ptr<NcclLib> lib;
  std::lock_guard<std::mutex> lk(mu);
  if (!lib) {
    RR_CHECK(Params::Load());
    RR_CHECK(Open(Params::Str(ParamId::NcclLib), &lib));
  }
  *out = lib.get();
  return Status::Ok();
}

NcclLib::~NcclLib() {
  if (handle_) dlclose(handle_);
}

void* NcclLib::Symbol(const char* name) const { return dlsym(handle_, name); }

Status NcclLib::Check(int rc, const char* what) const {
  if (rc == 0) return Status::Ok();
  auto err = reinterpret_cast<GetErrorStringFn>(Symbol("ncclGetErrorString"));
  auto last = reinterpret_cast<GetLastErrorFn>(Symbol("ncclGetLastError"));
  std::string msg = std::string(what) + " failed: " + (err ? err(rc) : "?");
  const char* detail = last ? last(nullptr) : nullptr;
  if (detail && *detail) msg += std::string(" (") + detail + ")";
  Code code = rc >= 1 && rc <= 7 ? static_cast<Code>(rc) : Code::kInternalError;
  return Status(code, msg);
}

Status NcclLib::GetUniqueId(unsigned char out[kNcclIdBytes]) const {
  RawId id;
  RR_CHECK(Check(reinterpret_cast<GetUniqueIdFn>(Symbol("ncclGetUniqueId"))(&id), "ncclGetUniqueId"));
  std::memcpy(out, id.internal, kNcclIdBytes);
  return Status::Ok();
}

Status NcclLib::CommInitRank(void** comm, int nranks, const unsigned char id[kNcclIdBytes], int rank) const {
  RawId raw;
  std::memcpy(raw.internal, id, kNcclIdBytes);
  return Check(reinterpret_cast<CommInitRankFn>(Symbol("ncclCommInitRank"))(comm, nranks, raw, rank), "ncclCommInitRank");
}

Status NcclLib::CommAbort(void* comm) const {
  return Check(reinterpret_cast<CommAbortFn>(Symbol("ncclCommAbort"))(comm), "ncclCommAbort");
}

Status NcclLib::CommRevoke(void* comm) const {
  auto fn = reinterpret_cast<CommRevokeFn>(Symbol("ncclCommRevoke"));
  if (fn == nullptr)
    return Status::InvalidUsage(path_ + " (NCCL " + std::to_string(version_) +
                                ") has no ncclCommRevoke (NCCL >= 2.27); abort the communicator instead");
  return Check(fn(comm, 0), "ncclCommRevoke");
}

Status NcclLib::CommShrink(void* comm, const int* exclude, int nexclude, void** newcomm) const {
  auto fn = reinterpret_cast<CommShrinkFn>(Symbol("ncclCommShrink"));
  if (fn == nullptr)
    return Status::InvalidUsage(path_ + " (NCCL " + std::to_string(version_) +
                                ") has no ncclCommShrink (NCCL >= 2.27); recover with re-create instead");
  return Check(fn(comm, const_cast<int*>(exclude), nexclude, newcomm, nullptr, kNcclShrinkAbort), "ncclCommShrink");
}

Status CommInitStoreless(const NcclLib& nccl, const Job& job, uint64_t group, int rank, bool job_magic, void** comm) {
  if (rank < 0 || rank >= job.nranks())
    return Status::InvalidArg("rank " + std::to_string(rank) + " is outside 0.." + std::to_string(job.nranks() - 1));
  SockAddr root = job.Address(0, group);
  std::string ifname;
  RR_CHECK(FindInterfaceOnSubnet(root, &ifname));
  if (rank == 0 && !IsLocalAddress(root))
    return Status::InvalidUsage("rank 0 must run on the first host (" + job.spec().hosts[0] + " = " + root.ToString() +
                                "): NCCL starts its root there, but no local interface has that address");
  unsigned char id[kNcclIdBytes];
  RR_CHECK(JobNcclId(job, group, job_magic, id));
  std::string comm_id = job.CommIdString(0, group);
  // NCCL reads NCCL_COMM_ID in ncclCommInitRank: rank 0 starts the root at that address.
  if (setenv("NCCL_COMM_ID", comm_id.c_str(), 1) != 0) return Status::System("setenv(NCCL_COMM_ID)");
  RR_INFO(log::kFlagInit | log::kFlagBootstrap, "store-less init: group %llu rank %d/%d NCCL_COMM_ID=%s (via %s)",
          static_cast<unsigned long long>(group), rank, job.nranks(), comm_id.c_str(), ifname.c_str());
  return nccl.CommInitRank(comm, job.nranks(), id, rank);
}

int ScalableRootRank(int nranks, int nroots, int root) {
  return root * (nranks / nroots) + std::min(root, nranks % nroots);
}

Status GatherRootIds(const NcclLib& nccl, const Job& job, uint64_t group, int rank, int nroots, uint64_t timeout_ms,
                     std::string* ids) {
  int n = job.nranks();
  if (nroots < 1 || nroots > n)
    return Status::InvalidArg("nroots " + std::to_string(nroots) + " is outside 1.." + std::to_string(n));
  int my_root = -1;
  for (int r = 0; r < nroots; ++r)
    if (ScalableRootRank(n, nroots, r) == rank) my_root = r;
  unsigned char id[kNcclIdBytes] = {};
  if (my_root >= 0) {
    if (std::getenv("NCCL_COMM_ID")) {
      RR_INFO(log::kFlagInit | log::kFlagBootstrap, "scalable init: unsetting NCCL_COMM_ID (NCCL would use one root)");
      unsetenv("NCCL_COMM_ID");
    }
    RR_CHECK(nccl.GetUniqueId(id));  // starts this block's root in this process
  }
  ExchangeOptions o;
  o.group = group;
  o.rank = rank;
  o.blob.assign(reinterpret_cast<const char*>(id), kNcclIdBytes);
  o.timeout_ms = timeout_ms;
  std::vector<std::string> blobs;
  RR_CHECK(AllGather(job, o, &blobs));
  ids->clear();
  for (int r = 0; r < nroots; ++r) ids->append(blobs[ScalableRootRank(n, nroots, r)]);
  return Status::Ok();
}

Status CommInitScalable(const NcclLib& nccl, const Job& job, uint64_t group, int rank, int nroots, uint64_t timeout_ms,
                        void** comm) {
  using InitScalableFn = int (*)(void**, int, int, int, void*, void*);
  auto fn = reinterpret_cast<InitScalableFn>(nccl.Symbol("ncclCommInitRankScalable"));
  if (fn == nullptr)
    return Status::InvalidUsage(nccl.path() + " (NCCL " + std::to_string(nccl.version()) +
                                ") has no ncclCommInitRankScalable; use single-root store-less init");
  if (rank < 0 || rank >= job.nranks())
    return Status::InvalidArg("rank " + std::to_string(rank) + " is outside 0.." + std::to_string(job.nranks() - 1));
  std::string ids;
  RR_CHECK(GatherRootIds(nccl, job, group, rank, nroots, timeout_ms, &ids));
  RR_INFO(log::kFlagInit | log::kFlagBootstrap, "scalable store-less init: group %llu rank %d/%d, %d roots",
          static_cast<unsigned long long>(group), rank, job.nranks(), nroots);
  return nccl.Check(fn(comm, job.nranks(), rank, nroots, &ids[0], nullptr), "ncclCommInitRankScalable");
}

Status Recover(const NcclLib& nccl, const Job& job, RecoverMode mode, uint64_t* group, int rank, void* comm,
               const int* exclude, int nexclude, bool job_magic, void** newcomm) {
  if (comm == nullptr || newcomm == nullptr || group == nullptr) return Status::InvalidArg("recover: null argument");
  if (mode == RecoverMode::kShrink) {
    if (nexclude < 0 || (nexclude > 0 && exclude == nullptr)) return Status::InvalidArg("recover: bad exclude list");
    RR_CHECK(nccl.CommShrink(comm, exclude, nexclude, newcomm));
    Status s = nccl.CommAbort(comm);
    if (!s.ok()) RR_WARN("recover: parent abort after shrink: %s", s.ToString().c_str());
    return Status::Ok();
  }
  if (nccl.Symbol("ncclCommRevoke") != nullptr) {
    Status s = nccl.CommRevoke(comm);  // stop in-flight work; abort below frees everything anyway
    if (!s.ok()) RR_INFO(log::kFlagInit, "recover: revoke: %s (aborting anyway)", s.ToString().c_str());
  }
  RR_CHECK(nccl.CommAbort(comm));
  ++*group;
  return CommInitStoreless(nccl, job, *group, rank, job_magic, newcomm);
}

}  // namespace rr::boot
