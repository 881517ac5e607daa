// rerail-perf — runs a Plan: plays the GPU (primitives on host memory) and the proxy (the plugin
// calls on every connection) in one loop, like a rank of NCCL with its proxy thread.
//
// Contract
//   * Run() returns when every stream ran all its primitives and every connection finished its
//     slices; it blocks (busy-polling the plugin, yielding when idle) up to the deadline given.
//   * Each pass tries every stream, then progresses every connection (see conn.h for the proxy
//     call order). Received slice sizes are checked against the plan; a mismatch is an error.
//   * `in`/`out` must hold plan.in_bytes / plan.out_bytes (in-place: both point into one buffer).
//   * Errors: plugin failures (as Status from Conn), size mismatches, no progress before the deadline.
//   * Not thread-safe; one Engine per rank.
#pragma once

#include <functional>
#include <vector>

#include "comm.h"
#include "conn.h"
#include "plan.h"
#include "rerail/clock.h"

namespace rr::perf {

class Engine {
 public:
  // on_sent: per completed send (timeline); tick: once per pass (cheap periodic work, may be empty).
  Engine(Comm* comm, DataType dtype, BytesFn on_sent, std::function<void()> tick)
      : comm_(comm), dtype_(dtype), on_sent_(std::move(on_sent)), tick_(std::move(tick)) {}

  // Resolves the plan's connections once (the plan can then be run many times).
  Status Bind(const Plan& plan, std::vector<Conn*>* conns) const;
  Status Run(const Plan& plan, const std::vector<Conn*>& conns, char* in, char* out, const Deadline& dl);
  // --profiler: every Run starts a Group and a Coll (stopped right away, as NCCL does after enqueue)
  // and each connection's op becomes a ProxyOp under that Coll (Conn::BeginOp). `emu` may be null.
  void SetProfiler(prof::NcclEmu* emu, int channels) { emu_ = emu, channels_ = channels; }

 private:
  // Runs the stream's next primitive if its inputs and a slot are ready.
  bool TryElem(const Plan& plan, const std::vector<Conn*>& conns, int s, char* in, char* out, Status* err);
  void Reduce(char* dst, char* dst2, const char* a, const char* b, size_t bytes) const;

  Comm* comm_;
  DataType dtype_;
  BytesFn on_sent_;
  std::function<void()> tick_;
  std::vector<size_t> pos_;  // next element per stream
  prof::NcclEmu* emu_ = nullptr;
  int channels_ = 1;
};

}  // namespace rr::perf
