// rerail — the IB async-event thread: IBV_EVENT_PORT_ERR / PORT_ACTIVE / DEVICE_FATAL and QP errors of
// the opened rails, turned into IbEvents for rail health (the IB counterpart of the rtnetlink monitor).
//
// Contract
//   * Start() takes the rails' IbDevices (not owned: they must outlive the monitor) and runs ONE thread
//     that poll()s every device's async_fd (set non-blocking) plus a wake-up eventfd. For each event it
//     calls `cb` on that thread, then acknowledges it (ibv_ack_async_event) — so a QP or CQ named by
//     an event can be destroyed only after the callback returned (verbs requires the ack first).
//   * Event kinds: kPortDown (PORT_ERR), kPortUp (PORT_ACTIVE), kDeviceFatal (DEVICE_FATAL: the device
//     is dead until re-opened; its fd is dropped from the poll set), kQpError (QP_FATAL, QP_REQ_ERR,
//     QP_ACCESS_ERR, PATH_MIG_ERR, CQ_ERR: qpn names the QP when there is one), kOther (LID/GID change,
//     COMM_EST ...: passed on for logging).
//   * The callback must not block for long and must not call back into the monitor; it is typically a
//     few atomic stores into the rail-health signals plus one log line.
//   * The destructor wakes the thread and joins it (bounded: poll returns on the eventfd).
//   * Errors: Start() fails with System when the eventfd or the thread cannot be created, or a device's
//     async_fd cannot be made non-blocking.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transports/ib/ib_device.h"

namespace rr::ib {

struct IbEvent {
  enum class Kind { kPortDown, kPortUp, kDeviceFatal, kQpError, kOther };
  Kind kind = Kind::kOther;
  int rail = 0;          // index of the device in the vector given to Start()
  std::string dev;       // "mlx5_0"
  int port = 0;          // port events: the port number; else the rail's port
  uint32_t qpn = 0;      // kQpError of a QP: its number; else 0
  int type = 0;          // vx::EventType as received
  std::string name;      // ibv_event_type_str(type), e.g. "port error"
  uint64_t at_ns = 0;    // rr::NowNs() when it was read
};
const char* KindName(IbEvent::Kind k);  // "port-down", "port-up", "device-fatal", "qp-error", "other"

class IbEventMonitor {
 public:
  using Callback = std::function<void(const IbEvent&)>;
  static Status Start(std::vector<IbDevice*> devs, Callback cb, std::unique_ptr<IbEventMonitor>* out);
  ~IbEventMonitor();
  IbEventMonitor(const IbEventMonitor&) = delete;
  IbEventMonitor& operator=(const IbEventMonitor&) = delete;

 private:
  IbEventMonitor(std::vector<IbDevice*> devs, Callback cb) : devs_(std::move(devs)), cb_(std::move(cb)) {}
  void Run();
  // Reads every pending event of rail i; false once the device must no longer be polled.
  bool Drain(int i);

  std::vector<IbDevice*> devs_;
  Callback cb_;
  int wake_fd_ = -1;
  std::thread thread_;
};

}  // namespace rr::ib
