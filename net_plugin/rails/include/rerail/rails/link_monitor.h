// rerail — link monitor: rtnetlink link up/down events for the rail interfaces (libnl-route-3).
//
// What it reports
//   A LinkEvent whenever a watched interface changes in a way that matters to a rail: it goes down
//   (admin down, or carrier lost: IFF_RUNNING / operstate drop), comes back up, appears, or is
//   removed. Statistics-only RTM_NEWLINK updates are filtered out. The kernel sends RTM_NEWLINK /
//   RTM_DELLINK to the RTNLGRP_LINK multicast group at the moment of the change, so delivery takes
//   milliseconds (one poll() wake-up), unlike polling sysfs.
//
// Contract
//   * Start() spawns one monitor thread and returns only after it has subscribed to link events and
//     read the current state of every interface (so no change after Start() returns is missed, and
//     Lookup() answers at once). Errors: kSystemError (netlink socket, setns into Options::netns_path,
//     thread creation), with the reason in the message.
//   * Options::netns_path (e.g. /run/netns/<name>): the monitor thread — only that thread — enters
//     this network namespace first, so a process can watch a namespace it does not live in (tests,
//     tools). Empty: the caller's namespace.
//   * Options::ifnames: exact interface names to watch; empty watches every interface.
//   * Delivery, both ways at once: `cb` (if set) runs on the monitor thread for each event and must
//     not block or call back into this monitor's Stop()/destructor; and each event is queued
//     (bounded, oldest dropped with a WARN past kMaxQueued) and event_fd() — an eventfd — becomes
//     readable, so a progress loop can poll it and Drain() the queue from its own thread.
//   * If the netlink socket overflows (ENOBUFS under an event storm) the monitor re-reads the whole
//     link table and emits events for every difference, so a lost message cannot hide a change.
//   * Stop() (and the destructor) wakes the thread, joins it and closes the fds; idempotent. Lookup(),
//     Drain(), event_fd() are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rerail/rails/rail_health.h"
#include "rerail/status.h"

namespace rr::rails {

struct LinkEvent {
  int ifindex = 0;
  std::string ifname;
  bool up = false;         // admin up AND running (carrier, operstate up): the link can carry traffic
  bool admin_up = false;   // IFF_UP
  bool carrier = false;    // IFF_RUNNING (lower layer and carrier ok)
  uint8_t operstate = 0;   // IF_OPER_* (RFC 2863), 6 = up
  bool removed = false;    // RTM_DELLINK: the interface is gone
  uint64_t t_ns = 0;       // CLOCK_MONOTONIC when the monitor received it
};

// The rail-health event a link event stands for: link-removed, link-down or link-up.
inline RailEvent ToRailEvent(const LinkEvent& e) {
  return e.removed ? RailEvent::kLinkRemoved : (e.up ? RailEvent::kLinkUp : RailEvent::kLinkDown);
}

class LinkMonitor {
 public:
  static constexpr size_t kMaxQueued = 4096;

  struct Options {
    std::vector<std::string> ifnames;  // empty: every interface
    std::string netns_path;            // empty: this thread's network namespace
    int rcvbuf_bytes = 1 << 20;        // netlink socket receive buffer (tests shrink it to force overflow)
  };
  using Callback = std::function<void(const LinkEvent&)>;

  static Status Start(Options opts, Callback cb, std::unique_ptr<LinkMonitor>* out);
  ~LinkMonitor();
  LinkMonitor(const LinkMonitor&) = delete;
  LinkMonitor& operator=(const LinkMonitor&) = delete;

  void Stop();
  int event_fd() const;                 // readable while events are queued
  std::vector<LinkEvent> Drain();       // takes every queued event (oldest first), resets event_fd
  bool Lookup(const std::string& ifname, LinkEvent* current) const;  // latest known state
  uint64_t resyncs() const;             // times the link table was re-read after an overflow

  struct Impl;

 private:
  explicit LinkMonitor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rr::rails
