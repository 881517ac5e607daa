#include "collector.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "prof_abi.h"
#include "rerail/clock.h"
#include "rerail/log.h"
#include "rerail/params.h"
#include "trace_format.h"

namespace rr::prof {
namespace {

constexpr const char* kP = "PROFILER/rerail";

int TrackFor(const EventRec& ev, const EventRec* parent) {
  rrProfEventDescr_v5_t d;
  std::memcpy(reinterpret_cast<char*>(&d) + offsetof(rrProfEventDescr_v5_t, coll), ev.payload, kPayloadBytes);
  switch (ev.type) {
    case RR_PROF_GROUP:
    case RR_PROF_COLL:
    case RR_PROF_P2P:
    case RR_PROF_CE_COLL:
    case RR_PROF_CE_SYNC:
    case RR_PROF_CE_BATCH:
      return track::kCollectives;
    case RR_PROF_GROUP_API:
    case RR_PROF_COLL_API:
    case RR_PROF_P2P_API:
    case RR_PROF_KERNEL_LAUNCH:
      return track::kApi;
    case RR_PROF_PROXY_CTRL:
      return track::kProxyCtrl;
    case RR_PROF_PROXY_OP:
      return track::kProxyBase + d.proxyOp.channelId * 2 + (d.proxyOp.isSend ? 1 : 0);
    case RR_PROF_PROXY_STEP:
      return parent != nullptr ? parent->track : track::kProxyBase;
    case RR_PROF_KERNEL_CH:
      return track::kKernelBase + d.kernelCh.channelId;
    case RR_PROF_NET_PLUGIN: {
      rrProfNetEvent_v1_t n;
      if (NetDescr(ev, &n) && n.rail >= 0) return track::kRailBase + n.rail;
      return parent != nullptr ? parent->track : track::kNetOther;
    }
    default:
      return track::kCollectives;
  }
}

}  // namespace

bool Collector::Lingers(uint32_t type) {
  return type == RR_PROF_GROUP || type == RR_PROF_COLL || type == RR_PROF_P2P;
}

void Collector::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_) return;
  running_ = true;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void Collector::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return;
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  running_ = false;
}

void Collector::Add(Context* ctx) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    contexts_.push_back(ctx);
  }
  cv_.notify_all();
}

bool Collector::Close(Context* ctx, uint64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  ctx->closing.store(true, std::memory_order_release);
  kick_ = true;
  cv_.notify_all();
  return done_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                        [ctx] { return ctx->closed.load(std::memory_order_acquire); });
}

void Collector::Loop() {
  for (;;) {
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::nanoseconds(kPassNs), [this] { return stop_ || kick_; });
      kick_ = false;
      stopping = stop_;
    }
    Guarded("pass", [&] { Pass(stopping); });
    if (stopping) {
      Guarded("pass", [&] { Pass(true); });  // settle records deferred by the pass above
      std::vector<Context*> left;
      {
        std::lock_guard<std::mutex> lock(mu_);
        left = contexts_;
      }
      for (Context* c : left) Guarded("finish", [&] { FinishContext(c); });
      return;
    }
  }
}

// Nothing may escape the collector thread (std::terminate would kill the rank): a failed pass is
// logged (first few times) and the thread carries on. A failed comm close still marks the comm closed,
// so Finalize() does not wait out its timeout.
template <typename F>
void Collector::Guarded(const char* what, F&& f) {
  try {
    f();
    return;
  } catch (const std::exception& e) {
    if (errors_++ < kMaxErrorWarns) RR_WARN_P(kP, "collector %s failed: %s (profile may be incomplete)", what, e.what());
  } catch (...) {
    if (errors_++ < kMaxErrorWarns) RR_WARN_P(kP, "collector %s failed: unknown exception", what);
  }
  std::vector<Context*> stuck;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Context* c : contexts_)
      if (c->closing.load(std::memory_order_acquire) && c->close_passes >= 2) stuck.push_back(c);
  }
  for (Context* c : stuck) {
    try {
      if (c->out != nullptr) c->out.reset();
    } catch (...) {
    }
    std::lock_guard<std::mutex> lock(mu_);
    contexts_.erase(std::remove(contexts_.begin(), contexts_.end(), c), contexts_.end());
    c->closed.store(true, std::memory_order_release);
  }
  if (!stuck.empty()) done_.notify_all();
}

