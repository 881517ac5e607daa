#include "plan.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "pattern.h"
#include "rerail/clock.h"

namespace rr::netbench {

Plan Plan::Mirror() const {
  Plan m = *this;
  m.dir = dir == "send" ? "recv" : (dir == "recv" ? "send" : "both");
  m.initiator = !initiator;
  m.delay_ms = 0;
  return m;
}

nlohmann::json Plan::ToJson() const {
  return {{"dir", dir},
          {"comms", comms},
          {"nmsgs", nmsgs},
          {"sizes", sizes},
          {"rand_max", rand_max},
          {"seed", seed},
          {"window", window},
          {"cap_extra", cap_extra},
          {"offset", offset},
          {"null_sizes", null_sizes},
          {"preset", preset},
          {"verify", verify},
          {"initiator", initiator},
          {"timeout_ms", timeout_ms},
          {"delay_ms", delay_ms}};
}

Plan Plan::FromJson(const nlohmann::json& j) {
  Plan p;
  p.dir = j.at("dir").get<std::string>();
  p.comms = j.at("comms").get<std::vector<int>>();
  p.nmsgs = j.at("nmsgs").get<uint64_t>();
  p.sizes = j.at("sizes").get<std::vector<uint64_t>>();
  p.rand_max = j.at("rand_max").get<uint64_t>();
  p.seed = j.at("seed").get<uint64_t>();
  p.window = j.at("window").get<int>();
  p.cap_extra = j.at("cap_extra").get<uint64_t>();
  p.offset = j.at("offset").get<uint64_t>();
  p.null_sizes = j.at("null_sizes").get<bool>();
  p.preset = j.at("preset").get<int>();
  p.verify = j.at("verify").get<bool>();
  p.initiator = j.at("initiator").get<bool>();
  p.timeout_ms = j.at("timeout_ms").get<uint64_t>();
  p.delay_ms = j.value("delay_ms", uint64_t{0});
  return p;
}

uint64_t PlanSize(const Plan& p, int comm, uint64_t m) {
  if (!p.sizes.empty()) return p.sizes[m % p.sizes.size()];
  return Mix(p.seed ^ (0x51ce5ull << 20) ^ static_cast<uint64_t>(comm), m) % (p.rand_max + 1);
}

uint64_t PlanMaxSize(const Plan& p) {
  uint64_t mx = p.rand_max;
  for (uint64_t s : p.sizes) mx = s > mx ? s : mx;
  return mx;
}

uint64_t ContentSeed(const Plan& p, int comm, bool from_initiator) {
  return Mix(p.seed, static_cast<uint64_t>(comm) * 2 + (from_initiator ? 0 : 1));
}

namespace {

constexpr unsigned char kPoison = 0xA5;

// One comm in one direction.
struct Lane {
  bool send;
  int comm;
  void* comm_ptr;
  ReqQueue q;
  std::unique_ptr<char[]> buf;
  size_t slot_cap = 0;
  int slots = 1;
  void* mh = nullptr;
  uint64_t seed = 0;
  uint64_t next_post = 0;
  uint64_t next_done = 0;
  Lane(netdrv::NetPlugin* net, bool s, int c, void* cp, int window)
      : send(s), comm(c), comm_ptr(cp), q(net, cp, s, window) {}
  char* Slot(const Plan& p, uint64_t m) { return buf.get() + (m % slots) * slot_cap + p.offset; }
};

std::string LaneName(const Lane& l) {
  return std::string(l.send ? "send" : "recv") + " comm " + std::to_string(l.comm);
}

// Order and reported size: checked the moment test() reports the receive done.
Status VerifyCompletion(const Plan& p, const Lane& l, const ReqQueue::Done& d) {
  uint64_t size = PlanSize(p, l.comm, d.msg);
  std::string where = LaneName(l) + " msg " + std::to_string(d.msg) + " (" + std::to_string(size) + " B)";
  if (d.msg != l.next_done) return Status::Internal(where + ": completed out of order");
  if (!p.null_sizes && static_cast<uint64_t>(d.size) != size)
    return Status::Internal(where + ": test() reported size " + std::to_string(d.size));
  return Status::Ok();
}

// Bytes: exact content, and nothing written past the message when the capacity is larger.
Status VerifyContent(const Plan& p, Lane& l, uint64_t msg) {
  if (!p.verify) return Status::Ok();
  uint64_t size = PlanSize(p, l.comm, msg);
  std::string where = LaneName(l) + " msg " + std::to_string(msg) + " (" + std::to_string(size) + " B)";
  const char* slot = l.Slot(p, msg);
  size_t bad = Check(slot, size, l.seed, msg);
  if (bad != size) {
    return Status::Internal(where + ": corrupt byte at offset " + std::to_string(bad) + " (got 0x" +
                            std::to_string(static_cast<unsigned char>(slot[bad])) + ")");
  }
  for (uint64_t i = 0; i < p.cap_extra; ++i) {
    if (static_cast<unsigned char>(slot[size + i]) != kPoison)
      return Status::Internal(where + ": plugin wrote past the message, at offset " +
                              std::to_string(size + i));
  }
  return Status::Ok();
}

// Content of message m goes into its slot before the loop when no slot is reused, so the progress loop
// never stops for long (NCCL's proxy does not either); reused slots are prepared when posted.
void PrepareSlot(const Plan& p, Lane& l, uint64_t m) {
  uint64_t size = PlanSize(p, l.comm, m);
  if (l.send)
    Fill(l.Slot(p, m), size, l.seed, m);
  else
    std::memset(l.Slot(p, m), kPoison, size + p.cap_extra);
}

Status PostOne(const Plan& p, Lane& l, bool* posted) {
  uint64_t m = l.next_post;
  uint64_t size = PlanSize(p, l.comm, m);
  char* slot = l.Slot(p, m);
  if (p.verify && m >= static_cast<uint64_t>(l.slots)) PrepareSlot(p, l, m);
  if (l.send) return l.q.Post(slot, size, /*tag=*/l.comm, l.mh, m, posted);
  void* preset = p.preset == 1 ? reinterpret_cast<void*>(0x1)
                               : (p.preset == 2 ? reinterpret_cast<void*>(0xdead0000beefull) : nullptr);
  return l.q.Post(slot, size + p.cap_extra, l.comm, l.mh, m, posted, preset);
}

Status SetupLanes(netdrv::NetPlugin& net, const Plan& p, const std::vector<void*>& sc,
                  const std::vector<void*>& rc, std::vector<std::unique_ptr<Lane>>* lanes) {
  bool do_send = p.dir != "recv", do_recv = p.dir != "send";
  for (int c : p.comms) {
    for (int s = 0; s < 2; ++s) {
      bool send = s == 0;
      if ((send && !do_send) || (!send && !do_recv)) continue;
      const auto& list = send ? sc : rc;
      if (c < 0 || static_cast<size_t>(c) >= list.size() || list[c] == nullptr)
        return Status::Internal("plan names " + std::string(send ? "send" : "recv") + " comm " +
                                std::to_string(c) + " which does not exist");
      auto l = std::make_unique<Lane>(&net, send, c, list[c], p.window);
      l->slots =
          static_cast<int>(p.nmsgs < static_cast<uint64_t>(p.window) ? (p.nmsgs ? p.nmsgs : 1) : p.window);
      l->slot_cap = (PlanMaxSize(p) + p.cap_extra + p.offset + 63) & ~size_t{63};
      if (l->slot_cap == 0) l->slot_cap = 64;
      size_t total = l->slot_cap * l->slots;
      l->buf.reset(new char[total]);
      l->seed = ContentSeed(p, c, send == p.initiator);
      if (!p.verify) std::memset(l->buf.get(), 0x3c, total);
      for (uint64_t m = 0; p.verify && m < p.nmsgs && m < static_cast<uint64_t>(l->slots); ++m)
        PrepareSlot(p, *l, m);
      RR_CHECK(FromNccl(net.RegMr(l->comm_ptr, l->buf.get(), total, RR_NCCL_PTR_HOST, &l->mh),
                        "regMr " + LaneName(*l)));
      lanes->push_back(std::move(l));
    }
  }
  return Status::Ok();
}

std::string Progress(const Plan& p, const std::vector<std::unique_ptr<Lane>>& lanes) {
  std::string s;
  for (const auto& l : lanes) {
    if (l->next_done == p.nmsgs) continue;
    s += " [" + LaneName(*l) + ": " + std::to_string(l->next_done) + " done, " +
         std::to_string(l->q.outstanding()) + " outstanding]";
  }
  return s;
}

Status Drive(const Plan& p, std::vector<std::unique_ptr<Lane>>& lanes, PlanResult* res) {
  Deadline dl = Deadline::AfterMs(p.timeout_ms);
  size_t finished = 0;
  if (p.nmsgs == 0) finished = lanes.size();
  while (finished < lanes.size()) {
    bool progress = false;
    for (auto& lp : lanes) {
      Lane& l = *lp;
      while (l.next_post < p.nmsgs && !l.q.full()) {
        bool posted = false;
        RR_CHECK(PostOne(p, l, &posted));
        if (!posted) break;
        ++l.next_post, progress = true;
      }
      bool done = false;
      ReqQueue::Done d{};
      RR_CHECK(l.q.TestOldest(&done, &d, !l.send && p.null_sizes));
      if (!done) continue;
      progress = true;
      uint64_t size = PlanSize(p, l.comm, d.msg);
      if (!l.send) {
        RR_CHECK(VerifyCompletion(p, l, d));
        // Slots not reused: check the bytes after the loop, keeping the progress loop tight.
        if (p.nmsgs > static_cast<uint64_t>(l.slots)) RR_CHECK(VerifyContent(p, l, d.msg));
      }
      (l.send ? res->bytes_sent : res->bytes_received) += size;
      ++res->messages;
      if (++l.next_done == p.nmsgs) ++finished;
    }
    if (progress) continue;
    if (dl.Expired())
      return Status::Internal("traffic timed out after " + std::to_string(p.timeout_ms) +
                              " ms:" + Progress(p, lanes));
    sched_yield();  // an idle pass: NCCL's progress loop yields here too
  }
  return Status::Ok();
}

}  // namespace

Status RunPlan(netdrv::NetPlugin& net, const Plan& plan, const std::vector<void*>& send_comms,
               const std::vector<void*>& recv_comms, PlanResult* result) {
  *result = PlanResult{};
  if (plan.window < 1 || plan.window > RR_NCCL_NET_MAX_REQUESTS)
    return Status::InvalidArg("plan window must be 1..32");
  std::vector<std::unique_ptr<Lane>> lanes;
  Status st = SetupLanes(net, plan, send_comms, recv_comms, &lanes);
  if (plan.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(plan.delay_ms));
  uint64_t t0 = NowNs();
  if (st.ok()) st = Drive(plan, lanes, result);
  result->seconds = static_cast<double>(NowNs() - t0) * 1e-9;
  for (auto& l : lanes) {
    if (!st.ok() || l->send || plan.nmsgs > static_cast<uint64_t>(l->slots)) continue;
    for (uint64_t m = 0; m < plan.nmsgs && st.ok(); ++m) st = VerifyContent(plan, *l, m);
  }
  for (auto& l : lanes) {
    // After an error requests may still be outstanding and the plugin may still write into their
    // buffers until the comm is closed: keep that memory (a deliberate leak on the error path only).
    if (!st.ok() && l->q.outstanding() > 0) (void)l->buf.release();
    if (l->mh == nullptr) continue;
    if (st.ok()) {
      Status d = FromNccl(net.DeregMr(l->comm_ptr, l->mh), "deregMr " + LaneName(*l));
      if (!d.ok()) st = d;
    }
  }
  return st;
}

}  // namespace rr::netbench

