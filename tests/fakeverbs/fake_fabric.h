// fakeverbs — internal objects of the fake libibverbs: the fabric (every fake device of this process,
// and with FAKEVERBS_WIRE the link to the other processes of the same fabric, fake_host.cc) and the
// verbs objects it hands out. Each object starts with the leading fields of the real rdma-core
// struct as rerail declares them (net_plugin/transports/ib/verbs_api.h), so rerail reads them exactly as
// it reads a real provider's; the fake's own state follows.
//
// Contract: every member is guarded by Fabric::mu (one lock: the fake is a test double, not fast).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "transports/ib/verbs_api.h"

namespace fakeverbs {

namespace vx = rr::ib::vx;
using Clock = std::chrono::steady_clock;

// Attribute mask bits verbs_api.h does not name (enum ibv_qp_attr_mask).
enum : int {
  kQpCurState = 1 << 1,
  kQpEnSqdAsyncNotify = 1 << 2,
  kQpQkey = 1 << 6,
  kQpAltPath = 1 << 14,
  kQpPathMigState = 1 << 18,
  kQpCap = 1 << 19,
};

constexpr int kMaxQpWr = 4096;
constexpr int kMaxCqe = 65536;
constexpr int kMaxSge = 4;
constexpr uint32_t kMaxInline = 220;  // what mlx5 offers
constexpr int kGidTblLen = 2;         // 0: link-local fe80::guid, 1: RoCE v2 ::ffff:10.77.<host>.<dev+1>
constexpr int kMaxHosts = 256;        // host indices of one FAKEVERBS_WIRE fabric (one byte of the GID)
constexpr int kDevsPerHost = 64;      // LID = host * 64 + device + 1; GUID = base + host * 64 + device
constexpr uint64_t kGuidBase = 0x0002c90300fa0000ull;

struct Context;

struct Port {
  int state = vx::kPortActive;
  int fault = 0;  // fakeverbs_fault
  uint16_t lid = 0;
  vx::Gid gid[kGidTblLen]{};
};

struct Device {
  std::string name;
  int index = 0;
  uint64_t guid_be = 0;
  uint8_t link_layer = vx::kLinkLayerEthernet;
  bool fatal = false;
  Port port;  // one port (port number 1)
  // Traffic with other hosts (FAKEVERBS_WIRE), reported by FAKEVERBS_CONTROL's `stats`: requests this
  // device sent (bytes they carried) and requests it executed for another host (bytes that landed).
  uint64_t tx_requests = 0, tx_bytes = 0, rx_requests = 0, rx_bytes = 0;
  std::vector<Context*> contexts;
};

struct Event {
  int type;
  int port_num;
  void* element;  // the QP or CQ the event names, else null
};

// struct ibv_context
struct Context {
  vx::ContextHead head;
  Device* dev = nullptr;
  int event_wr = -1;  // write end of the async pipe (head.async_fd is the read end)
  std::deque<Event> events;
  int objects = 0;  // PDs and CQs still open on it
};

struct Pd {
  vx::Pd head;
  Context* ctx = nullptr;
  int objects = 0;  // MRs and QPs still on it
};

struct Mr {
  vx::Mr head;
  Pd* pd = nullptr;
  int access = 0;
  uint64_t iova = 0;  // the address peers and SGEs use; head.addr is where the bytes are
};

// One completion as queued; seq lets a polled send completion free its QP's send-queue slots.
struct Cqe {
  vx::Wc wc;
  bool send_side;
  uint64_t seq;
};

struct Cq {
  vx::CqHead head;
  Context* ctx = nullptr;
  std::deque<Cqe> q;
  bool overrun = false;  // a completion came while full: the CQ is in error, poll returns -1
  int users = 0;         // QPs using it
};

// A posted send WR as the QP keeps it until wire time. Inline data is copied at post time.
struct SendOp {
  vx::SendWr wr;
  std::vector<vx::Sge> sge;
  std::vector<uint8_t> inline_data;
  bool is_inline = false;
  bool signaled = false;
  uint64_t seq = 0;
  Clock::time_point first_try{};  // when the path first failed it (dead path / RNR timers)
  bool trying = false;
  bool delivered = false;  // the bytes landed; only the ack is outstanding (ack-loss fault)
  // Towards another process (fake_host.cc): the PSN it was last sent with, when it was last sent, and
  // since when the responder answers RNR (the RNR retry clock).
  uint32_t psn = 0;
  Clock::time_point sent_at{};
  Clock::time_point rnr_since{};
  bool rnr = false;
};

struct RecvOp {
  uint64_t wr_id;
  std::vector<vx::Sge> sge;
};

// struct ibv_qp
struct Qp {
  vx::QpHead head;
  Pd* pd = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  vx::QpCap cap{};
  bool sig_all = false;
  // Attributes set by modify_qp.
  int port = 0;
  unsigned access = 0;
  int path_mtu = 0;
  uint32_t dest_qpn = 0;
  // The AV resolved at RTR: host and device index of the responder (-1: no such address); dest_dev is
  // that device when the host is this process, else null.
  int dest_host = -1, dest_index = -1;
  Device* dest_dev = nullptr;
  uint32_t rq_psn = 0, sq_psn = 0;
  uint8_t timeout = 0, retry_cnt = 0, rnr_retry = 0, min_rnr_timer = 0;
  // Queues.
  std::deque<SendOp> sq;
  std::deque<RecvOp> rq;
  uint64_t sq_posted = 0;  // WRs posted since the last RESET
  uint64_t sq_freed = 0;   // slots given back by polled completions
  // Towards another process: the first `emitted` WRs of sq are on the wire awaiting their ack; gen
  // counts RESETs so a late answer to a WR of an earlier life is ignored; no send before rnr_until.
  size_t emitted = 0;
  uint32_t gen = 0;
  Clock::time_point rnr_until{};
};

class HostLink;  // fake_host.cc
class Control;   // fake_control.cc

struct Fabric {
  std::mutex mu;
  std::mutex link_mu;  // taken before mu: starts / stops the HostLink's thread with the first / last context
  int host = 0;                  // this process's host index (FAKEVERBS_WIRE; 0 without)
  HostLink* link = nullptr;      // null without FAKEVERBS_WIRE: one process = one fabric
  int open_contexts = 0;
  std::vector<Device*> devices;
  std::map<uint32_t, Qp*> qps;  // by qp_num
  std::map<uint32_t, Mr*> lkeys;  // local keys (SGEs) and remote keys (RDMA) are distinct numbers:
  std::map<uint32_t, Mr*> rkeys;  // an lkey used as an rkey is a bad key, as on hardware
  uint32_t next_qpn = 0x11;
  uint32_t next_key = 0x100;
  int burst = 4;
  size_t rotate = 0;