void Collector::Pass(bool stopping) {
  drained_.clear();
  RingRegistry::Get().DrainAll(&drained_);
  g_.dropped_records = RingRegistry::Get().TotalDropped();
  std::vector<Pending> retry;
  retry.swap(deferred_);
  // Sort small keys, not the 128-byte records: time order, starts before states before stops at equal
  // times; retried records (older) index into `retry` with the top bit set.
  constexpr uint32_t kRetryBit = 1u << 31;
  struct Key {
    uint64_t ts;
    uint32_t op;
    uint32_t idx;
  };
  std::vector<Key> keys;
  keys.reserve(drained_.size() + retry.size());
  for (uint32_t i = 0; i < retry.size(); ++i)
    keys.push_back({retry[i].rec.ts, static_cast<uint32_t>(retry[i].rec.op), i | kRetryBit});
  for (uint32_t i = 0; i < drained_.size(); ++i)
    keys.push_back({drained_[i].ts, static_cast<uint32_t>(drained_[i].op), i});
  std::stable_sort(keys.begin(), keys.end(),
                   [](const Key& a, const Key& b) { return a.ts != b.ts ? a.ts < b.ts : a.op < b.op; });
  for (const Key& k : keys) {
    bool is_retry = (k.idx & kRetryBit) != 0;
    const Record& rec = is_retry ? retry[k.idx & ~kRetryBit].rec : drained_[k.idx];
    if (!Apply(rec, is_retry || stopping)) deferred_.push_back({rec, true});
  }

  uint64_t now = NowNs();
  ReleaseLingering(now, nullptr);
  std::vector<Context*> ctxs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ctxs = contexts_;
  }
  int64_t flush_s = Params::Int(ParamId::ProfileFlushS);
  for (Context* c : ctxs) {
    if (c->out != nullptr) c->out->FlushTrace();
    if (c->closing.load(std::memory_order_acquire)) {
      // Two passes after finalize: the second one settles records the first one deferred.
      if (++c->close_passes >= 2) FinishContext(c);
      continue;
    }
    if (flush_s > 0 && c->out != nullptr) {
      if (c->next_flush_ns == 0) c->next_flush_ns = now + static_cast<uint64_t>(flush_s) * 1000000000ull;
      if (now >= c->next_flush_ns) {
        c->out->WriteSnapshots(g_, false);
        c->next_flush_ns = now + static_cast<uint64_t>(flush_s) * 1000000000ull;
      }
    }
  }
}

bool Collector::Apply(const Record& r, bool last_try) {
  switch (r.op) {
    case RecOp::kBegin:
      return OnBegin(r, last_try);
    case RecOp::kState:
      if (OnState(r)) return true;
      break;
    case RecOp::kEnd:
      if (OnEnd(r)) return true;
      break;
  }
  if (!last_try) return false;
  ++g_.orphan_records;
  return true;
}

bool Collector::OnBegin(const Record& r, bool last_try) {
  Context* ctx = r.ctx;
  if (ctx == nullptr || ctx->closed.load(std::memory_order_acquire) || ctx->out == nullptr) {
    ++g_.orphan_records;
    return true;
  }
  EventRec* parent = nullptr;
  const Written* written = nullptr;
  if (r.parent != 0) {
    auto it = open_.find(r.parent);
    if (it != open_.end()) {
      parent = &it->second;
    } else {
      auto wit = written_.find(r.parent);
      if (wit != written_.end())
        written = &wit->second;
      else if (!last_try)
        return false;
    }
  }
  if (open_.size() >= kMaxOpen) {
    ++g_.dropped_open;
    return true;
  }
  EventRec ev;
  ev.ctx = ctx;
  ev.id = r.id;
  ev.parent_id = parent != nullptr ? r.parent : 0;
  ev.parent_lost = r.parent != 0 && parent == nullptr && written == nullptr;
  ev.type = r.type;
  ev.seq = ++ctx->next_seq;
  ev.visible = (ctx->visible_mask & static_cast<int>(r.type)) != 0;
  ev.rerail_net = handle::IsRerailNet(r.id);
  ev.begin_ns = ev.last_ns = r.ts;
  std::memcpy(ev.payload, r.payload, kPayloadBytes);
  if (parent != nullptr) {
    ev.vis_parent = parent->visible ? parent->seq : parent->vis_parent;
    ++parent->pending_children;
  } else if (written != nullptr) {
    ev.vis_parent = written->visible ? written->seq : written->vis_parent;
  }
  ev.track = TrackFor(ev, parent);
  if (parent == nullptr && written != nullptr && ev.type == RR_PROF_PROXY_STEP) ev.track = written->track;
  // Spans get a lane; instants (rerail point events) sit on lane 0 of their rail, at zero width.
  rrProfNetEvent_v1_t n;
  bool instant = NetDescr(ev, &n) && n.kind != RR_PROF_NET_EV_IO;
  if (ev.visible && !instant) lanes_.Place(&ev, parent != nullptr && parent->visible ? parent : nullptr);
  open_.emplace(r.id, std::move(ev));
  return true;
}

bool Collector::OnState(const Record& r) {
  auto it = open_.find(r.id);
  if (it == open_.end()) return false;
  EventRec& ev = it->second;
  if (ev.rerail_net && r.state == RR_PROF_STATE_NET_PLUGIN_UPDATE) {
    std::memcpy(ev.payload, r.payload, kPayloadBytes);  // the net plugin's updated descriptor
    return true;
  }
  uint64_t arg = 0;
  std::memcpy(&arg, r.payload, sizeof(arg));
  if (ev.type == RR_PROF_PROXY_CTRL) arg &= 0xffffffffu;  // appendedProxyOps is an int
  if (ev.states.size() < EventRec::kMaxStates) ev.states.push_back({r.state, r.ts, arg});
  return true;
}

