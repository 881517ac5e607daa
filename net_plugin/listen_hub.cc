#include "listen_hub.h"

#include "rerail/log.h"

namespace rr::net {

Status ListenHub::Pump() {
  // The transport hands out one ready link per Poll; a connection brings at most a few at once.
  for (int i = 0; i < 64; ++i) {
    std::unique_ptr<Link> link;
    RR_CHECK(listener_->Poll(&link));
    if (!link) break;
    const uint64_t conn = link->identity().conn_id;
    if (retired_.count(conn) != 0) {
      RR_INFO(log::kFlagNet, "conn %016lx: closed a late link (%s) of a connection already closed",
              static_cast<unsigned long>(conn), link->Describe().c_str());
      continue;
    }
    auto it = parked_.find(conn);
    if (it != parked_.end())
      it->second.push_back(std::move(link));
    else if (accepting_)
      fresh_.push_back(std::move(link));
    else
      RR_INFO(log::kFlagNet, "conn %016lx: closed a link (%s) that arrived after its listen comm was closed",
              static_cast<unsigned long>(conn), link->Describe().c_str());
  }
  return Status::Ok();
}

Status ListenHub::PollNew(std::unique_ptr<Link>* out) {
  std::lock_guard<std::mutex> lk(mu_);
  RR_CHECK(Pump());
  if (fresh_.empty()) return Status::Ok();
  *out = std::move(fresh_.front());
  fresh_.pop_front();
  const uint64_t conn = (*out)->identity().conn_id;
  auto& mine = parked_[conn];  // claims the connection: its other links go to its RecvComm
  for (auto it = fresh_.begin(); it != fresh_.end();) {
    if ((*it)->identity().conn_id == conn) {
      mine.push_back(std::move(*it));
      it = fresh_.erase(it);
    } else {
      ++it;
    }
  }
  return Status::Ok();
}

Status ListenHub::PollConn(uint64_t conn_id, std::unique_ptr<Link>* out) {
  std::lock_guard<std::mutex> lk(mu_);
  RR_CHECK(Pump());
  auto it = parked_.find(conn_id);
  if (it == parked_.end() || it->second.empty()) return Status::Ok();
  *out = std::move(it->second.front());
  it->second.pop_front();
  return Status::Ok();
}

void ListenHub::Release(uint64_t conn_id) {
  std::lock_guard<std::mutex> lk(mu_);
  parked_.erase(conn_id);
  retired_.insert(conn_id);
}

void ListenHub::StopAccepting() {
  std::lock_guard<std::mutex> lk(mu_);
  accepting_ = false;
  fresh_.clear();
}

}  // namespace rr::net