  static Fabric& Get();  // built from the environment at first use
  Device* FindDevice(const char* name);
  // The host and device index an AV names (false: no fake device has that address); dest_dev-style
  // lookups use DeviceByAddress, which answers only for devices of this process.
  bool ResolveAddress(uint8_t link_layer, const vx::AhAttr& ah, int* out_host, int* out_index) const;
  Device* DeviceByAddress(uint8_t link_layer, const vx::AhAttr& ah);
  void PostEvent(Device* d, int type, void* element);
  // The port of d goes down / up with PORT_ERR / PORT_ACTIVE on every context (nothing when it is
  // already in that state); false: no change. The control API, FAKEVERBS_FAULT_AT and
  // FAKEVERBS_CONTROL all use it.
  bool SetPortState(Device* d, bool up);
  void Progress();  // one wire-time step (see fakeverbs.h); mu held
  void Push(Cq* cq, const Cqe& e);
  void ToError(Qp* q);
};

// Shared by the in-process wire (fake_wire.cc) and the cross-process one (fake_host.cc); mu held.
Device* DevOf(const Qp* q);
bool PortUp(const Device* d);
uint64_t Total(const std::vector<vx::Sge>& sge);
// The MR behind `key` in `keys` that covers [addr, addr+len) on `pd` with `need` access; its host
// pointer for addr, or null.
uint8_t* Resolve(const std::map<uint32_t, Mr*>& keys, uint32_t key, const Pd* pd, uint64_t addr, uint64_t len,
                 int need);
double DeadPathMs(const Qp* q);  // 4.096 us x 2^timeout x (retry_cnt + 1)
// How long a requester with rnr_retry retries RNR against a responder's min_rnr_timer before
// RNR_RETRY_EXC_ERR (one try waits RnrMs(0, timer)).
double RnrMs(int rnr_retry, int min_rnr_timer);
void EventTo(Context* c, int type, void* element);
void SendCompletion(Fabric& f, Qp* q, const SendOp& op, int status, uint32_t byte_len = 0);
void RecvCompletion(Fabric& f, Qp* r, const RecvOp& rv, int status, int opcode, uint32_t byte_len, bool with_imm,
                    uint32_t imm, uint32_t src_qp);
void FailOp(Fabric& f, Qp* q, const SendOp& op, int status);  // completes op with status, QP to ERR
void FlushQp(Fabric& f, Qp* q);  // an ERR QP's outstanding WRs complete WR_FLUSH_ERR

// FAKEVERBS_WIRE=<dir>: the processes of one fabric, each a host (fake_host.cc). The link claims a host
// index at construction; its thread (the "HCA": receives other hosts' requests and answers them,
// receives their answers to ours) runs while a context is open. Every method but Start/Stop is called
// with Fabric::mu held.
class HostLink {
 public:
  static HostLink* Create(Fabric& f, const std::string& dir, int* host);  // null (+ message) on failure
  void Start();  // link_mu held, mu not: binds host<h>.sock, starts the thread
  void Stop();   // link_mu held, mu not: joins the thread, closes every socket
  // One step of a QP whose responder is on another host: timers, new sends. Run by every poll_cq and
  // by the thread (so WRs leave and time out without the application polling).
  void Progress(Qp* q, Clock::time_point now);
  void Kick();  // WRs were posted: the thread sends them now

