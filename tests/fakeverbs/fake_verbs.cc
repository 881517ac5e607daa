// fakeverbs — the libibverbs entry points (control path): devices, contexts, PDs, MRs, CQs, QPs and
// the QP state machine. Wire time (post/poll execution) is in fake_wire.cc.
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

#include "fake_fabric.h"
#include "fakeverbs.h"

namespace fakeverbs {

// The real rdma-core (v44, LP64) layout of what rerail reads through verbs_api.h and the fake fills:
// the ops slots rerail calls, the async fd, the heads of cq/qp/mr/pd.
static_assert(offsetof(vx::ContextHead, ops) == 8);
static_assert(offsetof(vx::ContextOps, poll_cq) == 11 * 8);
static_assert(offsetof(vx::ContextOps, post_send) == 25 * 8);
static_assert(offsetof(vx::ContextOps, post_recv) == 26 * 8);
static_assert(offsetof(vx::ContextHead, async_fd) == 268);
static_assert(offsetof(vx::CqHead, cqe) == 28);
static_assert(offsetof(vx::QpHead, qp_num) == 52 && offsetof(vx::QpHead, state) == 56);
static_assert(offsetof(vx::Mr, lkey) == 36 && offsetof(vx::Mr, rkey) == 40);
static_assert(sizeof(vx::Wc) == 48 && sizeof(vx::SendWr) == 128 && sizeof(vx::QpAttr) == 144);
static_assert(offsetof(Context, head) == 0 && offsetof(Qp, head) == 0 && offsetof(Cq, head) == 0 &&
              offsetof(Mr, head) == 0 && offsetof(Pd, head) == 0);

int PollCq(vx::Cq* cq, int n, vx::Wc* wc);
int PostSend(vx::Qp* qp, vx::SendWr* wr, vx::SendWr** bad);
int PostRecv(vx::Qp* qp, vx::RecvWr* wr, vx::RecvWr** bad);

namespace {

int ReqNotify(vx::Cq*, int) { return 0; }  // polled CQs only; arming is accepted and ignored

int EnvInt(const char* name, int def) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : def;
}

void SetGid(vx::Gid* g, int host, int dev, uint64_t guid_be, bool v4) {
  memset(g, 0, sizeof(*g));
  if (v4) {
    g->raw[10] = g->raw[11] = 0xff;
    g->raw[12] = 10, g->raw[13] = 77, g->raw[14] = static_cast<uint8_t>(host), g->raw[15] = static_cast<uint8_t>(dev + 1);
  } else {
    g->raw[0] = 0xfe, g->raw[1] = 0x80;
    memcpy(g->raw + 8, &guid_be, 8);
  }
}

Fabric* Build() {
  Fabric* f = new Fabric();
  int n = EnvInt("FAKEVERBS_DEVICES", 2);
  const char* ll = getenv("FAKEVERBS_LINK_LAYER");
  bool ib = ll && strcmp(ll, "ib") == 0;
  f->burst = EnvInt("FAKEVERBS_BURST", 4) > 0 ? EnvInt("FAKEVERBS_BURST", 4) : 4;
  // Several processes, one fabric: the addresses of this process's devices carry its host index.
  if (const char* dir = getenv("FAKEVERBS_WIRE"); dir && *dir) f->link = HostLink::Create(*f, dir, &f->host);
  for (int i = 0; i < n && i < kDevsPerHost; ++i) {
    Device* d = new Device();
    d->name = "fake" + std::to_string(i);
    d->index = i;
    uint64_t guid = kGuidBase + static_cast<uint64_t>(f->host) * kDevsPerHost + i;
    d->guid_be = (static_cast<uint64_t>(htonl(guid & 0xffffffff)) << 32) | htonl(guid >> 32);
    d->link_layer = ib ? vx::kLinkLayerInfiniband : vx::kLinkLayerEthernet;
    d->port.lid = ib ? static_cast<uint16_t>(f->host * kDevsPerHost + i + 1) : 0;
    SetGid(&d->port.gid[0], f->host, i, d->guid_be, false);
    SetGid(&d->port.gid[1], f->host, i, d->guid_be, true);
    f->devices.push_back(d);
  }
  if (const char* down = getenv("FAKEVERBS_PORT_DOWN")) {
    std::string s = down;
    size_t at = 0;
    while (at < s.size()) {
      size_t c = s.find(',', at);
      std::string item = s.substr(at, c == std::string::npos ? std::string::npos : c - at);
      at = c == std::string::npos ? s.size() : c + 1;
      std::string name = item.substr(0, item.find(':'));
      if (Device* d = f->FindDevice(name.c_str())) d->port.state = vx::kPortDown;
    }
  }
  return f;
}

template <typename T>
T* Fail(int err) {
  errno = err;
  return nullptr;
}

Device* DevOf(vx::Device* d) { return reinterpret_cast<Device*>(d); }
Context* Ctx(vx::Context* c) { return reinterpret_cast<Context*>(c); }
Pd* PdOf(vx::Pd* p) { return reinterpret_cast<Pd*>(p); }
Cq* CqOf(vx::Cq* c) { return reinterpret_cast<Cq*>(c); }
Qp* QpOf(vx::Qp* q) { return reinterpret_cast<Qp*>(q); }

}  // namespace

