#include "idle_sends.h"

#include <algorithm>
#include <chrono>

#include "conn.h"

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
    comms_.push_back(c);
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
    comms_.erase(std::remove(comms_.begin(), comms_.end(), c), comms_.end());
  }
  cv_.notify_one();
}

void IdleSends::Run() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_ && !comms_.empty()) {
    cv_.wait_for(lk, std::chrono::nanoseconds(kPeriodNs), [this] { return stop_ || comms_.empty(); });
    for (std::size_t i = 0; !stop_ && i < comms_.size();) {
      if (comms_[i]->TryIdleProgress()) ++i;
      else comms_.erase(comms_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  running_ = false;
}

}  // namespace rr::net
