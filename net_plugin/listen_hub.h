// rerail — one listen handle, several connections: the links arriving at a listener, sorted by the
// connection (conn_id) they belong to (issue 15, peer compatibility).
//
// NCCL's socket transport lets accept() be called again on a listen comm that already accepted: each
// call accepts the next connection made with the same handle. rerail's RecvComm keeps listening after
// its accept (failed rails re-connect to the same sockets), so one listener serves the ListenComm and
// every RecvComm accepted from it; the hub routes each arriving link:
//   * a link of a connection no RecvComm has claimed waits for the next accept (PollNew), which claims
//     that connection;
//   * a link of a claimed connection waits for that RecvComm (PollConn, through HubListener);
//   * a link of a connection whose RecvComm is closed is closed at once (Release retires the conn_id),
//     so a late re-connection never becomes a new accepted comm; after the ListenComm is closed
//     (StopAccepting), links of connections no RecvComm claimed are closed at once too.
// Contract
//   * Ownership: the hub owns the transport listener; the ListenComm and every HubListener hold it
//     (shared_ptr): the listen sockets close when the last of them is gone.
//   * Thread-safety: every call takes the hub's mutex (accept runs on NCCL's proxy service thread, a
//     RecvComm's progress on its proxy thread). Never blocks beyond that mutex.
//   * Errors: the transport listener's Poll errors are returned to whichever caller polled.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "transport.h"

namespace rr::net {

class ListenHub {
 public:
  explicit ListenHub(std::unique_ptr<Listener> l) : listener_(std::move(l)) {}
  // The first link of a connection not accepted yet; claims that connection. Empty when none arrived.
  Status PollNew(std::unique_ptr<Link>* out);
  // The next link of claimed connection `conn_id`. Empty when none arrived.
  Status PollConn(uint64_t conn_id, std::unique_ptr<Link>* out);
  // The RecvComm of `conn_id` is gone: its parked links are closed, later ones too.
  void Release(uint64_t conn_id);
  // The ListenComm is closed: no accept will come, so links of unclaimed connections (waiting or later)
  // are closed instead of held for the accepted comms' lifetime.
  void StopAccepting();

 private:
  Status Pump();  // moves every link the transport has ready into fresh_ / parked_ (mu_ held)

  std::mutex mu_;
  std::unique_ptr<Listener> listener_;
  std::deque<std::unique_ptr<Link>> fresh_;                         // unclaimed connections
  std::map<uint64_t, std::deque<std::unique_ptr<Link>>> parked_;  // claimed ones, by conn_id
  std::set<uint64_t> retired_;                                      // closed RecvComms
  bool accepting_ = true;
};

// The Listener a RecvComm polls: the links of its own connection only.
class HubListener final : public Listener {
 public:
  HubListener(std::shared_ptr<ListenHub> hub, uint64_t conn_id) : hub_(std::move(hub)), conn_id_(conn_id) {}
  ~HubListener() override { hub_->Release(conn_id_); }
  Status Poll(std::unique_ptr<Link>* out) override { return hub_->PollConn(conn_id_, out); }

 private:
  std::shared_ptr<ListenHub> hub_;
  uint64_t conn_id_;
};

}  // namespace rr::net
