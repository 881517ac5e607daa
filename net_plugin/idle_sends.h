// IdleSends: send comms that NCCL will not drive again before its next isend on them, but that still
// owe the peer something only they can deliver.
//
// An eager send completes once written (core.h): NCCL sees it done and calls nothing more on that
// comm until its next isend, which in a ring may wait on a receive that depends on this very send,
// and once a rank's part of a collective is done its proxy may call nothing at all. If the link the
// send went out on dies meanwhile (a black hole the receiver detects and reports on a survivor),
// only this comm's own progress reads that notice and re-sends the message. Found on 2 netns hosts x
// 2 rails: rerail-perf -C 4 (all collectives, 4 B .. 16 MiB), rail 1 black-holed for 2-5 s then
// healed: 2 of 13 runs stalled until their deadline with the receiver's notice unread; the same
// stall ended a real NCCL run on an H200 (README, "What ran on a GPU").
//
// A send comm lists itself when test() hands back its last outstanding request while sends remain
// unacknowledged. A receive comm (TCP and IB) does the same while its sender may still wait for an
// ack of the receives it completed (RecvCore::OwesIdleProgress): only a driven receiver accepts the
// links its sender probes after a failure and writes the ack again on them (tests/sim seeds 100387,
// 100931). A background thread, running only while something is listed (it ends when the list
// empties, so closing every comm leaves no thread; neither listing nor leaving wakes it unless a new
// comm is due before its next wakeup), drives each listed comm that no progress pass drove (NCCL's
// isend/test, or this thread: Comm::DrivenNs) for kPeriodNs, unless its owner is inside it
// (Comm::TryIdleProgress: try-lock of the comm's drive lock, which isend/test hold), and drops it
// once it is acknowledged, ended, or NCCL holds a request of it again. A comm NCCL keeps driving
// costs the thread one look per period and no lock: in a loopback ping-pong, the passes it used to
// make there took the comms' locks from under test() (about 250 of every 100 000 round trips blocked
// on one, perf sched_switch callchains). One wakeup serves every comm due within kSlackNs of it. A
// comm sets its own cadence: kPeriodNs, or a lingering receive comm's slower RecvCore::IdlePeriodNs;
// the thread sleeps until the earliest is due. A comm that NCCL drives again
// and leaves again before its entry's pass keeps that entry: its first idle pass then comes within
// the period it last asked for (at most a quarter of a sender's probe timeout), not within kPeriodNs
// (the simulator models the 5 ms pass; re-listing on every completion would take this list's lock on
// test()'s path). A comm leaves the list before it is destroyed (Remove waits for a pass in
// progress). Lock order: a comm's drive lock, then the list's; the thread never waits for a comm.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace rr::net {

class Comm;

class IdleSends {
 public:
  static constexpr uint64_t kPeriodNs = 5'000'000;   // far under the stall and heartbeat timers
  // A wakeup also serves every comm due this much later: comms driven together share one wakeup.
  static constexpr uint64_t kSlackNs = kPeriodNs / 5;

  static IdleSends& Get();
  ~IdleSends();
  void Add(Comm* c);
  void Remove(Comm* c);
  // With nothing listed, waits (at most a second) for the thread to end and joins it: the plugin's
  // last finalize leaves no thread of rerail's behind. A thread that saw its list empty is still
  // exiting for a moment after Remove returns (a thread count right after finalize saw it under load).
  void JoinIfIdle();

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable ended_;  // the thread set running_ = false
  struct Entry {
    Comm* comm;
    uint64_t due_ns;     // its next look
    uint64_t period_ns;  // how long a comm may go undriven: what Comm::TryIdleProgress last asked for
  };
  std::vector<Entry> comms_;
  std::thread thread_;
  bool running_ = false;
  bool stop_ = false;
  uint64_t wake_ns_ = 0;  // when the sleeping thread wakes next (0: it is not sleeping)
};

}  // namespace rr::net
