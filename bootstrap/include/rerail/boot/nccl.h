// rerail bootstrap — store-less NCCL ids, run-time libnccl, recovery helpers (C++ API).
//
// Ids: with NCCL_COMM_ID=<host>:<port> set, NCCL's ncclGetUniqueId returns a pure function of that
// string (reference §7.1): magic 0x0280028002800280, then the socket address, then zeros. BuildNcclId
// produces the same 128 bytes on every rank without any exchange; a per-(job, group) magic
// (Job::Magic) may replace NCCL's constant so a stale peer of another group fails NCCL's handshake.
//
// libnccl is resolved at run time (dlopen + dlsym), never linked: one build works with any NCCL
// version and on hosts without NCCL; functions that only newer releases have (ncclCommShrink,
// ncclCommRevoke: 2.27+) are looked up when used and reported clearly when missing.
//
// Thread-safety: NcclLib is immutable after Open and may be shared. CommInitStoreless and Recover
// set NCCL_COMM_ID with setenv(): do not run them concurrently with each other or with code reading
// the environment.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rerail/boot/job.h"
#include "rerail/status.h"

namespace rr::boot {

constexpr size_t kNcclIdBytes = 128;

// The id NCCL builds from NCCL_COMM_ID=comm_id (see ParseHostPort for the accepted forms), with
// `magic` in its first 8 bytes (kNcclCommIdMagic for NCCL's own).
Status BuildNcclId(const std::string& comm_id, uint64_t magic, unsigned char out[kNcclIdBytes]);
// The id of `group`: NCCL_COMM_ID = address of rank 0 for that group; job_magic selects Job::Magic.
Status JobNcclId(const Job& job, uint64_t group, bool job_magic, unsigned char out[kNcclIdBytes]);

// The NCCL rule for NCCL_COMM_ID: some local interface must be on the same subnet as `addr`
// (NCCL fails every init otherwise). Ok names the interface in *ifname.
Status FindInterfaceOnSubnet(const SockAddr& addr, std::string* ifname);
// Whether `addr` (port ignored) is assigned to a local interface.
bool IsLocalAddress(const SockAddr& addr);

class NcclLib {
 public:
  // dlopen(path, RTLD_NOW|RTLD_GLOBAL); requires ncclGetVersion, ncclGetUniqueId, ncclCommInitRank,
  // ncclCommAbort, ncclGetErrorString. Errors: kInvalidUsage naming the library and the symbol.
  static Status Open(const std::string& path, std::unique_ptr<NcclLib>* out);
  // The process-wide instance for RERAIL_NCCL_LIB (opened once; later calls return the same).
  static Status Default(NcclLib** out);
  ~NcclLib();

  int version() const { return version_; }  // e.g. 22809
  const std::string& path() const { return path_; }
  void* Symbol(const char* name) const;    // nullptr when absent

  Status GetUniqueId(unsigned char out[kNcclIdBytes]) const;
  Status CommInitRank(void** comm, int nranks, const unsigned char id[kNcclIdBytes], int rank) const;
  Status CommAbort(void* comm) const;
  Status CommRevoke(void* comm) const;  // kInvalidUsage when this NCCL has no ncclCommRevoke
  Status CommShrink(void* comm, const int* exclude, int nexclude, void** newcomm) const;  // same
  // Turns an ncclResult_t into a Status naming `what`, NCCL's error string and ncclGetLastError.
  Status Check(int rc, const char* what) const;

 private:
  void* handle_ = nullptr;
  std::string path_;
  int version_ = 0;
};

// Builds the group's id, sets NCCL_COMM_ID (rank 0 then starts NCCL's root on host[0]:port; every
// rank's bootstrap interface follows NCCL's subnet rule) and calls ncclCommInitRank(job.nranks()).
// Checks first, with clear errors: rank 0 must run on host[0] (the address must be local), and a
// local interface must share host[0]'s subnet.
Status CommInitStoreless(const NcclLib& nccl, const Job& job, uint64_t group, int rank, bool job_magic, void** comm);

// Multi-root ("scalable") init without a store: the first rank of each of `nroots` blocks (NCCL's
// layout: root r serves ranks from r*floor(n/nroots) + min(r, n mod nroots)) calls ncclGetUniqueId,
// which starts an NCCL root in that process; the ids travel to every rank through the rootless
// exchange of `group` (Job::Address ports); then ncclCommInitRankScalable(nranks, rank, nroots, ids).
// NCCL_COMM_ID is unset first (with it NCCL would use only the first id). Needs NCCL >= 2.23's
// ncclCommInitRankScalable (kInvalidUsage naming it otherwise).
int ScalableRootRank(int nranks, int nroots, int root);
// The exchange step alone: *ids receives the nroots ids, in root order, on every rank.
Status GatherRootIds(const NcclLib& nccl, const Job& job, uint64_t group, int rank, int nroots, uint64_t timeout_ms,
                     std::string* ids);
Status CommInitScalable(const NcclLib& nccl, const Job& job, uint64_t group, int rank, int nroots,
                        uint64_t timeout_ms, void** comm);

enum class RecoverMode {
  kShrink,    // ncclCommShrink(NCCL_SHRINK_ABORT) without the excluded ranks, then abort the parent
  kRecreate,  // revoke (if available) + abort, then CommInitStoreless with ++group, same size
};
// In-process recovery of a failed communicator. For kRecreate *group is advanced (every survivor
// and the replacement rank must pass the same value). On success *newcomm is usable and `comm` is
// gone; on failure `comm` has been aborted unless the error says otherwise.
Status Recover(const NcclLib& nccl, const Job& job, RecoverMode mode, uint64_t* group, int rank, void* comm,
               const int* exclude, int nexclude, bool job_magic, void** newcomm);

}  // namespace rr::boot
