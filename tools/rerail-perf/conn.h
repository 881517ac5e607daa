// rerail-perf — one network connection driven the way NCCL's proxy drives it (reference §3.3–§3.5).
//
// Contract
//   * A connection owns a host buffer of kSteps (8) steps of step_bytes each, registered with the
//     plugin (NCCL_PTR_HOST). An operation uses slices of slice_steps steps (ring collectives: 2,
//     broadcast and p2p: 1), so at most kSteps / slice_steps slices are in flight.
//   * The "GPU" side (Engine) fills send slices (Fill) and consumes received slices (Consume); the
//     proxy side (Progress) posts isend for each filled slice, irecv ahead for up to the free slots
//     (only as many as the operation will receive), and tests only the OLDEST outstanding request, as
//     the proxy does. A NULL request from isend/irecv is retried on the next Progress call.
//   * Completed sends add their bytes to the per-device counter passed in (timeline).
//   * Profiler (--profiler): when BeginOp gets an NcclEmu, the operation is a ProxyOp under `task` and
//     every posted slice a ProxyStep, started before isend/irecv with its slot as phandle and stopped
//     when test reports it done (as NCCL's proxy does, reference §4.1); the op stops when the last
//     slice completes. Without one, the plugin gets NULL phandles.
//   * Errors: any non-success from the plugin is returned as Status naming the call, peer and
//     channel; the caller stops the run (NCCL would stop the proxy too, reference §3.7).
//   * Not thread-safe: one thread drives all connections of a rank.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "nccl_emu.h"
#include "net_loader.h"
#include "rerail/status.h"

namespace rr::perf {

constexpr int kSteps = 8;  // NCCL_STEPS

// Called with (device, bytes) when a send completes.
using BytesFn = std::function<void(int dev, size_t bytes)>;

class Conn {
 public:
  // my_rank: the tag a send carries (NCCL tags sends with the sender's rank; receives expect the peer's).
  Conn(netdrv::NetPlugin* net, bool is_send, int my_rank, int peer, int channel, int dev, size_t step_bytes)
      : net_(net), is_send_(is_send), tag_(is_send ? my_rank : peer), peer_(peer), channel_(channel), dev_(dev),
        step_bytes_(step_bytes), buf_(step_bytes * kSteps) {}
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Takes ownership of the established plugin comm and registers the buffer.
  Status Attach(void* comm);
  bool attached() const { return comm_ != nullptr; }

  // Starts an operation that will move `nslices` slices of up to slice_steps*step_bytes bytes.
  // `emu`/`task`: profiler emulation and the collective the op belongs to (both may be null).
  Status BeginOp(int slice_steps, uint64_t nslices, prof::NcclEmu* emu = nullptr, void* task = nullptr);
  size_t SliceCapacity() const { return step_bytes_ * static_cast<size_t>(slice_steps_); }

  // ---- GPU side -------------------------------------------------------------------------------------
  bool CanFill() const { return filled_ - done_ < Slots() && filled_ < nslices_; }
  char* FillPtr() { return SlotPtr(filled_); }
  void Fill(size_t bytes) { sizes_[SlotIndex(filled_)] = bytes, ++filled_; }
  bool CanConsume() const { return consumed_ < arrived_; }
  const char* ConsumePtr() { return SlotPtr(consumed_); }
  size_t ConsumeSize() const { return sizes_[SlotIndex(consumed_)]; }
  void Consume() { ++consumed_; }

  // ---- proxy side -----------------------------------------------------------------------------------
  // Posts and tests as the proxy does; *progressed is set when anything moved.
  Status Progress(const BytesFn& on_sent, bool* progressed);
  // True when every slice of the operation was sent and completed / received and consumed.
  bool OpDone() const { return is_send_ ? done_ == nslices_ : consumed_ == nslices_; }

  int peer() const { return peer_; }
  int channel() const { return channel_; }
  int dev() const { return dev_; }
  bool is_send() const { return is_send_; }

 private:
  uint64_t Slots() const { return static_cast<uint64_t>(kSteps / slice_steps_); }
  int SlotIndex(uint64_t slice) const { return static_cast<int>(slice % Slots()) * slice_steps_; }
  char* SlotPtr(uint64_t slice) { return buf_.data() + static_cast<size_t>(SlotIndex(slice)) * step_bytes_; }
  Status Fail(const char* call, int rc) const;
  void* StartStep(int k, uint64_t slice);
  void StopStep(int k);

  netdrv::NetPlugin* net_;
  bool is_send_;
  int tag_;
  int peer_, channel_, dev_;
  size_t step_bytes_;
  std::vector<char> buf_;
  void* comm_ = nullptr;
  void* mh_ = nullptr;
  int slice_steps_ = 1;
  uint64_t nslices_ = 0;
  // Send: filled (GPU wrote) >= posted (isend issued) >= done (test said done).
  // Recv: posted (irecv issued) >= arrived (test said done) >= consumed (GPU read it).
  uint64_t filled_ = 0, posted_ = 0, done_ = 0, arrived_ = 0, consumed_ = 0;
  size_t sizes_[kSteps] = {};
  void* reqs_[kSteps] = {};
  prof::NcclEmu* emu_ = nullptr;          // profiler emulation of the current op (null: none)
  void* op_ = nullptr;                    // its ProxyOp handle
  prof::NcclEmu::ProxyStep steps_[kSteps];  // NCCL's pHandles: the phandle of each slot's request
  bool step_open_[kSteps] = {};
};

}  // namespace rr::perf
