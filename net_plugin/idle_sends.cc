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

void IdleSends::Add(Comm* c) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    comms_.push_back(Entry{c, NowNs() + kPeriodNs});
    if (!running_) {   // the thread ends whenever the list empties (no thread left behind)
      if (thread_.joinable()) thread_.join();   // it returned: it set running_ under mu_ as its last step
      running_ = true;
      thread_ = std::thread([this] { Run(); });
    }
  }
  cv_.notify_one();
}

void IdleSends::Remove(Comm* c) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    comms_.erase(std::remove_if(comms_.begin(), comms_.end(), [c](const Entry& e) { return e.comm == c; }),
                 comms_.end());
  }
  cv_.notify_one();
}

void IdleSends::Run() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_ && !comms_.empty()) {
    uint64_t now = NowNs(), next = UINT64_MAX;
    for (const Entry& e : comms_) next = std::min(next, e.due_ns);
    if (next > now) {
      // Add and Remove notify: a new comm is due kPeriodNs after it was listed, and the wait is
      // recomputed with it.
      cv_.wait_for(lk, std::chrono::nanoseconds(std::min(next - now, kPeriodNs * 100)));
      continue;
    }
    for (std::size_t i = 0; !stop_ && i < comms_.size();) {
      if (comms_[i].due_ns > now) {
        ++i;
        continue;
      }
      uint64_t in = comms_[i].comm->TryIdleProgress();
      if (in == 0) {
        comms_.erase(comms_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      comms_[i].due_ns = now + in;
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
