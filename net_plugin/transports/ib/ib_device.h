// rerail — verbs objects of one rail: an opened HCA port with its protection domain (IbDevice), a
// completion queue (IbCq) and a memory registration (IbMr). The RC queue pair is in ib_qp.h.
//
// Contract
//   * Every object is RAII: the destructor releases the verbs resource (dereg, destroy, dealloc,
//     close) and must run before the IbDevice it came from. Made by factories, held by unique_ptr.
//   * All calls go through a loaded VerbsLib (verbs_loader.h); nothing here links libibverbs.
//   * Errors: Status::System naming the verb, the device and errno's text. No call blocks except
//     IbDevice::Open (it opens the device file) and registration (the kernel pins pages).
//   * Thread-safety: none of their own. Verbs themselves are thread-safe, but an IbCq is polled by one
//     thread (the comm's progress thread), as in NCCL.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rerail/status.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/verbs_api.h"
#include "transports/ib/verbs_loader.h"

namespace rr::ib {

// One usable port (a discovered IbPort) opened for I/O: context + protection domain. One per rail
// per process; every registration and QP of that rail hangs off it.
class IbDevice {
 public:
  static Status Open(const VerbsLib& lib, const IbPort& port, std::unique_ptr<IbDevice>* out);
  ~IbDevice();
  IbDevice(const IbDevice&) = delete;
  IbDevice& operator=(const IbDevice&) = delete;

  const VerbsLib& lib() const { return lib_; }
  const IbPort& port() const { return port_; }
  vx::Context* context() const { return ctx_; }
  vx::Pd* pd() const { return pd_; }
  int mtu_enum() const { return mtu_enum_; }  // enum ibv_mtu of the port (1 = 256 ... 5 = 4096)
  uint32_t max_inline() const { return 64; }  // what rerail asks for (rxe: up to 240; mlx5: 220)

 private:
  IbDevice(const VerbsLib& lib, IbPort port) : lib_(lib), port_(std::move(port)) {}
  const VerbsLib& lib_;
  IbPort port_;
  vx::Context* ctx_ = nullptr;
  vx::Pd* pd_ = nullptr;
  int mtu_enum_ = 3;
};

// A completion queue; polled, never armed (no completion channel), as NCCL does.
class IbCq {
 public:
  static Status Create(IbDevice& dev, int entries, std::unique_ptr<IbCq>* out);
  ~IbCq();
  IbCq(const IbCq&) = delete;
  IbCq& operator=(const IbCq&) = delete;

  vx::Cq* cq() const { return cq_; }
  int entries() const { return entries_; }
  // Up to `max` completions into wc[]; returns how many (0: none now) or a System error.
  Status Poll(int max, vx::Wc* wc, int* n);

 private:
  explicit IbCq(IbDevice& dev) : dev_(dev) {}
  IbDevice& dev_;
  vx::Cq* cq_ = nullptr;
  int entries_ = 0;
};

// One registration of [addr, addr+len) on a device's protection domain.
class IbMr {
 public:
  // access: vx::Access bits; rerail registers buffers LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ
  // (REMOTE_READ: the receiver's flush and the sender's landed-data check read by RDMA READ).
  static Status Register(IbDevice& dev, void* addr, size_t len, int access, std::unique_ptr<IbMr>* out);
  ~IbMr();
  IbMr(const IbMr&) = delete;
  IbMr& operator=(const IbMr&) = delete;

  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  void* addr() const { return mr_->addr; }
  size_t length() const { return mr_->length; }

 private:
  explicit IbMr(IbDevice& dev) : dev_(dev) {}
  IbDevice& dev_;
  vx::Mr* mr_ = nullptr;
};

// "RETRY_EXC_ERR" style names for logs (ibv_wc_status_str when loaded).
std::string WcStatusName(const VerbsLib& lib, int status);

}  // namespace rr::ib
