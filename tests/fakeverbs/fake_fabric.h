// fakeverbs — internal objects of the fake libibverbs: the fabric (every fake device of this process)
// and the verbs objects it hands out. Each object starts with the leading fields of the real rdma-core
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
constexpr int kGidTblLen = 2;         // 0: link-local fe80::guid, 1: RoCE v2 ::ffff:10.77.0.<dev+1>

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
  Device* dest_dev = nullptr;  // resolved from the AV at RTR
  uint32_t rq_psn = 0, sq_psn = 0;
  uint8_t timeout = 0, retry_cnt = 0, rnr_retry = 0, min_rnr_timer = 0;
  // Queues.
  std::deque<SendOp> sq;
  std::deque<RecvOp> rq;
  uint64_t sq_posted = 0;  // WRs posted since the last RESET
  uint64_t sq_freed = 0;   // slots given back by polled completions
};

struct Fabric {
  std::mutex mu;
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
  Device* DeviceByAddress(uint8_t link_layer, const vx::AhAttr& ah);
  void PostEvent(Device* d, int type, void* element);
  void Progress();  // one wire-time step (see fakeverbs.h); mu held
  void Push(Cq* cq, const Cqe& e);
  void ToError(Qp* q);
};

}  // namespace fakeverbs