bool Collector::OnEnd(const Record& r) {
  auto it = open_.find(r.id);
  if (it == open_.end()) return false;
  EventRec& ev = it->second;
  if (ev.stop_ns != 0) return true;  // a second stop of the same handle: ignore
  ev.stop_ns = r.ts;
  ev.last_ns = std::max(ev.last_ns, r.ts);
  if (Lingers(ev.type)) {
    lingering_.push_back(r.id);
    return true;
  }
  MaybeComplete(r.id);
  return true;
}

void Collector::MaybeComplete(uint64_t id) {
  auto it = open_.find(id);
  if (it == open_.end()) return;
  const EventRec& ev = it->second;
  if (ev.stop_ns == 0 || ev.pending_children != 0 || Lingers(ev.type)) return;
  Complete(id);
}

void Collector::Complete(uint64_t id) {
  // Iterative: completing a child may complete its (non-lingering) parent, and so on up the tree.
  while (id != 0) {
    auto it = open_.find(id);
    if (it == open_.end()) return;
    EventRec ev = std::move(it->second);
    open_.erase(it);
    lanes_.Leave(ev);
    if (ev.ctx->out != nullptr) ev.ctx->out->Emit(ev);
    Remember(ev);
    id = 0;
    if (ev.parent_id == 0) break;
    auto pit = open_.find(ev.parent_id);
    if (pit == open_.end()) break;
    EventRec& p = pit->second;
    if (p.pending_children > 0) --p.pending_children;
    p.last_ns = std::max(p.last_ns, ev.last_ns);
    if (p.stop_ns != 0 && p.pending_children == 0 && !Lingers(p.type)) id = ev.parent_id;
  }
}

void Collector::Remember(const EventRec& ev) {
  // Only events that can have children starting after they are written.
  if (!Lingers(ev.type) && ev.type != RR_PROF_PROXY_OP) return;
  if (written_order_.size() < kRecentWritten) {
    written_order_.push_back(ev.id);
  } else {
    written_.erase(written_order_[written_next_]);
    written_order_[written_next_] = ev.id;
    written_next_ = (written_next_ + 1) % kRecentWritten;
  }
  written_[ev.id] = Written{ev.seq, ev.vis_parent, ev.visible, ev.track};
}

void Collector::ReleaseLingering(uint64_t now, Context* only_closing) {
  // Children first: a Coll must complete (and extend its Group) before the Group is looked at.
  std::vector<uint64_t> keep;
  std::vector<uint64_t> ready;
  for (uint64_t id : lingering_) {
    auto it = open_.find(id);
    if (it == open_.end()) continue;
    const EventRec& ev = it->second;
    bool force = only_closing != nullptr && ev.ctx == only_closing;
    bool quiet = ev.pending_children == 0 && now >= ev.last_ns + linger_ns_;
    if (force || quiet)
      ready.push_back(id);
    else
      keep.push_back(id);
  }
  std::sort(ready.begin(), ready.end(), [this](uint64_t a, uint64_t b) {
    return open_.at(a).type > open_.at(b).type;  // Coll/P2p (2, 4) before Group (1)
  });
  for (uint64_t id : ready) {
    auto it = open_.find(id);
    if (it == open_.end()) continue;
    if (it->second.pending_children != 0 && only_closing == nullptr) {
      keep.push_back(id);
      continue;
    }
    Complete(id);
  }
  lingering_.swap(keep);
}

void Collector::FinishContext(Context* ctx) {
  if (ctx->closed.load(std::memory_order_acquire)) return;
  uint64_t now = NowNs();
  // Events NCCL never stopped: close them (deepest first, i.e. latest started first) as unfinished.
  std::vector<std::pair<uint64_t, uint64_t>> left;  // (seq, id)
  for (auto& [id, ev] : open_)
    if (ev.ctx == ctx && ev.stop_ns == 0) left.emplace_back(ev.seq, id);
  std::sort(left.rbegin(), left.rend());
  for (auto& [seq, id] : left) {
    EventRec& ev = open_.at(id);
    ev.unfinished = true;
    ev.stop_ns = std::max(ev.last_ns, now);
    ev.last_ns = ev.stop_ns;
    if (Lingers(ev.type)) lingering_.push_back(id);
  }
  for (auto& [seq, id] : left) MaybeComplete(id);
  ReleaseLingering(now, ctx);
  // Whatever is still open (a child count that never went to zero) is written rather than lost.
  std::vector<uint64_t> rest;
  for (auto& [id, ev] : open_)
    if (ev.ctx == ctx) rest.push_back(id);
  for (uint64_t id : rest) Complete(id);
  lanes_.Forget(ctx);
  if (ctx->out != nullptr) {
    ctx->out->WriteSnapshots(g_, true);
    RR_INFO_P(kP, log::kFlagInit, "rank %d comm %llx: %llu trace events written to %s", ctx->rank,
              static_cast<unsigned long long>(ctx->comm_id),
              static_cast<unsigned long long>(ctx->out->emitted()), ctx->out->trace_path().c_str());
    ctx->out.reset();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    contexts_.erase(std::remove(contexts_.begin(), contexts_.end(), ctx), contexts_.end());
    ctx->closed.store(true, std::memory_order_release);
  }
  done_.notify_all();
}

}  // namespace rr::prof