Fabric& Fabric::Get() {
  static Fabric* f = Build();  // never destroyed: contexts may outlive static destructors
  return *f;
}

Device* Fabric::FindDevice(const char* name) {
  for (Device* d : devices)
    if (name && d->name == name) return d;
  return nullptr;
}

// Every host of a fabric has the same devices (FAKEVERBS_DEVICES and FAKEVERBS_LINK_LAYER are the
// fabric's, as the test sets them for all its processes), so an address decodes to (host, device):
// LID host*64+dev+1; GID 1 ::ffff:10.77.<host>.<dev+1>; GID 0 fe80::<kGuidBase + host*64 + dev>.
bool Fabric::ResolveAddress(uint8_t link_layer, const vx::AhAttr& ah, int* out_host, int* out_index) const {
  if (devices.empty() || devices[0]->link_layer != link_layer) return false;
  const int ndev = static_cast<int>(devices.size());
  int h = -1, d = -1;
  if (link_layer == vx::kLinkLayerInfiniband) {
    if (ah.dlid == 0) return false;
    h = (ah.dlid - 1) / kDevsPerHost, d = (ah.dlid - 1) % kDevsPerHost;
  } else {
    const uint8_t* g = ah.grh.dgid.raw;
    static const uint8_t kV4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(g, kV4, 12) == 0 && g[12] == 10 && g[13] == 77) {
      h = g[14], d = g[15] - 1;
    } else if (g[0] == 0xfe && g[1] == 0x80) {
      uint64_t be;
      memcpy(&be, g + 8, 8);
      uint64_t guid = (static_cast<uint64_t>(ntohl(static_cast<uint32_t>(be))) << 32) | ntohl(static_cast<uint32_t>(be >> 32));
      if (guid < kGuidBase || guid - kGuidBase >= static_cast<uint64_t>(kMaxHosts) * kDevsPerHost) return false;
      h = static_cast<int>((guid - kGuidBase) / kDevsPerHost), d = static_cast<int>((guid - kGuidBase) % kDevsPerHost);
    }
  }
  if (h < 0 || h >= kMaxHosts || d < 0 || d >= ndev) return false;
  if (h != host && link == nullptr) return false;  // one process = one fabric: no other host exists
  *out_host = h, *out_index = d;
  return true;
}

Device* Fabric::DeviceByAddress(uint8_t link_layer, const vx::AhAttr& ah) {
  int h = -1, d = -1;
  if (!ResolveAddress(link_layer, ah, &h, &d) || h != host) return nullptr;
  return devices[d];
}

void Fabric::PostEvent(Device* d, int type, void* element) {
  for (Context* c : d->contexts) {
    c->events.push_back(Event{type, 1, element});
    char one = 1;
    ssize_t w = write(c->event_wr, &one, 1);
    (void)w;
  }
}

bool Fabric::SetPortState(Device* d, bool up) {
  int to = up ? vx::kPortActive : vx::kPortDown;
  if (d->port.state == to) return false;
  d->port.state = to;
  PostEvent(d, up ? vx::kEventPortActive : vx::kEventPortErr, nullptr);
  return true;
}

// ---- QP state machine -----------------------------------------------------------------------------

