#include "idle_sends.h"

#include <algorithm>
#include <chrono>

#include "conn.h"
#include "rerail/clock.h"

namespace rr::net {

IdleSends& IdleSends::Get() {
  static IdleSends s;
  return s;
}

IdleSends::~IdleSends() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

// Neither Add nor Remove wakes the thread unless it must: a comm lists itself again after most of its
// completions, and a wakeup is a context switch that, on a machine whose cores all spin in progress
// loops, takes a core from one of them (every 5 ms pass was preceded by one: 2 700 switches a second
// in a loopback ping-pong, a slow round trip each).
void IdleSends::Add(Comm* c) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const uint64_t due = NowNs() + kPeriodNs;
    comms_.push_back(Entry{c, due, kPeriodNs});
    if (!running_) {   // the thread ends whenever the list empties (no thread left behind)
      if (thread_.joinable()) thread_.join();   // it returned: it set running_ under mu_ as its last step
      running_ = true;
      thread_ = std::thread([this] { Run(); });
    } else {
      wake = due < wake_ns_;  // it sleeps past this comm's first pass
    }
  }
  if (wake) cv_.notify_one();
}

// No wakeup: a thread whose list emptied ends at its next wakeup (JoinIfIdle wakes it at once).
void IdleSends::Remove(Comm* c) {
  std::lock_guard<std::mutex> lk(mu_);
  comms_.erase(std::remove_if(comms_.begin(), comms_.end(), [c](const Entry& e) { return e.comm == c; }),
               comms_.end());
}

void IdleSends::Run() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_ && !comms_.empty()) {
    uint64_t now = NowNs(), next = UINT64_MAX;
    for (const Entry& e : comms_) next = std::min(next, e.due_ns);
    if (next > now) {
      // Add wakes it for a comm due before wake_ns_; the wait is then recomputed with it.
      const uint64_t wait = std::min(next - now, kPeriodNs * 100);
      wake_ns_ = now + wait;
      cv_.wait_for(lk, std::chrono::nanoseconds(wait));
      wake_ns_ = 0;
      continue;
    }
    for (std::size_t i = 0; !stop_ && i < comms_.size();) {
      Entry& e = comms_[i];
      if (e.due_ns > now + kSlackNs) {
        ++i;
        continue;
      }
      // A progress pass drove it within its period: it needs no pass yet (no lock taken, nothing
      // read), only a look a period after that drive.
      const uint64_t driven = e.comm->DrivenNs();
      if (driven + e.period_ns > now + kSlackNs) {
        e.due_ns = driven + e.period_ns;
        ++i;
        continue;
      }
      const uint64_t in = e.comm->TryIdleProgress();
      if (in == 0) {
        comms_.erase(comms_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      e.period_ns = in;
      e.due_ns = now + in;
      ++i;
    }
  }
  running_ = false;
  ended_.notify_all();
}

void IdleSends::JoinIfIdle() {
  std::unique_lock<std::mutex> lk(mu_);
  if (!comms_.empty()) return;
  cv_.notify_one();
  // running_ goes false under mu_ as the thread's last step: once seen, joining under mu_ is safe.
  ended_.wait_for(lk, std::chrono::seconds(1), [this] { return !running_ || !comms_.empty(); });
  if (!running_ && thread_.joinable()) thread_.join();
}

}  // namespace rr::net
