// rerail — host-memory registration on every rail at once, with a cache (issue 12, scope 2).
//
// Why every rail: a chunk of a message may leave on any rail after a failover, so NCCL's one regMr
// registers the buffer on the protection domain of each rail's device and the handle carries one
// (lkey, rkey) pair per rail. Migrating a chunk to another rail then never registers anything.
//
// Contract
//   * Register(addr, len) page-aligns the range as NCCL's net_ib does (base = addr rounded down to the
//     page, length rounded up to whole pages). A live entry whose range contains it is reused (its
//     reference count goes up); otherwise the aligned range is registered on every rail, in rail order,
//     and a failure on any rail deregisters the rails already done and returns the error (no partial
//     handle ever escapes).
//   * Deregister(handle) drops one reference; the last one deregisters every rail's MR. A handle stays
//     valid (and its keys usable) until then.
//   * The cache is keyed by address ranges only: a buffer freed and re-allocated at the same address
//     without NCCL deregistering it first is NCCL's misuse, as for NCCL's own cache.
//   * Thread-safety: Register/Deregister take one mutex (NCCL calls them from its proxy service thread,
//     possibly concurrently with other comms). Reading a handle's keys needs no lock.
//   * The registrar is the seam to the verbs: VerbsRegistrar over IbDevices in production; unit tests
//     use an in-memory one that also injects failures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "rerail/status.h"

namespace rr::ib {

class IbDevice;
class IbMr;

// Registers one range on one rail; the token is what Deregister gets back.
class MrRegistrar {
 public:
  virtual ~MrRegistrar() = default;
  virtual int rails() const = 0;
  virtual Status Register(int rail, void* addr, size_t len, uint32_t* lkey, uint32_t* rkey, void** token) = 0;
  virtual void Deregister(int rail, void* token) = 0;
};

// Production registrar: ibv_reg_mr on each rail's IbDevice (LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ).
class VerbsRegistrar : public MrRegistrar {
 public:
  explicit VerbsRegistrar(std::vector<IbDevice*> rails) : rails_(std::move(rails)) {}
  int rails() const override { return static_cast<int>(rails_.size()); }
  Status Register(int rail, void* addr, size_t len, uint32_t* lkey, uint32_t* rkey, void** token) override;
  void Deregister(int rail, void* token) override;

 private:
  std::vector<IbDevice*> rails_;
};

struct RailKey {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

// What regMr hands NCCL (as the opaque mhandle).
struct MrHandle {
  uintptr_t base = 0;  // page-aligned start of the registered range
  size_t len = 0;      // page-aligned length
  std::vector<RailKey> keys;  // one per rail, index = rail
  int refs = 0;               // guarded by the cache's mutex
  std::vector<void*> tokens;  // registrar tokens, one per rail
};

class MrCache {
 public:
  // page: the page size to align to (0: sysconf(_SC_PAGESIZE)).
  explicit MrCache(MrRegistrar* registrar, size_t page = 0);
  ~MrCache();  // deregisters whatever NCCL left registered
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  Status Register(void* addr, size_t len, MrHandle** out);
  Status Deregister(MrHandle* h);  // InternalError for a handle this cache does not hold

  size_t entries() const;  // live registrations (tests, rerail-info)

 private:
  void Release(MrHandle* h);  // deregister on every rail

  MrRegistrar* reg_;
  size_t page_;
  mutable std::mutex mu_;
  // Live entries. A linear scan, as NCCL's own cache does: a process registers a handful of buffers
  // per comm (NCCL's proxy buffers and user buffers), never a hot path.
  std::vector<std::unique_ptr<MrHandle>> entries_;
};

}  // namespace rr::ib
