// rerail-netbench — drive a net plugin the way NCCL's proxy does (reference §3).
//
// Endpoint: one loaded plugin with one init()ed context and a device, plus the connection-setup calls
// as the proxy service thread makes them: listen writes a 128-byte handle; connect and accept are
// polled (same arguments) until they return a comm; closeListen is called right after accept.
// SendQueue / RecvQueue: the progress thread's view of one comm: at most `window` (NCCL_STEPS = 8)
// requests outstanding, a NULL request from isend/irecv means "retry later", and only the OLDEST
// request is tested (FIFO), exactly as NCCL's send/recv progress loops do.
//
// Contract
//   * Every polling helper is bounded by a timeout and returns Code::kInternalError "timed out ..." when
//     it expires, so a plugin that hangs makes a test fail instead of blocking it.
//   * A non-success plugin result is returned as a Status whose code() equals the plugin's result code
//     (rr::Code values == ncclResult_t), with the call named in the message.
//   * LogCapture: the logger handed to init(). It formats each line, keeps it for tests to assert on,
//     and echoes it to stderr only when echo is on. Thread-safe (a mutex; logging is off the data path).
//   * Endpoint and the queues are not thread-safe; the plugin's own thread-safety applies across them
//     (the conformance suite uses one Endpoint from a setup thread and a progress thread at once, as
//     NCCL does).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "net_loader.h"
#include "rerail/status.h"

namespace rr::netbench {

using Handle = std::array<char, RR_NCCL_NET_HANDLE_MAXSIZE>;

struct LogLine {
  int level;         // NCCL level: 2 WARN, 3 INFO, 5 TRACE
  std::string text;  // formatted message as the plugin wrote it (with its prefix)
};

class LogCapture {
 public:
  static rrNcclDebugLogger_t Logger();
  static std::vector<LogLine> Take();      // returns and forgets every line captured so far
  static std::vector<LogLine> Snapshot();  // returns without forgetting
  static void SetEcho(bool on);            // also print each line to stderr
  // True if some captured WARN line contains every one of `words`.
  static bool HasWarn(const std::vector<std::string>& words);
};

// Status from a plugin result: Ok for success, else code == r and message "<what>: <resultName>".
Status FromNccl(rrNcclResult_t r, const std::string& what);

class Endpoint {
 public:
  // Loads the plugin (NCCL's name rule applies), calls init with LogCapture's logger, devices(), and
  // checks dev < ndev. On init failure the Status carries init's result code.
  static Status Open(const std::string& plugin, int dev, std::unique_ptr<Endpoint>* out);
  ~Endpoint();  // finalize() if not yet done; the library is dlclosed after

  netdrv::NetPlugin& net() { return *net_; }
  void* ctx() const { return ctx_; }
  int dev() const { return dev_; }
  int ndev() const { return ndev_; }
  Status Finalize();

  Status Listen(Handle* handle, void** listen_comm);
  // Polls connect until a comm comes back, an error, or the timeout.
  Status Connect(const Handle& handle, void** send_comm, uint64_t timeout_ms);
  // Polls accept until a comm comes back, then closeListen (also on error).
  Status Accept(void* listen_comm, void** recv_comm, uint64_t timeout_ms);
  // n connections at once: every connect (or accept) is re-polled round-robin, as the service thread
  // interleaves pending setups; all listens are closed after their accept.
  Status ConnectAll(const std::vector<Handle>& handles, std::vector<void*>* send_comms, uint64_t timeout_ms);
  Status AcceptAll(const std::vector<void*>& listen_comms, std::vector<void*>* recv_comms,
                   uint64_t timeout_ms);
  // Connects a send comm to a receive comm of this same endpoint: the connect and the accept are polled
  // in turn, as NCCL's service thread interleaves the two sides of a self-connection; the listen comm
  // is closed after.
  Status SelfConnect(void** send_comm, void** recv_comm, uint64_t timeout_ms);

 private:
  Endpoint() = default;
  std::unique_ptr<netdrv::NetPlugin> net_;
  void* ctx_ = nullptr;
  int dev_ = 0;
  int ndev_ = 0;
  bool finalized_ = true;
};

// One comm's outstanding requests in posting order.
class ReqQueue {
 public:
  ReqQueue(netdrv::NetPlugin* net, void* comm, bool is_send, int window)
      : net_(net), comm_(comm), send_(is_send), window_(window) {}

  struct Done {
    uint64_t msg;  // caller's message index given to Post
    int size;      // bytes the plugin reported (recv with sizes; -1 when sizes was NULL or for sends)
  };

  // isend(data, size, tag) or irecv(1, data, cap=size, tag). *posted is false when the window is full or
  // the plugin returned a NULL request (retry later). `preset` is stored in *request before irecv
  // (NCCL stores 0x1 as the optional-completion hint or leaves a stale value).
  Status Post(void* data, size_t size, int tag, void* mhandle, uint64_t msg, bool* posted,
              void* preset = nullptr);
  // test() on the oldest request; *done true when it completed (then popped, described in *out).
  Status TestOldest(bool* done, Done* out, bool null_sizes = false);

  size_t outstanding() const { return q_.size(); }
  bool full() const { return static_cast<int>(q_.size()) >= window_; }
  void* comm() const { return comm_; }

 private:
  struct Pending {
    void* req;
    uint64_t msg;
  };
  netdrv::NetPlugin* net_;
  void* comm_;
  bool send_;
  int window_;
  std::deque<Pending> q_;
};

}  // namespace rr::netbench