namespace {

struct Transition {
  int from, to, required, optional;
};

// The RC rows of the IB spec's modify-QP table (as the kernel's ib_modify_qp_is_ok checks them).
constexpr Transition kRc[] = {
    {vx::kQpsReset, vx::kQpsReset, 0, 0},
    {vx::kQpsReset, vx::kQpsInit, vx::kQpPkeyIndex | vx::kQpPort | vx::kQpAccessFlags, 0},
    {vx::kQpsInit, vx::kQpsInit, 0, vx::kQpPkeyIndex | vx::kQpPort | vx::kQpAccessFlags},
    {vx::kQpsInit, vx::kQpsRtr,
     vx::kQpAv | vx::kQpPathMtu | vx::kQpDestQpn | vx::kQpRqPsn | vx::kQpMaxDestRdAtomic | vx::kQpMinRnrTimer,
     kQpAltPath | vx::kQpAccessFlags | vx::kQpPkeyIndex},
    {vx::kQpsRtr, vx::kQpsRts,
     vx::kQpSqPsn | vx::kQpTimeout | vx::kQpRetryCnt | vx::kQpRnrRetry | vx::kQpMaxQpRdAtomic,
     kQpCurState | kQpAltPath | vx::kQpAccessFlags | vx::kQpMinRnrTimer | kQpPathMigState},
    {vx::kQpsRts, vx::kQpsRts, 0,
     kQpCurState | vx::kQpAccessFlags | kQpAltPath | kQpPathMigState | vx::kQpMinRnrTimer},
};

// EINVAL unless from -> to is allowed with exactly the required bits and no others than the optional.
int CheckMask(int from, int to, int mask) {
  if (!(mask & vx::kQpState)) return EINVAL;
  int rest = mask & ~vx::kQpState;
  if (to == vx::kQpsReset || to == vx::kQpsErr) return rest == 0 ? 0 : EINVAL;
  for (const Transition& t : kRc) {
    if (t.from != from || t.to != to) continue;
    if ((rest & t.required) != t.required) return EINVAL;
    if (rest & ~(t.required | t.optional)) return EINVAL;
    return 0;
  }
  return EINVAL;
}

int ApplyAttrs(Fabric& f, Qp* q, const vx::QpAttr& a, int mask) {
  Device* dev = q->pd->ctx->dev;
  if (mask & vx::kQpPort) {
    if (a.port_num != 1) return EINVAL;
    q->port = a.port_num;
  }
  if ((mask & vx::kQpPkeyIndex) && a.pkey_index != 0) return EINVAL;
  if (mask & vx::kQpAccessFlags) q->access = a.qp_access_flags;
  if (mask & vx::kQpPathMtu) {
    if (a.path_mtu < 1 || a.path_mtu > 5) return EINVAL;
    q->path_mtu = a.path_mtu;
  }
  if ((mask & vx::kQpMaxDestRdAtomic) && a.max_dest_rd_atomic > 16) return EINVAL;
  if ((mask & vx::kQpMaxQpRdAtomic) && a.max_rd_atomic > 16) return EINVAL;
  if (mask & vx::kQpAv) {
    if (a.ah_attr.port_num != 1) return EINVAL;
    if (dev->link_layer == vx::kLinkLayerEthernet) {
      if (!a.ah_attr.is_global || a.ah_attr.grh.sgid_index >= kGidTblLen) return EINVAL;  // RoCE needs a GRH
    } else if (a.ah_attr.dlid == 0) {
      return EINVAL;
    }
    q->dest_host = q->dest_index = -1;  // -1: nobody answers there
    f.ResolveAddress(dev->link_layer, a.ah_attr, &q->dest_host, &q->dest_index);
    q->dest_dev = f.DeviceByAddress(dev->link_layer, a.ah_attr);
  }
  if (mask & vx::kQpDestQpn) q->dest_qpn = a.dest_qp_num;
  if (mask & vx::kQpRqPsn) q->rq_psn = a.rq_psn & 0xffffff;
  if (mask & vx::kQpSqPsn) q->sq_psn = a.sq_psn & 0xffffff;
  if (mask & vx::kQpMinRnrTimer) q->min_rnr_timer = a.min_rnr_timer;
  if (mask & vx::kQpTimeout) {
    if (a.timeout > 31) return EINVAL;
    q->timeout = a.timeout;
  }
  if (mask & vx::kQpRetryCnt) {
    if (a.retry_cnt > 7) return EINVAL;
    q->retry_cnt = a.retry_cnt;
  }
  if (mask & vx::kQpRnrRetry) {
    if (a.rnr_retry > 7) return EINVAL;
    q->rnr_retry = a.rnr_retry;
  }
  return 0;
}

void DropCqEntries(Cq* cq, uint32_t qpn) {
  std::deque<Cqe> keep;
  for (const Cqe& e : cq->q)
    if (e.wc.qp_num != qpn) keep.push_back(e);
  cq->q.swap(keep);
}

}  // namespace

}  // namespace fakeverbs

