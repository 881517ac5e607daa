// One TCP connection both ways between two processes (duplex.h).
#include "duplex.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace rr::net {

namespace {
// A static object, not a heap one: a library that is unloaded leaves nothing behind (a reload draws a new
// instance, distinct with high probability), and it has no destructor to run while a comm still uses it.
struct Ids {
  uint32_t instance = 0;
  std::atomic<uint32_t> next{0};  // low 32 bits of the next connection id
  bool ok = false;
  Ids() {
    uint64_t r = 0;
    while (RandomU64(&r).ok() && static_cast<uint32_t>(r >> 32) == 0) {
    }
    ok = static_cast<uint32_t>(r >> 32) != 0;
    instance = static_cast<uint32_t>(r >> 32);
    next.store(static_cast<uint32_t>(r));
  }
};
static_assert(std::is_trivially_destructible_v<Ids>);
Ids& TheIds() {
  static Ids ids;
  return ids;
}
}  // namespace

uint32_t ProcessInstance() { return TheIds().instance; }

Status NewConnId(uint64_t* id) {
  Ids& ids = TheIds();
  if (!ids.ok) return RandomU64(id);  // the kernel gave no randomness: its error (or a random id)
  *id = static_cast<uint64_t>(ids.instance) << 32 | ids.next.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

void StampNonce(Nonce* n) {
  const uint32_t inst = ProcessInstance();
  std::memcpy(n->data(), &inst, sizeof(inst));
}

uint32_t InstanceOfNonce(const Nonce& n) {
  uint32_t inst;
  std::memcpy(&inst, n.data(), sizeof(inst));
  return inst;
}

bool DuplexPort::AllowHeld() {
  std::lock_guard<std::mutex> lk(mu);
  hold_ok = static_cast<uint32_t>(owner_conn) != static_cast<uint32_t>(guest_conn);
  return hold_ok;
}

bool DuplexPort::Hold(const Frame& f) {
  std::lock_guard<std::mutex> lk(mu);
  if (!hold_ok || link.load() == nullptr || held.size() >= kMaxHeld) return false;
  held.push_back(f);
  Flags();
  return true;
}

bool DuplexPort::TakeHeld(std::vector<Frame>* out, bool even_cut) {
  std::lock_guard<std::mutex> lk(mu);
  if (held.empty() || (held_done > 0 && !even_cut)) return false;
  out->insert(out->end(), held.begin(), held.end());
  held.clear();
  held_done = 0;
  Flags();
  return true;
}

size_t DuplexPort::HeldBytes() const { return held.size() * sizeof(Frame) - held_done; }

IoState DuplexPort::Write(int who, const iovec* iov, int iovcnt, size_t frame_left, bool take_held, size_t* n, int* err) {
  std::lock_guard<std::mutex> lk(mu);
  *n = 0;
  Link* l = link.load();
  if (l == nullptr) {
    *err = ECONNRESET;
    return IoState::kError;
  }
  if (writer != 0 && writer != who) return IoState::kAgain;
  iovec v[kMaxHeld + 4];
  int c = 0;
  size_t hb = 0;
  if (writer == 0 && !held.empty() && (take_held || held_done > 0)) {
    for (size_t k = 0; k < held.size(); ++k) {
      const size_t off = k == 0 ? held_done : 0;
      v[c++] = {reinterpret_cast<uint8_t*>(&held[k]) + off, sizeof(Frame) - off};
      hb += sizeof(Frame) - off;
    }
  }
  for (int k = 0; k < iovcnt && c < static_cast<int>(sizeof(v) / sizeof(v[0])); ++k) v[c++] = iov[k];
  if (c == 0) return IoState::kOk;
  size_t m = 0;
  IoState st = l->Writev(0, v, c, &m, err);
  if (st != IoState::kOk) return st;
  size_t h = std::min(m, hb);
  m -= h;
  h += held_done;  // now: bytes of held written, counted from held[0]'s start
  const size_t whole = h / sizeof(Frame);
  held.erase(held.begin(), held.begin() + static_cast<long>(whole));
  held_done = h % sizeof(Frame);
  if (held.empty()) held_done = 0;
  Flags();
  *n = m;
  if (m > 0) writer = m < frame_left ? who : 0;
  return IoState::kOk;
}

namespace {
DuplexRegistry* g_registry = nullptr;  // set once by Get(); freed at unload when no comm is registered
}  // namespace

DuplexRegistry& DuplexRegistry::Get() {
  static const bool made = (g_registry = new DuplexRegistry, true);  // once, thread-safe
  (void)made;
  return *g_registry;
}

// Library unload (dlclose, or exit() with it loaded): an empty registry is freed, so a process that loads
// and unloads rerail ends with nothing of it left; one that comms still use is kept, as the Plugin is.
void DuplexRegistry::FreeAtUnload() {
  if (g_registry == nullptr) return;
  {
    std::scoped_lock lk(g_registry->comms_mu_, g_registry->offers_mu_);
    if (!g_registry->recvs_.empty() || !g_registry->sends_.empty()) return;
  }
  delete g_registry;
  g_registry = nullptr;
}

namespace {
__attribute__((destructor)) void FreeRegistryAtUnload() { DuplexRegistry::FreeAtUnload(); }
}  // namespace

void DuplexRegistry::AddRecv(RecvComm* c, uint64_t conn) {
  std::lock_guard<std::mutex> lk(comms_mu_);
  recvs_.push_back({c, conn});
}

void DuplexRegistry::RemoveRecv(RecvComm* c) {
  std::lock_guard<std::mutex> lk(comms_mu_);
  recvs_.erase(std::remove_if(recvs_.begin(), recvs_.end(), [c](const RecvInfo& r) { return r.comm == c; }),
               recvs_.end());
}

void DuplexRegistry::AddSend(SendComm* c, uint64_t conn, uint32_t peer, std::atomic<bool>* offer_flag) {
  std::lock_guard<std::mutex> lk(offers_mu_);
  sends_.push_back({c, conn, peer, offer_flag});
}

void DuplexRegistry::RemoveSend(SendComm* c) {
  std::lock_guard<std::mutex> lk(offers_mu_);
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (it->comm == c) {
      offers_.erase(it->conn);
      it = sends_.erase(it);
    } else {
      ++it;
    }
  }
}

