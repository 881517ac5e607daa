// perf_refnet — a minimal, single-rail TCP net plugin (ncclNetPlugin_v11) used only to test
// rerail-perf against "any plugin" independently of rerail's own plugin.
//
// Contract (deliberately simple, NCCL semantics from reference §2.3):
//   * devices() = 2 ("refnet0", "refnet1"), both on 127.0.0.1, so channels alternate devices.
//   * One TCP socket per connection; messages are framed [uint64 size][bytes] and matched strictly
//     in posting order. A send larger than the posted receive is a protocol error (ncclInternalError).
//   * isend/irecv never block; they return a NULL request when 32 requests are outstanding on the
//     comm, which exercises the caller's retry path. test() drives the socket of its request's comm.
//   * Not thread-safe per comm (the caller drives each comm from one thread, as NCCL's proxy does).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>

#include "../../net_plugin/abi/nccl_net_abi.h"

namespace {

constexpr int kMaxReqs = 32;
constexpr uint32_t kMagic = 0x72666e74;  // "rfnt"

struct Handle {
  uint32_t magic;
  uint16_t port;
};

struct Req;
struct Comm {
  int fd = -1;
  bool is_send = false;
  std::deque<Req*> queue;  // posted, not yet complete, in order
};

struct Req {
  Comm* comm;
  char* data;
  size_t size;       // send: bytes; recv: capacity, then bytes received
  uint64_t hdr;      // frame header being sent/received
  size_t hdr_done = 0;
  size_t done = 0;
  bool complete = false;
};

struct Listen {
  int fd = -1;
};

rrNcclDebugLogger_t g_log = nullptr;

#define REF_WARN(fmt, ...) \
  do { if (g_log) g_log(2, ~0ul, __FILE__, __LINE__, "NET/refnet : " fmt, ##__VA_ARGS__); } while (0)

void SetNonBlocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Moves bytes for the oldest request of the comm; returns false on a socket error.
bool Progress(Comm* c) {
  while (!c->queue.empty()) {
    Req* r = c->queue.front();
    while (r->hdr_done < sizeof(r->hdr)) {
      char* h = reinterpret_cast<char*>(&r->hdr) + r->hdr_done;
      ssize_t n = c->is_send ? send(c->fd, h, sizeof(r->hdr) - r->hdr_done, MSG_NOSIGNAL)
                             : recv(c->fd, h, sizeof(r->hdr) - r->hdr_done, 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n <= 0) return false;
      r->hdr_done += static_cast<size_t>(n);
    }
    if (!c->is_send && r->done == 0 && r->hdr > r->size) {
      REF_WARN("message of %lu bytes larger than posted receive of %zu", (unsigned long)r->hdr, r->size);
      return false;
    }
    size_t total = c->is_send ? r->size : static_cast<size_t>(r->hdr);
    while (r->done < total) {
      ssize_t n = c->is_send ? send(c->fd, r->data + r->done, total - r->done, MSG_NOSIGNAL)
                             : recv(c->fd, r->data + r->done, total - r->done, 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n <= 0) return false;
      r->done += static_cast<size_t>(n);
    }
    r->size = total;
    r->complete = true;
    c->queue.pop_front();
  }
  return true;
}

rrNcclResult_t Init(void** ctx, uint64_t, rrNcclNetCommConfig_t*, rrNcclDebugLogger_t log, rrNcclProfilerCallback_t) {
  g_log = log;
  *ctx = nullptr;
  return rrNcclSuccess;
}
rrNcclResult_t Devices(int* n) { *n = 2; return rrNcclSuccess; }

rrNcclResult_t GetProperties(int dev, rrNcclNetProperties_v11_t* p) {
  if (dev < 0 || dev > 1) return rrNcclInvalidArgument;
  std::memset(p, 0, sizeof(*p));
  static char names[2][8] = {"refnet0", "refnet1"};
  p->name = names[dev];
  p->pciPath = nullptr;
  p->guid = static_cast<uint64_t>(dev);
  p->ptrSupport = RR_NCCL_PTR_HOST;
  p->speed = 10000;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = RR_NCCL_MAX_NET_SIZE_BYTES;
  p->maxCollBytes = RR_NCCL_MAX_NET_SIZE_BYTES;
  p->maxMultiRequestSize = 1;
  return rrNcclSuccess;
}

rrNcclResult_t DoListen(void*, int, void* handle, void** listen_comm) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd, 16) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    REF_WARN("listen failed: %s", strerror(errno));
    if (fd >= 0) close(fd);
    return rrNcclSystemError;
  }
  SetNonBlocking(fd);
  Handle h{kMagic, ntohs(a.sin_port)};
  std::memset(handle, 0, RR_NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof(h));
  *listen_comm = new Listen{fd};
  return rrNcclSuccess;
}