using namespace fakeverbs;

// ---- entry points ---------------------------------------------------------------------------------

extern "C" {

__attribute__((visibility("default"))) vx::Device** ibv_get_device_list(int* num) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  auto** list = static_cast<vx::Device**>(calloc(f.devices.size() + 1, sizeof(vx::Device*)));
  if (!list) return Fail<vx::Device*>(ENOMEM);
  for (size_t i = 0; i < f.devices.size(); ++i) list[i] = reinterpret_cast<vx::Device*>(f.devices[i]);
  if (num) *num = static_cast<int>(f.devices.size());
  return list;
}

__attribute__((visibility("default"))) void ibv_free_device_list(vx::Device** list) { free(list); }

__attribute__((visibility("default"))) const char* ibv_get_device_name(vx::Device* d) {
  return d ? DevOf(d)->name.c_str() : nullptr;
}

__attribute__((visibility("default"))) uint64_t ibv_get_device_guid(vx::Device* d) { return DevOf(d)->guid_be; }

__attribute__((visibility("default"))) vx::Context* ibv_open_device(vx::Device* d) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> lg(f.link_mu);
  if (f.link && f.open_contexts == 0) f.link->Start();  // the "HCA" serves other hosts while a context is open
  std::lock_guard<std::mutex> g(f.mu);
  Device* dev = DevOf(d);
  if (dev->fatal) return Fail<vx::Context>(EIO);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  Context* c = new Context();
  memset(&c->head, 0, sizeof(c->head));
  c->head.device = d;
  c->head.ops.poll_cq = PollCq;
  c->head.ops.req_notify_cq = ReqNotify;
  c->head.ops.post_send = PostSend;
  c->head.ops.post_recv = PostRecv;
  c->head.cmd_fd = -1;
  c->head.async_fd = fds[0];
  c->head.num_comp_vectors = 1;
  c->event_wr = fds[1];
  c->dev = dev;
  dev->contexts.push_back(c);
  f.open_contexts++;
  return reinterpret_cast<vx::Context*>(c);
}

__attribute__((visibility("default"))) int ibv_close_device(vx::Context* ctx) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> lg(f.link_mu);
  {
    std::lock_guard<std::mutex> g(f.mu);
    Context* c = Ctx(ctx);
    if (c->objects) return EBUSY;
    auto& cs = c->dev->contexts;
    for (size_t i = 0; i < cs.size(); ++i)
      if (cs[i] == c) cs.erase(cs.begin() + static_cast<long>(i)), i = cs.size();
    close(c->head.async_fd);
    close(c->event_wr);
    delete c;
    f.open_contexts--;
  }
  // The last context gone: the link's thread and sockets go too (a process that closed everything
  // holds no descriptor or thread of the fake, as with a real provider).
  if (f.link && f.open_contexts == 0) f.link->Stop();
  return 0;
}

__attribute__((visibility("default"))) int ibv_query_device(vx::Context* ctx, vx::DeviceAttr* a) {
  Device* d = Ctx(ctx)->dev;
  memset(a, 0, sizeof(*a));
  snprintf(a->fw_ver, sizeof(a->fw_ver), "fakeverbs-1");
  a->node_guid = a->sys_image_guid = d->guid_be;
  a->max_mr_size = ~0ull;
  a->page_size_cap = 4096;
  a->vendor_id = 0xfa4e;
  a->max_qp = 1 << 16;
  a->max_qp_wr = kMaxQpWr;
  a->max_sge = a->max_sge_rd = kMaxSge;
  a->max_cq = 1 << 16;
  a->max_cqe = kMaxCqe;
  a->max_mr = 1 << 20;
  a->max_pd = 1 << 16;
  a->max_qp_rd_atom = a->max_qp_init_rd_atom = a->max_res_rd_atom = 16;
  a->max_pkeys = 1;
  a->phys_port_cnt = 1;
  return 0;
}

