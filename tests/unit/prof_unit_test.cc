// Unit tests of the profiler's building blocks: rings (drop-and-count), handle encoding, mask parsing,
// the latency histogram, the net event emitter's NULL-phandle rule, and the trace formatting of events.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "comm_output.h"
#include "event_model.h"
#include "event_ring.h"
#include "lanes.h"
#include "profiler.h"
#include "rerail/prof_net_event.h"
#include "trace_format.h"

namespace rr::prof {
namespace {

TEST(ProfRing, FullRingDropsAndCountsWithoutReordering) {
  Ring ring(1000, 3);  // rounded up to 1024
  EXPECT_EQ(ring.Capacity(), 1024u);
  for (int i = 0; i < 1500; ++i) {
    Record* r = ring.Claim();
    if (r == nullptr) continue;
    r->ts = static_cast<uint64_t>(i);
    ring.Publish();
  }
  EXPECT_EQ(ring.Dropped(), 1500u - 1024u);
  std::vector<Record> out;
  EXPECT_EQ(ring.Drain(&out), 1024u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].ts, i);
  EXPECT_TRUE(ring.Empty());
  ASSERT_NE(ring.Claim(), nullptr) << "space is reusable after a drain";
}

TEST(ProfRing, ConcurrentProducerAndConsumerLoseNothing) {
  Ring ring(1024, 1);
  constexpr uint64_t kN = 50000;
  uint64_t refused = 0;
  std::thread producer([&] {
    for (uint64_t i = 1; i <= kN;) {
      Record* r = ring.Claim();
      if (r == nullptr) {
        ++refused;  // a real caller drops here; this one retries so that the order can be checked
        std::this_thread::yield();
        continue;
      }
      r->ts = i++;
      ring.Publish();
    }
  });
  std::vector<Record> out;
  uint64_t expect = 1;
  while (expect <= kN) {
    out.clear();
    if (ring.Drain(&out) == 0) std::this_thread::yield();
    for (const Record& r : out) ASSERT_EQ(r.ts, expect++);
  }
  producer.join();
  EXPECT_EQ(ring.Dropped(), refused) << "every refused claim is counted";
}

TEST(ProfHandle, TypeAndRerailFlagSurviveTheRoundTrip) {
  for (int ti = 0; ti < 15; ++ti) {
    uint64_t id = handle::Make(123456789, 77, ti, ti == 7);
    EXPECT_NE(id, 0u);
    EXPECT_EQ(handle::TypeBit(id), 1u << ti);
    EXPECT_EQ(handle::IsRerailNet(id), ti == 7);
  }
  EXPECT_NE(handle::Make(1, 1, 1, false), handle::Make(1, 2, 1, false)) << "thread index separates ids";
}

TEST(ProfMask, NamesNumbersAndUnknownWords) {
  std::string bad;
  EXPECT_EQ(ParseMask("coll,p2p,proxyop,net", &bad),
            RR_PROF_COLL | RR_PROF_P2P | RR_PROF_PROXY_OP | RR_PROF_NET_PLUGIN);
  EXPECT_TRUE(bad.empty());
  EXPECT_EQ(ParseMask(" Group , KERNELCH ", &bad), RR_PROF_GROUP | RR_PROF_KERNEL_CH);
  EXPECT_EQ(ParseMask("all", &bad), (1 << 15) - 1);
  EXPECT_EQ(ParseMask("0x18", &bad), RR_PROF_PROXY_OP | RR_PROF_PROXY_STEP);
  EXPECT_EQ(ParseMask("netplugin", &bad), RR_PROF_NET_PLUGIN);
  EXPECT_TRUE(bad.empty());
  EXPECT_EQ(ParseMask("coll,bogus,proxystep,99999999", &bad), RR_PROF_COLL | RR_PROF_PROXY_STEP);
  EXPECT_EQ(bad, "bogus,99999999");
  EXPECT_EQ(ParseMask("", &bad), 0);
}

TEST(ProfTypes, IndexAndNames) {
  EXPECT_EQ(TypeIndex(RR_PROF_GROUP), 0);
  EXPECT_EQ(TypeIndex(RR_PROF_CE_BATCH), 14);
  EXPECT_EQ(TypeIndex(0), -1);
  EXPECT_EQ(TypeIndex(RR_PROF_COLL | RR_PROF_P2P), -1);
  EXPECT_EQ(TypeIndex(1u << 15), -1);
  EXPECT_STREQ(TypeName(RR_PROF_NET_PLUGIN), "net");
  EXPECT_EQ(StateName(RR_PROF_STATE_PROXY_STEP_SEND_WAIT), "SendWait");
  EXPECT_EQ(StateName(99), "state99");
}

TEST(ProfHist, BucketsAreUpperBoundsAndInfCatchesTheRest) {
  LatencyHist h;
  h.Add(10);   // == bound: first bucket
  h.Add(11);   // second
  h.Add(5e6);  // +Inf
  EXPECT_EQ(h.buckets[0], 1u);
  EXPECT_EQ(h.buckets[1], 1u);
  EXPECT_EQ(h.buckets[LatencyHist::kN], 1u);
  EXPECT_EQ(h.count, 3u);
  EXPECT_DOUBLE_EQ(h.sum_us, 10 + 11 + 5e6);
}

// A stand-in for NCCL's callback that records what the emitter asked for. (The emitter against the real
// profiler is exercised in tests/functional/prof_tree_test.cc.)
struct Call {
  int type;
  void* phandle;
  int64_t id;
  rrProfNetEvent_v1_t ev;
};
std::vector<Call> g_calls;
int g_next_handle = 1;
int Recorder(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData) {
  Call c{type, pHandle, pluginId, {}};
  if (extData != nullptr) std::memcpy(&c.ev, extData, sizeof(c.ev));
  g_calls.push_back(c);
  if (type == 0) *eHandle = reinterpret_cast<void*>(static_cast<intptr_t>(g_next_handle++));
  return 0;
}

TEST(ProfEmitter, PointEventsWaitForARealStepHandle) {
  g_calls.clear();
  NetEventEmitter em(Recorder);
  rrProfNetEvent_v1_t fo = MakeNetEvent(RR_PROF_NET_EV_FAILOVER, 2, "a-very-long-reason-that-does-not-fit");
  EXPECT_EQ(fo.size, sizeof(rrProfNetEvent_v1_t));
  EXPECT_EQ(fo.reason[sizeof(fo.reason) - 1], '\0');
  em.Post(fo);
  em.Flush(nullptr);
  rrProfNetEvent_v1_t io = MakeNetEvent(RR_PROF_NET_EV_IO, 2);
  EXPECT_EQ(em.StartIo(nullptr, &io), nullptr);
  EXPECT_TRUE(g_calls.empty()) << "nothing may reach NCCL without a step handle";
  int step = 0;
  void* h = em.StartIo(&step, &io);
  ASSERT_NE(h, nullptr);
  em.UpdateIo(h, &io);
  em.StopIo(h);
  ASSERT_EQ(g_calls.size(), 5u);  // failover start+stop, io start, update, stop
  EXPECT_EQ(g_calls[0].type, 0);
  EXPECT_EQ(g_calls[0].phandle, &step);
  EXPECT_EQ(g_calls[0].id, RR_PROF_NET_PLUGIN_ID);
  EXPECT_EQ(g_calls[0].ev.kind, RR_PROF_NET_EV_FAILOVER);
  EXPECT_EQ(g_calls[1].type, 1);
  EXPECT_EQ(g_calls[2].type, 0);
  EXPECT_EQ(g_calls[2].ev.kind, RR_PROF_NET_EV_IO);
  EXPECT_EQ(g_calls[3].type, 2);
  EXPECT_EQ(g_calls[4].type, 1);
  EXPECT_EQ(em.Delivered(), 1u);
  EXPECT_EQ(em.Pending(), 0u);
}

TEST(ProfEmitter, BoundedQueueDropsOldestAndCounts) {
  NetEventEmitter em(Recorder);
  for (size_t i = 0; i < NetEventEmitter::kMaxPending + 10; ++i)
    em.Post(MakeNetEvent(RR_PROF_NET_EV_RETRANSMIT, 0));
  EXPECT_EQ(em.Pending(), NetEventEmitter::kMaxPending);
  EXPECT_EQ(em.Dropped(), 10u);
  NetEventEmitter off(nullptr);
  off.Post(MakeNetEvent(RR_PROF_NET_EV_RETRANSMIT, 0));
  EXPECT_EQ(off.Pending(), 0u) << "no callback: nothing is queued";
  EXPECT_FALSE(off.Active());
}

TEST(ProfLanes, ChildrenNestOnTheirParentsLaneOverlapsGetNewLanes) {
  Context ctx;
  LaneMap lanes;
  auto ev = [&](uint64_t id, int track, uint64_t begin) {
    EventRec e;
    e.ctx = &ctx;
    e.id = id;
    e.track = track;
    e.begin_ns = e.last_ns = begin;
    return e;
  };
  EventRec op = ev(1, 100, 10), s1 = ev(2, 100, 20), s2 = ev(3, 100, 30), rail = ev(4, 1000, 25);
  lanes.Place(&op, nullptr);
  lanes.Place(&s1, &op);
  lanes.Place(&s2, &op);  // s1 still open: cannot nest beside it
  lanes.Place(&rail, &s1);  // other base track: its own lane 0
  EXPECT_EQ(op.lane, 0);
  EXPECT_EQ(s1.lane, 0);
  EXPECT_EQ(s1.depth, 1);
  EXPECT_EQ(s2.lane, 1);
  EXPECT_EQ(s2.depth, 0);
  EXPECT_EQ(rail.lane, 0);
  s1.last_ns = 40;
  lanes.Leave(s1);
  EventRec s3 = ev(5, 100, 35);  // starts before s1 ended: not on s1's level of lane 0
  lanes.Place(&s3, &op);
  EXPECT_EQ(s3.lane, 2);
  EventRec s4 = ev(6, 100, 45);  // after s1 ended: nests under op again
  lanes.Place(&s4, &op);
  EXPECT_EQ(s4.lane, 0);
  EXPECT_EQ(s4.depth, 1);
  EXPECT_EQ(track::Tid(100, 2), 20100);
  EXPECT_EQ(track::Name(20100), "proxy ch 0 recv #3");
  lanes.Forget(&ctx);
}

TEST(ProfFormat, FailoverIsAnInstantOnItsRailWithArguments) {
  Context ctx;
  ctx.rank = 3;
  EventRec ev;
  ev.ctx = &ctx;
  ev.type = RR_PROF_NET_PLUGIN;
  ev.seq = 9;
  ev.vis_parent = 4;
  ev.rerail_net = true;
  ev.visible = true;
  ev.track = track::kRailBase + 1;
  ev.begin_ns = 5000;
  rrProfNetEvent_v1_t fo = MakeNetEvent(RR_PROF_NET_EV_FAILOVER, 1, "link-down");
  fo.tsNs = 3000;
  fo.toRail = 0;
  fo.stallNs = 777;
  std::memcpy(ev.payload, &fo, sizeof(fo));
  nlohmann::json j = EventJson(ev, [](uint64_t ns) { return static_cast<double>(ns) / 1000.0; });
  EXPECT_EQ(j["ph"], "i");
  EXPECT_EQ(j["s"], "t");
  EXPECT_DOUBLE_EQ(j["ts"].get<double>(), 3.0) << "the time the net plugin stamped, not the delivery time";
  EXPECT_EQ(j["pid"], 3);
  EXPECT_EQ(j["tid"], 1001);
  EXPECT_EQ(j["name"], "failover");
  EXPECT_EQ(j["args"]["to_rail"], 0);
  EXPECT_EQ(j["args"]["stall_ns"], 777);
  EXPECT_EQ(j["args"]["reason"], "link-down");
  EXPECT_EQ(j["args"]["id"], 9);
  EXPECT_EQ(j["args"]["parent"], 4);
  EXPECT_EQ(track::Name(1001), "rail 1");
  EXPECT_EQ(track::Name(track::kProxyBase + 5), "proxy ch 2 send");
}

}  // namespace
}  // namespace rr::prof
