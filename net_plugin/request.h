// rerail — NCCL request objects and the per-comm request pool.
//
// Contract
//   * A comm owns a fixed pool of kMaxRequests requests (NCCL_NET_MAX_REQUESTS = 32): isend/irecv
//     hand one out, test() returns it to the pool when it reports done. An empty pool makes
//     isend/irecv answer "retry" (*request = NULL), never an error.
//   * Requests never move (fixed array inside the comm), so NCCL may hold the pointer until test()
//     says done. The first field is a magic so a stale or foreign pointer is caught with a clear error.
//   * Thread-safety: none. A comm's requests are used by NCCL's progress thread only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "rerail/prof_net_event.h"
#include "wire.h"

namespace rr::net {

class Comm;

constexpr int kMaxRequests = 32;
constexpr uint32_t kRequestMagic = 0x52455152u;  // "RQER"

enum class ReqState : uint8_t {
  kFree,     // in the pool
  kPending,  // posted, not complete
  kDone,     // complete, not yet reported by test()
};

struct Request {
  uint32_t magic = kRequestMagic;
  ReqState state = ReqState::kFree;
  bool is_send = false;
  Comm* comm = nullptr;
  uint64_t seq = 0;   // message sequence number (a grouped receive: its last element's)
  size_t size = 0;    // send: message size; recv: bytes received (valid when kDone)
  int n = 1;          // recv: buffers of the (grouped) receive
  int ndone = 0;      // recv: elements complete
  void* slots[kMaxRecvs] = {};    // recv: RxTracker::Slot of each element
  size_t sizes[kMaxRecvs] = {};   // recv: bytes received per element (valid when kDone)
  void* prof = nullptr;  // profiler IO span handle (NULL when none was started)
  rrProfNetEvent_v1_t io{};  // its descriptor; NCCL's profiler may read it until the span stops
};

class RequestPool {
 public:
  explicit RequestPool(Comm* owner) {
    for (int i = 0; i < kMaxRequests; ++i) {
      reqs_[i].comm = owner;
      free_[i] = &reqs_[kMaxRequests - 1 - i];
    }
    nfree_ = kMaxRequests;
  }
  // nullptr when every request is in use.
  Request* Get(bool is_send) {
    if (nfree_ == 0) return nullptr;
    Request* r = free_[--nfree_];
    r->state = ReqState::kPending;
    r->is_send = is_send;
    r->size = 0;
    r->seq = 0;
    r->n = 1;
    r->ndone = 0;
    for (int i = 0; i < kMaxRecvs; ++i) r->slots[i] = nullptr, r->sizes[i] = 0;
    r->prof = nullptr;
    return r;
  }
  void Put(Request* r) {
    r->state = ReqState::kFree;
    free_[nfree_++] = r;
  }
  int in_use() const { return kMaxRequests - nfree_; }
  bool Owns(const Request* r) const { return r >= reqs_ && r < reqs_ + kMaxRequests; }

 private:
  Request reqs_[kMaxRequests];
  Request* free_[kMaxRequests];
  int nfree_ = 0;
};

}  // namespace rr::net