namespace rr::netbench {

static Status WaitDone(ReqQueue& q, const Deadline& dl, const char* what) {
  for (uint64_t spins = 0;; ++spins) {
    bool done = false;
    ReqQueue::Done d{};
    RR_CHECK(q.TestOldest(&done, &d));
    if (done) return Status::Ok();
    if ((spins & 1023) == 0 && dl.Expired())
      return Status::Internal(std::string("ping-pong: timed out in ") + what);
    sched_yield();  // an idle pass: NCCL's progress loop yields here too (proxy.cc, `if (idle)
                    // sched_yield()`)
  }
}

static Status PostRetry(ReqQueue& q, void* buf, size_t size, void* mh, uint64_t m, const Deadline& dl) {
  for (;;) {
    bool posted = false;
    RR_CHECK(q.Post(buf, size, 0, mh, m, &posted));
    if (posted) return Status::Ok();
    if (dl.Expired()) return Status::Internal("ping-pong: plugin never accepted the request");
  }
}

RttStats SummariseRtts(uint64_t t0, uint64_t end, uint64_t iters, std::vector<uint64_t>* rtts) {
  RttStats r;
  r.mean_us = iters ? static_cast<double>(end - t0) * 1e-3 / static_cast<double>(iters) : 0;
  r.in_order = *rtts;
  if (!rtts->empty()) {
    std::sort(rtts->begin(), rtts->end());
    auto at = [rtts](double q) { return static_cast<double>((*rtts)[static_cast<size_t>(q * static_cast<double>(rtts->size() - 1))]) * 1e-3; };
    r.p50_us = static_cast<double>((*rtts)[rtts->size() / 2]) * 1e-3;
    r.p90_us = at(0.90);
    r.p99_us = at(0.99);
    r.max_us = static_cast<double>(rtts->back()) * 1e-3;
  }
  return r;
}

Status PingPong(netdrv::NetPlugin& net, void* send_comm, void* recv_comm, size_t size, uint64_t warmup,
                uint64_t iters, bool initiator, uint64_t timeout_ms, RttStats* rtt) {
  std::vector<char> sbuf(size + 64, 0x11), rbuf(size + 64, 0);
  void *smh = nullptr, *rmh = nullptr;
  RR_CHECK(FromNccl(net.RegMr(send_comm, sbuf.data(), sbuf.size(), RR_NCCL_PTR_HOST, &smh), "regMr send"));
  RR_CHECK(FromNccl(net.RegMr(recv_comm, rbuf.data(), rbuf.size(), RR_NCCL_PTR_HOST, &rmh), "regMr recv"));
  ReqQueue sq(&net, send_comm, true, 1), rq(&net, recv_comm, false, 1);
  Deadline dl = Deadline::AfterMs(timeout_ms);
  std::vector<uint64_t> rtts;
  rtts.reserve(iters);
  uint64_t t0 = 0, tm = 0;
  Status st;
  for (uint64_t m = 0; m < warmup + iters && st.ok(); ++m) {
    uint64_t now = NowNs();
    if (m == warmup) t0 = now;
    if (m > warmup) rtts.push_back(now - tm);
    tm = now;
    // The receive is posted before it is needed and off the round trip's critical path, as NCCL's
    // proxy posts its receives ahead of the data: the responder before it waits, the initiator once its
    // send is on the way (the reply cannot come before it), as the raw reference reads after writing.
    if (!initiator) {
      st = PostRetry(rq, rbuf.data(), size, rmh, m, dl);
      if (st.ok()) st = WaitDone(rq, dl, "recv");
    }
    if (st.ok()) st = PostRetry(sq, sbuf.data(), size, smh, m, dl);
    if (st.ok() && initiator) st = PostRetry(rq, rbuf.data(), size, rmh, m, dl);
    if (st.ok()) st = WaitDone(sq, dl, "send");
    if (st.ok() && initiator) st = WaitDone(rq, dl, "recv");
  }
  uint64_t end = NowNs();
  rtts.push_back(end - tm);
  *rtt = SummariseRtts(t0, end, iters, &rtts);
  if (st.ok()) st = FromNccl(net.DeregMr(send_comm, smh), "deregMr send");
  if (st.ok()) st = FromNccl(net.DeregMr(recv_comm, rmh), "deregMr recv");
  if (!st.ok()) {
    // Requests may be outstanding: leave their buffers to the process (error path only).
    new std::vector<char>(std::move(sbuf));
    new std::vector<char>(std::move(rbuf));
  }
  return st;
}

}  // namespace rr::netbench
