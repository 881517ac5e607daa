// rerail — rtnetlink link monitor on libnl-route-3 (contract in link_monitor.h).
#include "rerail/rails/link_monitor.h"

#include <fcntl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/cache.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/socket.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "rerail/clock.h"
#include "rerail/log.h"

namespace rr::rails {

struct LinkMonitor::Impl {
  Options opts;
  Callback cb;
  int stop_fd = -1;
  int ev_fd = -1;
  nl_sock* sk = nullptr;
  std::thread th;
  mutable std::mutex mu;
  std::deque<LinkEvent> queue;
  std::map<int, LinkEvent> links;  // by ifindex: last known state of every watched interface
  std::atomic<uint64_t> resyncs{0};
  std::vector<LinkEvent> pending;  // monitor thread only: events found while parsing one batch
  bool emit = false;               // monitor thread only: false while taking the first snapshot

  ~Impl();
  bool Watched(const std::string& name) const {
    return opts.ifnames.empty() || std::find(opts.ifnames.begin(), opts.ifnames.end(), name) != opts.ifnames.end();
  }
  Status Setup();
  Status Snapshot();
  void Update(rtnl_link* link, bool removed);
  void Publish();
  void Run(std::promise<Status>* ready);
  void RunGuarded(std::promise<Status>* ready, bool* announced);
  void ReadSocket();
};

namespace {

LinkEvent FromLink(rtnl_link* link, bool removed) {
  LinkEvent e;
  e.ifindex = rtnl_link_get_ifindex(link);
  const char* name = rtnl_link_get_name(link);
  e.ifname = name ? name : "";
  unsigned flags = rtnl_link_get_flags(link);
  e.admin_up = (flags & IFF_UP) != 0;
  e.carrier = (flags & IFF_RUNNING) != 0;
  e.up = e.admin_up && e.carrier && !removed;
  e.operstate = rtnl_link_get_operstate(link);
  e.removed = removed;
  e.t_ns = NowNs();
  return e;
}

int OnNetlinkMsg(nl_msg* msg, void* arg) {
  auto* impl = static_cast<LinkMonitor::Impl*>(arg);
  int type = nlmsg_hdr(msg)->nlmsg_type;
  if (type != RTM_NEWLINK && type != RTM_DELLINK) return NL_OK;
  struct Ctx {
    LinkMonitor::Impl* impl;
    bool removed;
  } ctx{impl, type == RTM_DELLINK};
  nl_msg_parse(
      msg,
      [](nl_object* obj, void* a) {
        auto* c = static_cast<Ctx*>(a);
        c->impl->Update(reinterpret_cast<rtnl_link*>(obj), c->removed);
      },
      &ctx);
  return NL_OK;
}

}  // namespace

LinkMonitor::Impl::~Impl() {
  if (sk != nullptr) nl_socket_free(sk);
  if (stop_fd >= 0) close(stop_fd);
  if (ev_fd >= 0) close(ev_fd);
}

// Records the new state of one interface and queues an event when it matters to a rail.
void LinkMonitor::Impl::Update(rtnl_link* link, bool removed) {
  LinkEvent e = FromLink(link, removed);
  if (!Watched(e.ifname)) return;
  std::lock_guard<std::mutex> lock(mu);
  auto it = links.find(e.ifindex);
  bool changed = it == links.end() ? !removed
                                   : removed || it->second.up != e.up || it->second.admin_up != e.admin_up ||
                                         it->second.carrier != e.carrier || it->second.ifname != e.ifname;
  if (removed) {
    if (it != links.end()) links.erase(it);
  } else {
    links[e.ifindex] = e;
  }
  if (changed && emit) pending.push_back(e);
}

// Moves the events of one batch to the queue, signals event_fd, then runs the callback.
void LinkMonitor::Impl::Publish() {
  if (pending.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& e : pending) {
      if (queue.size() >= kMaxQueued) {
        RR_WARN("link monitor: event queue full (%zu); dropping the oldest (%s)", kMaxQueued,
                queue.front().ifname.c_str());
        queue.pop_front();
      }
      queue.push_back(e);
    }
    uint64_t one = 1;
    if (write(ev_fd, &one, sizeof(one)) < 0) { /* counter saturated: still readable */ }
  }
  for (const auto& e : pending) {
    RR_INFO(log::kFlagNet, "link %s (ifindex %d) %s: admin %s, carrier %s, operstate %u", e.ifname.c_str(), e.ifindex,
            e.removed ? "removed" : (e.up ? "up" : "down"), e.admin_up ? "up" : "down", e.carrier ? "yes" : "no",
            e.operstate);
    if (cb) cb(e);
  }
  pending.clear();
}

// Re-reads the whole link table (start-up, and after a lost multicast message).
Status LinkMonitor::Impl::Snapshot() {
  nl_sock* dump = nl_socket_alloc();
  if (dump == nullptr) return Status(Code::kSystemError, "link monitor: nl_socket_alloc failed");
  nl_cache* cache = nullptr;
  int err = nl_connect(dump, NETLINK_ROUTE);
  if (err == 0) err = rtnl_link_alloc_cache(dump, AF_UNSPEC, &cache);
  if (err < 0) {
    nl_socket_free(dump);
    return Status(Code::kSystemError, std::string("link monitor: reading the link table: ") + nl_geterror(err));
  }
  std::set<int> seen;
  for (nl_object* o = nl_cache_get_first(cache); o != nullptr; o = nl_cache_get_next(o)) {
    auto* link = reinterpret_cast<rtnl_link*>(o);
    seen.insert(rtnl_link_get_ifindex(link));
    Update(link, false);
  }
  std::vector<LinkEvent> gone;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = links.begin(); it != links.end();) {
      if (seen.count(it->first)) {
        ++it;
        continue;
      }
      LinkEvent e = it->second;
      e.removed = true;
      e.up = false;
      e.t_ns = NowNs();
      if (emit) pending.push_back(e);
      it = links.erase(it);
    }
  }
  nl_cache_free(cache);
  nl_socket_free(dump);
  return Status::Ok();
}