__attribute__((visibility("default"))) int ibv_query_port(vx::Context* ctx, uint8_t port, vx::PortAttr* a) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  Device* d = Ctx(ctx)->dev;
  if (port != 1) return EINVAL;
  memset(a, 0, sizeof(*a));
  a->state = d->fatal ? vx::kPortDown : d->port.state;
  a->max_mtu = a->active_mtu = 5;  // 4096
  a->gid_tbl_len = kGidTblLen;
  a->max_msg_sz = 1u << 31;
  a->pkey_tbl_len = 1;
  a->lid = d->port.lid;
  a->active_width = 2;   // 4x
  a->active_speed = 64;  // HDR: 4 x 50 Gb/s
  a->phys_state = a->state == vx::kPortActive ? 5 : 3;  // LinkUp / Disabled
  a->link_layer = d->link_layer;
  return 0;
}

__attribute__((visibility("default"))) int ibv_query_gid(vx::Context* ctx, uint8_t port, int index, vx::Gid* gid) {
  if (port != 1 || index < 0 || index >= kGidTblLen) return -1;
  *gid = Ctx(ctx)->dev->port.gid[index];
  return 0;
}

__attribute__((visibility("default"))) int ibv_fork_init() { return 0; }

__attribute__((visibility("default"))) const char* ibv_port_state_str(int s) {
  static const char* k[] = {"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
  return s >= 0 && s < 6 ? k[s] : "unknown";
}

__attribute__((visibility("default"))) const char* ibv_event_type_str(int e) {
  static const char* k[] = {"CQ error", "local work queue catastrophic error", "invalid request local work queue error",
                            "local access violation work queue error", "communication established",
                            "send queue drained", "path migrated", "path migration request error",
                            "local catastrophic error", "port active", "port error", "LID change",
                            "P_Key change", "SM change", "SRQ catastrophic error", "SRQ limit reached",
                            "last WQE reached", "client reregistration", "GID table change"};
  return e >= 0 && e < 19 ? k[e] : "unknown";
}

__attribute__((visibility("default"))) const char* ibv_wc_status_str(int s) {
  static const char* k[] = {"success", "local length error", "local QP operation error", "local EE context operation error",
                            "local protection error", "Work Request Flushed Error", "memory management operation error",
                            "bad response error", "local access error", "remote invalid request error",
                            "remote access error", "remote operation error", "transport retry counter exceeded",
                            "RNR retry counter exceeded", "local RDD violation error", "remote invalid RD request",
                            "aborted error", "invalid EE context number", "invalid EE context state",
                            "fatal error", "response timeout error", "general error"};
  return s >= 0 && s < 22 ? k[s] : "unknown";
}

__attribute__((visibility("default"))) int ibv_get_async_event(vx::Context* ctx, vx::AsyncEvent* ev) {
  Context* c = Ctx(ctx);
  char one;
  ssize_t r = read(c->head.async_fd, &one, 1);  // blocks unless the caller made the fd non-blocking
  if (r != 1) {
    if (r == 0) errno = EIO;
    return -1;
  }
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  if (c->events.empty()) return errno = EAGAIN, -1;
  Event e = c->events.front();
  c->events.pop_front();
  memset(ev, 0, sizeof(*ev));
  ev->event_type = e.type;
  if (e.element) ev->element.qp = static_cast<vx::Qp*>(e.element);
  else ev->element.port_num = e.port_num;
  return 0;
}

__attribute__((visibility("default"))) void ibv_ack_async_event(vx::AsyncEvent*) {}

__attribute__((visibility("default"))) vx::Pd* ibv_alloc_pd(vx::Context* ctx) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  Pd* p = new Pd();
  p->head.context = ctx;
  p->head.handle = f.next_key++;
  p->ctx = Ctx(ctx);
  p->ctx->objects++;
  return &p->head;
}

__attribute__((visibility("default"))) int ibv_dealloc_pd(vx::Pd* pd) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  Pd* p = PdOf(pd);
  if (p->objects) return EBUSY;
  p->ctx->objects--;
  delete p;
  return 0;
}