bool DuplexRegistry::ForEachRecv(const std::function<bool(const RecvInfo&)>& fn) {
  std::lock_guard<std::mutex> lk(comms_mu_);
  for (const RecvInfo& r : recvs_) {
    if (fn(r)) return true;
  }
  return false;
}

bool DuplexRegistry::WithRecv(uint64_t conn, const std::function<void(RecvComm*)>& fn) {
  std::lock_guard<std::mutex> lk(comms_mu_);
  for (const RecvInfo& r : recvs_) {
    if (r.conn == conn) {
      fn(r.comm);
      return true;
    }
  }
  return false;
}

bool DuplexRegistry::Offer(uint64_t send_conn, uint32_t peer, std::shared_ptr<DuplexPort> port) {
  std::lock_guard<std::mutex> lk(offers_mu_);
  for (SendInfo& s : sends_) {
    if (s.conn == send_conn && s.peer == peer) {
      offers_[send_conn] = std::move(port);
      s.flag->store(true, std::memory_order_release);
      return true;
    }
  }
  return false;
}

std::shared_ptr<DuplexPort> DuplexRegistry::TakeOffer(uint64_t send_conn) {
  std::lock_guard<std::mutex> lk(offers_mu_);
  auto it = offers_.find(send_conn);
  if (it == offers_.end()) return nullptr;
  auto p = std::move(it->second);
  offers_.erase(it);
  return p;
}

}  // namespace rr::net