Status LinkMonitor::Impl::Setup() {
  if (!opts.netns_path.empty()) {
    int fd = open(opts.netns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::System("link monitor: open(" + opts.netns_path + ")");
    int rc = setns(fd, CLONE_NEWNET);
    int saved = errno;
    close(fd);
    if (rc != 0) return Status::System("link monitor: setns(" + opts.netns_path + ")", saved);
  }
  sk = nl_socket_alloc();
  if (sk == nullptr) return Status(Code::kSystemError, "link monitor: nl_socket_alloc failed");
  nl_socket_disable_seq_check(sk);  // multicast notifications carry no sequence numbers of ours
  nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, OnNetlinkMsg, this);
  int err = nl_connect(sk, NETLINK_ROUTE);
  if (err == 0) err = nl_socket_add_membership(sk, RTNLGRP_LINK);
  if (err == 0) err = nl_socket_set_nonblocking(sk);
  if (err == 0) err = nl_socket_set_buffer_size(sk, opts.rcvbuf_bytes, 0);
  if (err < 0) return Status(Code::kSystemError, std::string("link monitor: rtnetlink socket: ") + nl_geterror(err));
  // Subscribed first, then dumped: a change racing the dump is seen at least once.
  return Snapshot();
}

void LinkMonitor::Impl::ReadSocket() {
  for (;;) {
    int err = nl_recvmsgs_default(sk);
    if (err == -NLE_AGAIN) break;
    if (err < 0) {
      // ENOBUFS (reported as NLE_NOMEM) means the kernel dropped notifications: re-read everything.
      RR_INFO(log::kFlagNet, "link monitor: %s; re-reading the link table", nl_geterror(err));
      resyncs.fetch_add(1, std::memory_order_relaxed);
      Status s = Snapshot();
      if (!s.ok()) RR_WARN("link monitor: %s", s.message().c_str());
      break;
    }
  }
  Publish();
}

void LinkMonitor::Impl::Run(std::promise<Status>* ready) {
  // Nothing may escape this thread (std::terminate would kill the rank): a failure before `ready` is set
  // becomes Start()'s error, one after it stops link events with a WARN.
  bool announced = false;
  try {
    RunGuarded(ready, &announced);
  } catch (const std::exception& e) {
    if (!announced) ready->set_value(Status::Internal(std::string("link monitor: ") + e.what()));
    else RR_WARN("link monitor: %s; link events stop", e.what());
  } catch (...) {
    if (!announced) ready->set_value(Status::Internal("link monitor: unknown exception"));
    else RR_WARN("link monitor: unknown exception; link events stop");
  }
}

void LinkMonitor::Impl::RunGuarded(std::promise<Status>* ready, bool* announced) {
  Status s = Setup();
  emit = true;
  *announced = true;
  ready->set_value(s);  // `ready` dies with Start()'s frame; not touched again
  if (!s.ok()) return;
  pollfd fds[2] = {{nl_socket_get_fd(sk), POLLIN, 0}, {stop_fd, POLLIN, 0}};
  for (;;) {
    int n = poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      RR_WARN("link monitor: poll failed: %s; link events stop", strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents != 0) ReadSocket();
  }
}

Status LinkMonitor::Start(Options opts, Callback cb, std::unique_ptr<LinkMonitor>* out) {
  auto impl = std::make_unique<Impl>();
  impl->opts = std::move(opts);
  impl->cb = std::move(cb);
  impl->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  impl->ev_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->stop_fd < 0 || impl->ev_fd < 0) return Status::System("link monitor: eventfd");
  std::promise<Status> ready;
  std::future<Status> started = ready.get_future();
  try {
    impl->th = std::thread(&Impl::Run, impl.get(), &ready);
  } catch (const std::system_error& e) {
    return Status(Code::kSystemError, std::string("link monitor: thread: ") + e.what());
  }
  Status s = started.get();
  if (!s.ok()) {
    impl->th.join();
    return s;
  }
  out->reset(new LinkMonitor(std::move(impl)));
  return Status::Ok();
}

LinkMonitor::LinkMonitor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

LinkMonitor::~LinkMonitor() { Stop(); }

void LinkMonitor::Stop() {
  if (!impl_ || !impl_->th.joinable()) return;
  uint64_t one = 1;
  if (write(impl_->stop_fd, &one, sizeof(one)) < 0) RR_WARN("link monitor: stop signal: %s", strerror(errno));
  impl_->th.join();
}

int LinkMonitor::event_fd() const { return impl_->ev_fd; }

std::vector<LinkEvent> LinkMonitor::Drain() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<LinkEvent> out(impl_->queue.begin(), impl_->queue.end());
  impl_->queue.clear();
  uint64_t v;
  if (read(impl_->ev_fd, &v, sizeof(v)) < 0) { /* EAGAIN: nothing was signalled */ }
  return out;
}

bool LinkMonitor::Lookup(const std::string& ifname, LinkEvent* current) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (const auto& [idx, e] : impl_->links) {
    if (e.ifname == ifname) {
      *current = e;
      return true;
    }
  }
  return false;
}

uint64_t LinkMonitor::resyncs() const { return impl_->resyncs.load(std::memory_order_relaxed); }

}  // namespace rr::rails