__attribute__((visibility("default"))) vx::Mr* ibv_reg_mr_iova2(vx::Pd* pd, void* addr, size_t len, uint64_t iova,
                                                                 unsigned access) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  // Remote write (and atomics) need local write, as the kernel requires.
  if ((access & vx::kAccessRemoteWrite) && !(access & vx::kAccessLocalWrite)) return Fail<vx::Mr>(EINVAL);
  if (access & ~0x1fffu) return Fail<vx::Mr>(EINVAL);
  if (addr == nullptr && len > 0) return Fail<vx::Mr>(EFAULT);
  Mr* m = new Mr();
  m->pd = PdOf(pd);
  m->access = static_cast<int>(access);
  m->iova = iova;
  m->head.context = pd->context;
  m->head.pd = pd;
  m->head.addr = addr;
  m->head.length = len;
  m->head.handle = f.next_key;
  // Keys as hardware makes them: an index in the high 24 bits, a variant byte below; lkey != rkey.
  m->head.lkey = (f.next_key << 8) | 0x11;
  m->head.rkey = (f.next_key << 8) | 0x22;
  f.next_key++;
  f.lkeys[m->head.lkey] = m;
  f.rkeys[m->head.rkey] = m;
  m->pd->objects++;
  return &m->head;
}

__attribute__((visibility("default"))) vx::Mr* ibv_reg_mr(vx::Pd* pd, void* addr, size_t len, int access) {
  return ibv_reg_mr_iova2(pd, addr, len, reinterpret_cast<uint64_t>(addr), static_cast<unsigned>(access));
}

// No DMA-BUF here (a host without GPU memory registration): NCCL's probe reads EOPNOTSUPP as "unsupported".
__attribute__((visibility("default"))) vx::Mr* ibv_reg_dmabuf_mr(vx::Pd*, uint64_t, size_t, uint64_t, int, int) {
  return Fail<vx::Mr>(EOPNOTSUPP);
}

__attribute__((visibility("default"))) int ibv_dereg_mr(vx::Mr* mr) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  Mr* m = reinterpret_cast<Mr*>(mr);
  if (f.lkeys.erase(m->head.lkey) != 1 || f.rkeys.erase(m->head.rkey) != 1) return EINVAL;
  m->pd->objects--;
  delete m;
  return 0;
}

__attribute__((visibility("default"))) vx::Cq* ibv_create_cq(vx::Context* ctx, int cqe, void* cq_context,
                                                              vx::CompChannel* channel, int) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  if (cqe < 1 || cqe > kMaxCqe) return Fail<vx::Cq>(EINVAL);
  Cq* c = new Cq();
  c->head.context = ctx;
  c->head.channel = channel;
  c->head.cq_context = cq_context;
  c->head.handle = f.next_key++;
  c->head.cqe = cqe;  // exactly what was asked (real providers round up): overflow is testable
  c->ctx = Ctx(ctx);
  c->ctx->objects++;
  return reinterpret_cast<vx::Cq*>(c);
}

__attribute__((visibility("default"))) int ibv_destroy_cq(vx::Cq* cq) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  Cq* c = CqOf(cq);
  if (c->users) return EBUSY;
  c->ctx->objects--;
  delete c;
  return 0;
}

__attribute__((visibility("default"))) vx::Qp* ibv_create_qp(vx::Pd* pd, vx::QpInitAttr* a) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  if (a->qp_type != vx::kQptRc || a->srq) return Fail<vx::Qp>(EOPNOTSUPP);  // RC without SRQ only
  if (!a->send_cq || !a->recv_cq) return Fail<vx::Qp>(EINVAL);
  const vx::QpCap& c = a->cap;
  if (c.max_send_wr < 1 || c.max_send_wr > kMaxQpWr || c.max_recv_wr > kMaxQpWr || c.max_send_sge > kMaxSge ||
      c.max_recv_sge > kMaxSge || c.max_inline_data > kMaxInline)
    return Fail<vx::Qp>(EINVAL);
  Cq* scq = CqOf(a->send_cq);
  Cq* rcq = CqOf(a->recv_cq);
  if (scq->ctx != PdOf(pd)->ctx || rcq->ctx != PdOf(pd)->ctx) return Fail<vx::Qp>(EINVAL);
  Qp* q = new Qp();
  q->head.context = pd->context;
  q->head.qp_context = a->qp_context;
  q->head.pd = pd;
  q->head.send_cq = a->send_cq;
  q->head.recv_cq = a->recv_cq;
  q->head.qp_num = f.next_qpn++;
  q->head.handle = q->head.qp_num;
  q->head.state = vx::kQpsReset;
  q->head.qp_type = vx::kQptRc;
  q->pd = PdOf(pd);
  q->scq = scq;
  q->rcq = rcq;
  q->cap = c;
  q->sig_all = a->sq_sig_all != 0;
  scq->users++;
  rcq->users++;
  q->pd->objects++;
  f.qps[q->head.qp_num] = q;
  return reinterpret_cast<vx::Qp*>(q);
}

