// The collector: one background thread per process that drains every thread's ring, matches start/state/
// stop records into events, builds the parent/child tree and hands completed events to each comm's
// CommOutput (trace, summary, textfile). All file I/O of the profiler happens on this thread.
//
// Contract
//   * Start() launches the thread; Stop() drains what is left, closes every comm still open and joins.
//   * Add(ctx) registers a communicator (its CommOutput must be open). Close(ctx, timeout) asks the thread
//     to finish that comm and blocks the caller (NCCL's finalize, never a data-path thread) until the
//     final outputs are written or the timeout passes; returns false on timeout.
//   * Matching rules
//       - A record referring to a handle not yet seen (a child whose parent's start sits in another
//         thread's ring, or a stop drained before its start) is retried in the next pass; if still
//         unknown it is counted (orphan stop/state) or kept with parent_lost (start).
//       - An event's extent is max(its stop, its children's ends): NCCL stops Group/Coll/P2p events on
//         the host right after enqueue, long before their proxy operations finish. Such events stay open
//         ("linger") for linger_ns after their last activity so late children can still attach.
//       - Events never stopped when their comm closes are written with args.unfinished = true.
//       - A child starting after its parent was written (later than the linger time) still names it as
//         parent (a bounded memory of recently written parents), but cannot extend its extent.
//   * Memory: open events are capped (kMaxOpen); starts beyond it are dropped and counted.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "comm_output.h"
#include "event_model.h"
#include "lanes.h"

namespace rr::prof {

class Collector {
 public:
  static constexpr size_t kMaxOpen = 1u << 18;     // ~240 B each: at most ~60 MiB of open events
  static constexpr uint64_t kPassNs = 10'000'000;  // the thread wakes every 10 ms

  explicit Collector(uint64_t linger_ns = 500'000'000ull) : linger_ns_(linger_ns) {}
  ~Collector() { Stop(); }
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  void Start();
  void Stop();
  void Add(Context* ctx);
  bool Close(Context* ctx, uint64_t timeout_ms);

 private:
  struct Pending {
    Record rec;
    bool retried;
  };

  void Loop();
  void Pass(bool stopping);
  // Returns false when the record refers to a handle not seen yet.
  bool Apply(const Record& r, bool last_try);
  bool OnBegin(const Record& r, bool last_try);
  bool OnState(const Record& r);
  bool OnEnd(const Record& r);
  void MaybeComplete(uint64_t id);
  void Complete(uint64_t id);
  void ReleaseLingering(uint64_t now, Context* only_closing);
  void FinishContext(Context* ctx);
  static bool Lingers(uint32_t type);

  // What a late child needs from an already written parent (its trace id and track).
  struct Written {
    uint64_t seq, vis_parent;
    bool visible;
    int track;
  };
  static constexpr size_t kRecentWritten = 1u << 16;
  void Remember(const EventRec& ev);

  const uint64_t linger_ns_;
  std::unordered_map<uint64_t, EventRec> open_;
  LaneMap lanes_;
  std::unordered_map<uint64_t, Written> written_;  // the last kRecentWritten Group/Coll/P2p/ProxyOp events
  std::vector<uint64_t> written_order_;            // ring of their ids, oldest at written_next_
  size_t written_next_ = 0;
  std::vector<uint64_t> lingering_;  // stopped Group/Coll/P2p ids waiting for late children
  std::vector<Pending> deferred_;
  std::vector<Record> drained_;
  GlobalCounters g_;
  template <typename F>
  void Guarded(const char* what, F&& f);
  static constexpr uint64_t kMaxErrorWarns = 5;
  uint64_t errors_ = 0;  // exceptions caught on the collector thread

  std::mutex mu_;
  std::condition_variable cv_;    // wakes the thread
  std::condition_variable done_;  // signals a finished Close()
  std::vector<Context*> contexts_;
  bool running_ = false;
  bool stop_ = false;
  bool kick_ = false;
  std::thread thread_;
};

}  // namespace rr::prof
