// rerail — the transport interface: what the resilient connection layer needs from a network
// technology. TCP implements it today (transports/tcp/); IB verbs will.
//
// Objects
//   Transport       device discovery and connection setup for one technology (one per plugin context).
//   Listener        the receiving side of one NCCL listen(): yields Links of incoming connections.
//   Connector       one outgoing link being set up (non-blocking, polled).
//   Link            one established connection to the peer over one rail, made of ≥1 byte streams.
//
// Contract
//   * Every call is non-blocking. Poll() returns Ok with no result while work is pending.
//   * Links are owned by exactly one connection and used by one thread at a time (NCCL's progress
//     thread after setup; setup itself happens on NCCL's proxy service thread). No internal locking.
//   * Stream I/O returns IoState; kClosed (orderly EOF) and kError (errno in *err) mean the stream is
//     dead; the caller decides whether that kills the connection or only the link.
//   * Destroying an object closes every descriptor it owns.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/core.h"
#include "handle.h"
#include "rerail/sock.h"
#include "rerail/status.h"

namespace rr::net {

struct DeviceInfo {
  std::string name;      // unique (interface name for TCP)
  std::string pci_path;  // sysfs realpath, empty when none
  uint64_t guid = 0;     // distinct per device
  int speed_mbps = 0;
  sock::Addr addr;       // local address of the rail, port 0
  bool loopback = false;
};

enum class IoState {
  kOk,      // *n bytes transferred (may be fewer than asked)
  kAgain,   // nothing transferable now
  kClosed,  // peer closed the stream
  kError,   // stream failed; *err holds errno
};

// What a connecting side announces about its link (carried in each stream's hello).
struct LinkIdentity {
  Nonce nonce{};        // the listener's nonce (proves the sender holds the handle)
  uint64_t conn_id = 0;
  uint32_t chunk_size = 0;
  int rail = 0;         // listener rail the link runs on
  int link = 0;         // index of the link within the connection
  int nstreams = 1;
  uint32_t epoch = 0;
  bool grouped = false;  // the sender matches tags against announced receives (kHelloFlagGrouped)
};

class Link {
 public:
  virtual ~Link() = default;
  virtual int streams() const = 0;
  virtual const LinkIdentity& identity() const = 0;
  virtual IoState Writev(int stream, const iovec* iov, int iovcnt, size_t* n, int* err) = 0;
  virtual IoState Read(int stream, void* buf, size_t len, size_t* n, int* err) = 0;
  // Scatter read: fills iov[0], then iov[1], ... with what the stream has now (*n bytes in all). Lets
  // a receiver take a chunk's payload straight into the posted buffer and the next frame header in the
  // same call.
  virtual IoState Readv(int stream, const iovec* iov, int iovcnt, size_t* n, int* err) = 0;
  // "rail eth1 10.0.1.2:40112->10.0.1.1:5000 (2 streams)"
  virtual std::string Describe() const = 0;
  // The transport's send-side counters of one stream (TCP: TCP_INFO and SIOCOUTQ): bytes the peer's
  // transport acknowledged so far, whether anything is in flight, bytes written but not yet sent,
  // bytes written but not yet acknowledged. The core judges liveness (the black-hole watchdog) and
  // bandwidth from them: the peer's kernel, never its application. False if unavailable.
  virtual bool Sample(int stream, StreamSample* out) = 0;
};

class Listener {
 public:
  virtual ~Listener() = default;
  // Returns the next fully established incoming link (all its streams validated) in *out, or leaves
  // it empty. Strangers (bad hello, wrong nonce) are closed with a WARN and never surface here.
  virtual Status Poll(std::unique_ptr<Link>* out) = 0;
};

class Connector {
 public:
  virtual ~Connector() = default;
  // Sets *out once every stream is connected and has sent its hello. Errors are final.
  virtual Status Poll(std::unique_ptr<Link>* out) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;  // "tcp"
  virtual int NumDevices() const = 0;
  virtual const DeviceInfo& Device(int dev) const = 0;
  // Listens on device `dev` (and, for multi-rail reachability, on the other devices too); fills `h`
  // with the addresses to put in the listen handle, primary first. `nonce` is what hellos must carry.
  virtual Status Listen(int dev, const Nonce& nonce, Handle* h, std::unique_ptr<Listener>* out) = 0;
  // Starts connecting one link from local device `dev` to `remote`.
  virtual Status Connect(int dev, const sock::Addr& remote, const LinkIdentity& id,
                         std::unique_ptr<Connector>* out) = 0;
};

}  // namespace rr::net