__attribute__((visibility("default"))) int ibv_destroy_qp(vx::Qp* qp) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  Qp* q = QpOf(qp);
  f.qps.erase(q->head.qp_num);
  q->scq->users--;
  q->rcq->users--;
  q->pd->objects--;
  delete q;
  return 0;
}

__attribute__((visibility("default"))) int ibv_modify_qp(vx::Qp* qp, vx::QpAttr* a, int mask) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  Qp* q = QpOf(qp);
  int from = q->head.state;
  if ((mask & kQpCurState) && a->cur_qp_state != from) return EINVAL;
  int to = (mask & vx::kQpState) ? a->qp_state : from;
  if (int e = CheckMask(from, to, mask)) return e;
  Qp saved = *q;  // attributes apply all or nothing
  if (int e = ApplyAttrs(f, q, *a, mask)) {
    *q = saved;
    return e;
  }
  if (to == vx::kQpsReset) {
    q->sq.clear();
    q->rq.clear();
    q->sq_posted = q->sq_freed = 0;
    q->emitted = 0;
    q->gen++;  // answers still on their way from another process belong to the previous life
    q->dest_dev = nullptr;
    q->dest_host = q->dest_index = -1;
    DropCqEntries(q->scq, q->head.qp_num);  // as mlx5 cleans the CQ of a QP moved to RESET
    if (q->rcq != q->scq) DropCqEntries(q->rcq, q->head.qp_num);
  }
  q->head.state = to;  // ERR: outstanding WRs flush at the next progress step
  return 0;
}

__attribute__((visibility("default"))) int ibv_query_qp(vx::Qp* qp, vx::QpAttr* a, int, vx::QpInitAttr* init) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  Qp* q = QpOf(qp);
  memset(a, 0, sizeof(*a));
  a->qp_state = a->cur_qp_state = q->head.state;
  a->path_mtu = q->path_mtu;
  a->rq_psn = q->rq_psn;
  a->sq_psn = q->sq_psn;
  a->dest_qp_num = q->dest_qpn;
  a->qp_access_flags = q->access;
  a->cap = q->cap;
  a->port_num = static_cast<uint8_t>(q->port);
  a->timeout = q->timeout;
  a->retry_cnt = q->retry_cnt;
  a->rnr_retry = q->rnr_retry;
  a->min_rnr_timer = q->min_rnr_timer;
  if (init) {
    memset(init, 0, sizeof(*init));
    init->send_cq = q->head.send_cq;
    init->recv_cq = q->head.recv_cq;
    init->cap = q->cap;
    init->qp_type = vx::kQptRc;
    init->sq_sig_all = q->sig_all;
  }
  return 0;
}

// ---- control API ----------------------------------------------------------------------------------

__attribute__((visibility("default"))) int fakeverbs_set_port_state(const char* dev, int port, int up) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  Device* d = f.FindDevice(dev);
  if (!d || port != 1) return -1;
  f.SetPortState(d, up != 0);
  return 0;
}

__attribute__((visibility("default"))) int fakeverbs_set_fault(const char* dev, int port, int fault) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  Device* d = f.FindDevice(dev);
  if (!d || port != 1 || fault < 0 || fault > FAKEVERBS_FAULT_DROP_OUT) return -1;
  d->port.fault = fault;
  return 0;
}

__attribute__((visibility("default"))) int fakeverbs_device_fatal(const char* dev) {
  Fabric& f = Fabric::Get();
  std::lock_guard<std::mutex> g(f.mu);
  Device* d = f.FindDevice(dev);
  if (!d) return -1;
  d->fatal = true;
  for (auto& [qpn, q] : f.qps)
    if (q->pd->ctx->dev == d) f.ToError(q);
  f.PostEvent(d, vx::kEventDeviceFatal, nullptr);
  return 0;
}

}  // extern "C"