rrNcclResult_t DoConnect(void*, int, void* handle, void** send_comm, rrNcclNetDeviceHandle_t**) {
  Handle h;
  std::memcpy(&h, handle, sizeof(h));
  if (h.magic != kMagic) return rrNcclInvalidArgument;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(h.port);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    REF_WARN("connect to port %u failed: %s", h.port, strerror(errno));
    if (fd >= 0) close(fd);
    return rrNcclSystemError;
  }
  SetNonBlocking(fd);
  Comm* c = new Comm;
  c->fd = fd;
  c->is_send = true;
  *send_comm = c;
  return rrNcclSuccess;
}

rrNcclResult_t DoAccept(void* listen_comm, void** recv_comm, rrNcclNetDeviceHandle_t**) {
  *recv_comm = nullptr;
  int fd = accept(static_cast<Listen*>(listen_comm)->fd, nullptr, nullptr);
  if (fd < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? rrNcclSuccess : rrNcclSystemError;
  SetNonBlocking(fd);
  Comm* c = new Comm;
  c->fd = fd;
  *recv_comm = c;
  return rrNcclSuccess;
}

rrNcclResult_t RegMr(void*, void*, size_t, int type, void** mh) {
  if (type != RR_NCCL_PTR_HOST) return rrNcclInternalError;
  *mh = reinterpret_cast<void*>(0x1);
  return rrNcclSuccess;
}
rrNcclResult_t DeregMr(void*, void*) { return rrNcclSuccess; }

rrNcclResult_t Post(Comm* c, void* data, size_t size, void** request) {
  *request = nullptr;
  if (c->queue.size() >= kMaxReqs) return rrNcclSuccess;  // caller retries
  Req* r = new Req{c, static_cast<char*>(data), size, size};
  c->queue.push_back(r);
  *request = r;
  return Progress(c) ? rrNcclSuccess : rrNcclRemoteError;
}

rrNcclResult_t Isend(void* comm, void* data, size_t size, int, void*, void*, void** request) {
  return Post(static_cast<Comm*>(comm), data, size, request);
}

rrNcclResult_t Irecv(void* comm, int n, void** data, size_t* sizes, int*, void**, void**, void** request) {
  if (n != 1) return rrNcclInternalError;
  return Post(static_cast<Comm*>(comm), data[0], sizes[0], request);
}

rrNcclResult_t Iflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;
  return rrNcclSuccess;
}

rrNcclResult_t Test(void* request, int* done, int* sizes) {
  Req* r = static_cast<Req*>(request);
  *done = 0;
  if (!r->complete && !Progress(r->comm)) {
    REF_WARN("connection failed: %s", strerror(errno));
    return rrNcclRemoteError;
  }
  if (!r->complete) return rrNcclSuccess;
  *done = 1;
  if (sizes) sizes[0] = static_cast<int>(r->size);
  delete r;
  return rrNcclSuccess;
}

rrNcclResult_t CloseComm(void* comm) {
  Comm* c = static_cast<Comm*>(comm);
  for (Req* r : c->queue) delete r;
  close(c->fd);
  delete c;
  return rrNcclSuccess;
}
rrNcclResult_t CloseListen(void* l) {
  close(static_cast<Listen*>(l)->fd);
  delete static_cast<Listen*>(l);
  return rrNcclSuccess;
}
rrNcclResult_t Finalize(void*) { return rrNcclSuccess; }

}  // namespace

extern "C" __attribute__((visibility("default"))) const rrNcclNet_v11_t ncclNetPlugin_v11 = {
    "refnet", Init, Devices, GetProperties, DoListen, DoConnect, DoAccept, RegMr, nullptr, DeregMr,
    Isend, Irecv, Iflush, Test, CloseComm, CloseComm, CloseListen, nullptr, nullptr, nullptr, Finalize, nullptr};
