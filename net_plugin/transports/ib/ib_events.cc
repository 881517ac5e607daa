#include "transports/ib/ib_events.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "rerail/clock.h"
#include "rerail/log.h"

namespace rr::ib {
namespace {

int AsyncFd(const IbDevice* d) { return reinterpret_cast<const vx::ContextHead*>(d->context())->async_fd; }

IbEvent::Kind KindOf(int type) {
  switch (type) {
    case vx::kEventPortErr: return IbEvent::Kind::kPortDown;
    case vx::kEventPortActive: return IbEvent::Kind::kPortUp;
    case vx::kEventDeviceFatal: return IbEvent::Kind::kDeviceFatal;
    case vx::kEventQpFatal:
    case vx::kEventQpReqErr:
    case vx::kEventQpAccessErr:
    case vx::kEventPathMigErr:
    case vx::kEventCqErr: return IbEvent::Kind::kQpError;
    default: return IbEvent::Kind::kOther;
  }
}

bool IsQpEvent(int type) {
  return type == vx::kEventQpFatal || type == vx::kEventQpReqErr || type == vx::kEventQpAccessErr ||
         type == vx::kEventPathMigErr || type == vx::kEventCommEst;
}

}  // namespace

const char* KindName(IbEvent::Kind k) {
  switch (k) {
    case IbEvent::Kind::kPortDown: return "port-down";
    case IbEvent::Kind::kPortUp: return "port-up";
    case IbEvent::Kind::kDeviceFatal: return "device-fatal";
    case IbEvent::Kind::kQpError: return "qp-error";
    case IbEvent::Kind::kOther: return "other";
  }
  return "?";
}

Status IbEventMonitor::Start(std::vector<IbDevice*> devs, Callback cb, std::unique_ptr<IbEventMonitor>* out) {
  std::unique_ptr<IbEventMonitor> m(new IbEventMonitor(std::move(devs), std::move(cb)));
  for (IbDevice* d : m->devs_) {
    int fd = AsyncFd(d);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
      return Status::System("fcntl(async_fd of " + d->port().name + ", O_NONBLOCK)");
  }
  m->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (m->wake_fd_ < 0) return Status::System("eventfd");
  try {
    m->thread_ = std::thread([p = m.get()] { p->Run(); });
  } catch (const std::system_error& e) {
    return Status(Code::kSystemError, std::string("IB event thread: ") + e.what());
  }
  *out = std::move(m);
  return Status::Ok();
}

IbEventMonitor::~IbEventMonitor() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    ssize_t w = write(wake_fd_, &one, sizeof(one));
    (void)w;
    thread_.join();
  }
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool IbEventMonitor::Drain(int i) {
  IbDevice* d = devs_[i];
  const VerbsLib& lib = d->lib();
  for (;;) {
    vx::AsyncEvent ev{};
    if (lib.get_async_event(d->context(), &ev) != 0) return errno == EAGAIN || errno == EINTR;
    IbEvent e;
    e.kind = KindOf(ev.event_type);
    e.rail = i;
    e.dev = d->port().dev;
    e.type = ev.event_type;
    e.port = (e.kind == IbEvent::Kind::kPortDown || e.kind == IbEvent::Kind::kPortUp || ev.event_type == vx::kEventLidChange ||
              ev.event_type == vx::kEventGidChange)
                 ? ev.element.port_num
                 : d->port().port;
    if (IsQpEvent(ev.event_type) && ev.element.qp != nullptr) e.qpn = reinterpret_cast<vx::QpHead*>(ev.element.qp)->qp_num;
    const char* s = lib.event_type_str ? lib.event_type_str(ev.event_type) : nullptr;
    e.name = s ? s : "event " + std::to_string(ev.event_type);
    e.at_ns = NowNs();
    cb_(e);
    lib.ack_async_event(&ev);
    if (e.kind == IbEvent::Kind::kDeviceFatal) return false;
  }
}

void IbEventMonitor::Run() {
  std::vector<pollfd> fds(devs_.size() + 1);
  std::vector<bool> live(devs_.size(), true);
  for (;;) {
    fds[0] = {wake_fd_, POLLIN, 0};
    for (size_t i = 0; i < devs_.size(); ++i) fds[i + 1] = {live[i] ? AsyncFd(devs_[i]) : -1, POLLIN, 0};
    int n = poll(fds.data(), fds.size(), -1);
    if (n < 0 && errno != EINTR) {
      RR_WARN("IB event thread: poll: %s; IB port events are no longer watched", strerror(errno));
      return;
    }
    if (fds[0].revents) return;
    for (size_t i = 0; i < devs_.size(); ++i) {
      if (!live[i] || fds[i + 1].revents == 0) continue;
      if (!Drain(static_cast<int>(i)) || (fds[i + 1].revents & (POLLERR | POLLHUP | POLLNVAL))) {
        live[i] = false;
        RR_INFO(log::kFlagNet, "IB event thread: no longer watching %s", devs_[i]->port().name.c_str());
      }
    }
  }
}

}  // namespace rr::ib