  struct Impl;

 private:
  explicit HostLink(Impl* impl) : impl_(impl) {}
  Impl* impl_;
};

// FAKEVERBS_CONTROL=<path>: faults injected into a running process from outside (fake_control.cc).
// The path is a FIFO (made if absent) this process holds open for reading and writing from the first
// Start of its HostLink to its exit, so a writer never blocks and never sees EOF; the HostLink's thread
// reads it and applies each complete line (mu held), and appends "<line> -> <outcome>" to
// <path>.applied, so a script knows when a command took effect. Commands (one per line):
//   down <dev> | up <dev>          port down / up, with PORT_ERR / PORT_ACTIVE (fakeverbs_set_port_state)
//   blackhole <dev> | ackloss <dev> | txloss <dev>   the port's fault (fakeverbs_set_fault)
//   heal <dev>                     no fault, port up (PORT_ACTIVE if it was down)
//   fatal <dev>                    the device dies for good (fakeverbs_device_fatal)
//   stats                          the per-device counters of traffic with other hosts, on one line
class Control {
 public:
  static Control* Open(Fabric& f, int host);  // null when FAKEVERBS_CONTROL is unset (aborts if unusable)
  int fd() const { return fd_; }
  void OnReadable();  // mu held: reads what is there, applies every complete line

 private:
  Control(Fabric& f, int host, std::string path, int fd) : f_(f), host_(host), path_(std::move(path)), fd_(fd) {}
  std::string Apply(const std::string& line);  // the outcome written to <path>.applied
  Fabric& f_;
  int host_;
  std::string path_;
  int fd_;
  std::string partial_;  // a line not yet complete
};

}  // namespace fakeverbs
