// Acceptance test of issue 6: drive libnccl-profiler-rerail.so through its ABI the way NCCL does, from
// several threads (an app thread, one proxy thread per channel, a proxy-control thread), with rerail net
// events created through the profiler callback, then check that the trace parses and holds exactly the
// expected events and nesting, and that summary and Prometheus textfile agree with what was driven.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "nccl_emu.h"
#include "prof_test_util.h"
#include "rerail/log.h"
#include "rerail/prof_net_event.h"

namespace rr::prof::test {
namespace {

constexpr int kGroups = 3, kCollsPerGroup = 2, kChannels = 2, kSteps = 4, kCtrl = 3;
constexpr uint64_t kChunk = 65536;

struct Queue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<void*> q;
  bool done = false;
  void Push(void* h) {
    std::lock_guard<std::mutex> l(mu);
    q.push_back(h);
    cv.notify_all();
  }
  void Close() {
    std::lock_guard<std::mutex> l(mu);
    done = true;
    cv.notify_all();
  }
  bool Pop(void** h) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [this] { return done || !q.empty(); });
    if (q.empty()) return false;
    *h = q.front();
    q.pop_front();
    return true;
  }
};

// One proxy operation with its steps; each step carries one rerail IO event on the channel's rail.
void RunProxyOp(NcclEmu* emu, NetEventEmitter* net, void* task, int ch, bool send) {
  void* op = emu->StartProxyOp(task, ch, 1 - ch, kSteps, kChunk, send);
  NcclEmu::ProxyStep slot[8];
  for (int s = 0; s < kSteps; ++s) {
    NcclEmu::ProxyStep* st = &slot[s % 8];
    emu->StartProxyStep(st, op, s);
    emu->StepState(st, send ? RR_PROF_STATE_PROXY_STEP_SEND_WAIT : RR_PROF_STATE_PROXY_STEP_RECV_WAIT, 0);
    rrProfNetEvent_v1_t io = MakeNetEvent(RR_PROF_NET_EV_IO, ch);
    io.flags = send ? RR_PROF_NET_FLAG_SEND : 0;
    io.peer = 1 - ch;
    void* h = net->StartIo(st, &io);  // the net plugin's isend/irecv with NCCL's phandle
    io.bytes = kChunk;
    net->UpdateIo(h, &io);
    net->StopIo(h);  // test() reported completion
    emu->StepState(st,
                   send ? RR_PROF_STATE_PROXY_STEP_SEND_PEER_WAIT : RR_PROF_STATE_PROXY_STEP_RECV_FLUSH_WAIT,
                   kChunk);
    emu->StopProxyStep(st);
  }
  emu->Stop(op);
}

class ProfTree : public ::testing::Test {
 protected:
  void SetUp() override {
    ProcessDir();  // exports RERAIL_PROFILE_DIR
    setenv("RERAIL_PROFILE_MASK", "all", 1);
  }
  std::unique_ptr<NcclEmu> Open(uint64_t comm, int version = 0) {
    std::unique_ptr<NcclEmu> emu;
    Status st = NcclEmu::Open(RERAIL_PROFILER_SO, {comm, "tree", 1, 2, 0}, &emu, version);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return emu;
  }
};

void RunWorkload(NcclEmu* emu, NetEventEmitter* net) {
  Queue per_channel[kChannels];
  std::vector<std::thread> proxies;
  for (int ch = 0; ch < kChannels; ++ch) {
    proxies.emplace_back([&, ch] {
      void* coll;
      while (per_channel[ch].Pop(&coll)) {
        void* k = emu->StartKernelCh(coll, ch, 1000 + ch);
        RunProxyOp(emu, net, coll, ch, true);
        RunProxyOp(emu, net, coll, ch, false);
        emu->StopKernelCh(k, 2000 + ch);
      }
    });
  }
  std::thread ctrl([&] {
    for (int i = 0; i < kCtrl; ++i) {
      void* c = emu->StartProxyCtrl();
      emu->ProxyCtrlState(c, RR_PROF_STATE_PROXY_CTRL_ACTIVE, 0);
      emu->ProxyCtrlState(c, RR_PROF_STATE_PROXY_CTRL_APPEND, i + 1);
      emu->ProxyCtrlState(c, RR_PROF_STATE_PROXY_CTRL_SLEEP, 0);
      emu->Stop(c);
    }
  });
  for (int g = 0; g < kGroups; ++g) {  // the app thread
    void* group = emu->StartGroup();
    std::vector<void*> colls;
    for (int c = 0; c < kCollsPerGroup; ++c) {
      NcclEmu::CollInfo info;
      info.count = kChunk * kSteps / 4;
      info.n_channels = kChannels;
      colls.push_back(emu->StartColl(group, info));
    }
    for (void* c : colls)
      for (int ch = 0; ch < kChannels; ++ch) per_channel[ch].Push(c);
    for (void* c : colls) emu->Stop(c);  // NCCL stops task events right after enqueue
    emu->Stop(group);
  }
  for (auto& q : per_channel) q.Close();
  for (auto& t : proxies) t.join();
  ctrl.join();
}

TEST_F(ProfTree, ThreadedEventTreeIsExactlyRecorded) {
  const uint64_t comm = 0x7ee0001;
  auto emu = Open(comm);
  ASSERT_TRUE(emu);
  EXPECT_EQ(emu->abi_version(), 6);
  EXPECT_STREQ(emu->plugin_name(), "rerail");
  EXPECT_EQ(emu->activation_mask(), (1 << 15) - 1);
  NetEventEmitter net(NcclEmu::NetCallback());
  rrProfNetEvent_v1_t fo = MakeNetEvent(RR_PROF_NET_EV_FAILOVER, 1, "link-down");
  fo.toRail = 0;
  fo.stallNs = 2500000;
  fo.bytes = 3 * kChunk;
  net.Post(fo);  // detected off the data path; delivered under the first step
  RunWorkload(emu.get(), &net);
  EXPECT_EQ(net.Delivered(), 1u);
  ASSERT_TRUE(emu->Finalize().ok());

  nlohmann::json trace = LoadJson(Base(0, comm) + ".trace.json");
  ASSERT_TRUE(trace.is_object()) << "trace must parse";
  TraceIndex t(trace);
  const size_t colls = kGroups * kCollsPerGroup, ops = colls * kChannels * 2, steps = ops * kSteps;
  EXPECT_EQ(t.Count("group"), size_t(kGroups));
  EXPECT_EQ(t.Count("coll"), colls);
  EXPECT_EQ(t.Count("kernelch"), colls * kChannels);
  EXPECT_EQ(t.Count("proxyop"), ops);
  EXPECT_EQ(t.Count("proxystep"), steps);
  EXPECT_EQ(t.Count("net"), steps + 1);
  EXPECT_EQ(t.Count("proxyctrl"), size_t(kCtrl));
  EXPECT_EQ(t.by_id.size(), kGroups + colls * (1 + kChannels) + ops + 2 * steps + 1 + kCtrl)
      << "nothing else";

  for (uint64_t g : t.by_cat["group"]) {
    EXPECT_EQ(t.Parent(g), 0u);
    EXPECT_EQ(t.children[g].size(), size_t(kCollsPerGroup));
  }
  for (uint64_t c : t.by_cat["coll"]) {
    EXPECT_EQ(t.Cat(t.Parent(c)), "group");
    EXPECT_EQ(t.At(c).at("name"), "AllReduce");
    EXPECT_EQ(t.children[c].size(), size_t(kChannels * 3)) << "2 ops + 1 kernelCh per channel";
    EXPECT_LE(t.End(c), t.End(t.Parent(c)) + 1e-3) << "group extent covers its collectives";
    for (uint64_t k : t.children[c])
      EXPECT_GE(t.End(c) + 1e-3, t.End(k)) << "coll extent covers its proxy ops";
  }
  for (uint64_t k : t.by_cat["kernelch"]) {
    EXPECT_EQ(t.Cat(t.Parent(k)), "coll");
    EXPECT_TRUE(t.At(k).at("args").contains("pTimerStop"));
  }
  for (uint64_t o : t.by_cat["proxyop"]) {
    EXPECT_EQ(t.Cat(t.Parent(o)), "coll");
    EXPECT_EQ(t.children[o].size(), size_t(kSteps));
    int ch = t.At(o).at("args").at("channel");
    bool send = t.At(o).at("name") == "ProxySend";
    EXPECT_EQ(t.At(o).at("tid"), 100 + ch * 2 + (send ? 1 : 0));
  }
  int with_failover = 0;
  for (uint64_t s : t.by_cat["proxystep"]) {
    EXPECT_EQ(t.Cat(t.Parent(s)), "proxyop");
    EXPECT_EQ(t.At(s).at("args").at("transSize"), kChunk);
    EXPECT_EQ(t.At(s).at("args").at("states").size(), 2u);
    size_t n = t.children[s].size();
    if (n == 2)
      ++with_failover;
    else
      EXPECT_EQ(n, 1u);
  }
  EXPECT_EQ(with_failover, 1);
  uint64_t bytes[2][2] = {};
  for (uint64_t n : t.by_cat["net"]) {
    const auto& e = t.At(n);
    EXPECT_EQ(t.Cat(t.Parent(n)), "proxystep");
    int rail = e.at("args").at("rail");
    EXPECT_EQ(e.at("tid"), 1000 + rail) << "one track per rail";
    if (e.at("name") == "io") {
      EXPECT_EQ(e.at("ph"), "X");
      bytes[rail][e.at("args").at("dir") == "send"] += e.at("args").at("bytes").get<uint64_t>();
    } else {
      EXPECT_EQ(e.at("name"), "failover");
      EXPECT_EQ(e.at("ph"), "i");
      EXPECT_EQ(rail, 1);
      EXPECT_EQ(e.at("args").at("to_rail"), 0);
      EXPECT_EQ(e.at("args").at("reason"), "link-down");
      EXPECT_EQ(e.at("args").at("stall_ns"), 2500000u);
    }
  }
  const uint64_t per_dir = colls * kSteps * kChunk;  // per rail: one channel, one op per direction per coll
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(bytes[r][0], per_dir);
    EXPECT_EQ(bytes[r][1], per_dir);
  }
  for (uint64_t c : t.by_cat["proxyctrl"]) EXPECT_EQ(t.Parent(c), 0u);
  std::string why;
  EXPECT_TRUE(t.TracksNest(&why)) << why;

  nlohmann::json sum = LoadJson(Base(0, comm) + ".summary.json");
  ASSERT_TRUE(sum.is_object());
  EXPECT_EQ(sum.at("format"), "rerail-profile-summary/1");
  EXPECT_TRUE(sum.at("final").get<bool>());
  EXPECT_EQ(sum.at("dropped_records"), 0u);
  EXPECT_EQ(sum.at("orphan_records"), 0u);
  EXPECT_EQ(sum.at("unfinished"), 0u);
  EXPECT_EQ(sum.at("parent_lost"), 0u);
  EXPECT_EQ(sum.at("rails").at("0").at("bytes_sent"), per_dir);
  EXPECT_EQ(sum.at("rails").at("1").at("bytes_recv"), per_dir);
  EXPECT_EQ(sum.at("rails").at("1").at("failovers"), 1u);
  EXPECT_EQ(sum.at("rails").at("1").at("stall_ns"), 2500000u);
  EXPECT_EQ(sum.at("collectives").at("AllReduce").at("count"), colls);
  EXPECT_EQ(sum.at("top_stalls").size(), 1u);

  std::string prom = LoadText(Base(0, comm) + ".prom");
  char comm_hex[32];
  std::snprintf(comm_hex, sizeof(comm_hex), "%016" PRIx64, comm);
  const std::string lbl = std::string("rank=\"0\",comm=\"") + comm_hex + "\"";
  EXPECT_NE(
      prom.find("rerail_rail_bytes_total{" + lbl + ",rail=\"0\",dir=\"send\"} " + std::to_string(per_dir)),
      std::string::npos)
      << prom;
  EXPECT_NE(prom.find("rerail_failovers_total{" + lbl + ",rail=\"1\"} 1"), std::string::npos);
  EXPECT_NE(prom.find("rerail_stall_seconds_total{" + lbl + ",rail=\"1\"} 0.0025"), std::string::npos);
  EXPECT_NE(prom.find("rerail_collective_latency_seconds_count{" + lbl + ",coll=\"AllReduce\"} " +
                      std::to_string(colls)),
            std::string::npos);
  EXPECT_NE(prom.find("rerail_retransmits_total"), std::string::npos);
}

TEST_F(ProfTree, FailoverInstantSitsOnItsRailBetweenTheCollectives) {
  const uint64_t comm = 0x7ee0002;
  auto emu = Open(comm, 5);
  ASSERT_TRUE(emu);
  EXPECT_EQ(emu->abi_version(), 5);
  NetEventEmitter net(NcclEmu::NetCallback());
  auto coll = [&](int rail) {
    void* g = emu->StartGroup();
    void* c = emu->StartColl(g, NcclEmu::CollInfo{});
    emu->Stop(c);
    emu->Stop(g);
    RunProxyOp(emu.get(), &net, c, rail, true);
  };
  coll(1);
  usleep(2000);
  rrProfNetEvent_v1_t fo = MakeNetEvent(RR_PROF_NET_EV_FAILOVER, 1, "rst");
  fo.toRail = 0;
  fo.stallNs = 1000;
  net.Post(fo);
  rrProfNetEvent_v1_t st = MakeNetEvent(RR_PROF_NET_EV_RAIL_STATE, 1);
  st.prevState = RR_PROF_RAIL_HEALTHY;
  st.state = RR_PROF_RAIL_FAILED;
  net.Post(st);
  usleep(2000);
  coll(0);  // traffic now on rail 0; the queued events ride on its first step
  ASSERT_TRUE(emu->Finalize().ok());

  TraceIndex t(LoadJson(Base(0, comm) + ".trace.json"));
  ASSERT_EQ(t.Count("coll"), 2u);
  uint64_t first = t.by_cat["coll"][0], second = t.by_cat["coll"][1];
  if (t.At(first).at("ts") > t.At(second).at("ts")) std::swap(first, second);
  int found = 0;
  for (uint64_t n : t.by_cat["net"]) {
    const auto& e = t.At(n);
    if (e.at("name") == "io") continue;
    ++found;
    EXPECT_EQ(e.at("tid"), 1001) << "on the failed rail's track";
    EXPECT_GT(e.at("ts").get<double>(), t.End(first));
    EXPECT_LT(e.at("ts").get<double>(), t.At(second).at("ts").get<double>());
    uint64_t anc = t.Parent(n);
    while (anc != 0 && t.Cat(anc) != "coll") anc = t.Parent(anc);
    EXPECT_EQ(anc, second) << "delivered under the next collective's step";
    if (e.at("name") == "rail-state") {
      EXPECT_EQ(e.at("args").at("state"), "failed");
      EXPECT_EQ(e.at("args").at("prev_state"), "healthy");
    }
  }
  EXPECT_EQ(found, 2);
  nlohmann::json sum = LoadJson(Base(0, comm) + ".summary.json");
  EXPECT_EQ(sum.at("rails").at("1").at("state"), "failed");
}

TEST_F(ProfTree, EventsNeverStoppedAreWrittenAsUnfinished) {
  const uint64_t comm = 0x7ee0003;
  auto emu = Open(comm);
  ASSERT_TRUE(emu);
  void* g = emu->StartGroup();
  void* c = emu->StartColl(g, NcclEmu::CollInfo{});
  void* op = emu->StartProxyOp(c, 0, 1, 1, 4096, true);
  emu->Stop(g);
  (void)op;  // op and coll never stopped (a comm aborted mid-collective)
  ASSERT_TRUE(emu->Finalize().ok());
  TraceIndex t(LoadJson(Base(0, comm) + ".trace.json"));
  ASSERT_EQ(t.Count("proxyop"), 1u);
  ASSERT_EQ(t.Count("coll"), 1u);
  EXPECT_TRUE(t.At(t.by_cat["proxyop"][0]).at("args").at("unfinished").get<bool>());
  EXPECT_TRUE(t.At(t.by_cat["coll"][0]).at("args").at("unfinished").get<bool>());
  EXPECT_EQ(t.Parent(t.by_cat["proxyop"][0]), t.by_cat["coll"][0]);
  EXPECT_EQ(LoadJson(Base(0, comm) + ".summary.json").at("unfinished"), 2u);
}

TEST_F(ProfTree, LateProxyOpStillNamesItsCollective) {
  const uint64_t comm = 0x7ee0005;
  auto emu = Open(comm);
  ASSERT_TRUE(emu);
  void* g = emu->StartGroup();
  void* c = emu->StartColl(g, NcclEmu::CollInfo{});
  emu->Stop(c);
  emu->Stop(g);
  // Long enough for the collective to be written before its proxy op starts (a GPU with a deep queue).
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  void* op = emu->StartProxyOp(c, 0, 1, 1, 4096, true);
  emu->Stop(op);
  ASSERT_TRUE(emu->Finalize().ok());
  TraceIndex t(LoadJson(Base(0, comm) + ".trace.json"));
  ASSERT_EQ(t.Count("proxyop"), 1u);
  uint64_t o = t.by_cat["proxyop"][0];
  EXPECT_EQ(t.Parent(o), t.by_cat["coll"][0]);
  EXPECT_FALSE(t.At(o).at("args").contains("parent_lost"));
}

TEST_F(ProfTree, OverlappingStepsGetLanesThatNest) {
  // NCCL keeps up to 8 steps of an op in flight; each rail carries several connections at once.
  const uint64_t comm = 0x7ee0008;
  auto emu = Open(comm);
  ASSERT_TRUE(emu);
  NetEventEmitter net(NcclEmu::NetCallback());
  void* g = emu->StartGroup();
  void* c = emu->StartColl(g, NcclEmu::CollInfo{});
  emu->Stop(c);
  emu->Stop(g);
  void* ops[2] = {emu->StartProxyOp(c, 0, 1, 4, kChunk, true), emu->StartProxyOp(c, 0, 1, 4, kChunk, true)};
  NcclEmu::ProxyStep slot[2][4];
  rrProfNetEvent_v1_t io[2][4];
  void* h[2][4];
  for (int s = 0; s < 4; ++s)  // both ops post all their steps before any completes
    for (int o = 0; o < 2; ++o) {
      emu->StartProxyStep(&slot[o][s], ops[o], s);
      io[o][s] = MakeNetEvent(RR_PROF_NET_EV_IO, 0);
      io[o][s].bytes = kChunk;
      h[o][s] = net.StartIo(&slot[o][s], &io[o][s]);
    }
  for (int s = 0; s < 4; ++s)
    for (int o = 0; o < 2; ++o) {
      net.StopIo(h[o][s]);
      emu->StopProxyStep(&slot[o][s]);
    }
  emu->Stop(ops[0]);
  emu->Stop(ops[1]);
  ASSERT_TRUE(emu->Finalize().ok());
  nlohmann::json trace = LoadJson(Base(0, comm) + ".trace.json");
  TraceIndex t(trace);
  std::string why;
  EXPECT_TRUE(t.TracksNest(&why)) << why;
  std::set<int> rail_tids, op_tids;
  for (uint64_t n : t.by_cat["net"]) rail_tids.insert(t.At(n).at("tid").get<int>());
  for (uint64_t s : t.by_cat["proxystep"]) op_tids.insert(t.At(s).at("tid").get<int>());
  EXPECT_EQ(rail_tids.size(), 8u) << "8 IO spans in flight together on rail 0: 8 lanes";
  EXPECT_EQ(*rail_tids.begin(), 1000) << "lane 0 keeps the rail's own track";
  EXPECT_GE(op_tids.size(), 8u);
  std::set<std::string> names;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name")
      names.insert(e.at("args").at("name").get<std::string>());
  EXPECT_TRUE(names.count("rail 0"));
  EXPECT_TRUE(names.count("rail 0 #8"));
}

TEST_F(ProfTree, P2pTreeUnderItsGroup) {
  const uint64_t comm = 0x7ee0006;
  auto emu = Open(comm);
  ASSERT_TRUE(emu);
  NetEventEmitter net(NcclEmu::NetCallback());
  void* g = emu->StartGroup();
  void* send = emu->StartP2p(g, "Send", 1, 4096, "ncclInt8", 1);
  void* recv = emu->StartP2p(g, "Recv", 1, 4096, "ncclInt8", 1);
  emu->Stop(send);
  emu->Stop(recv);
  emu->Stop(g);
  RunProxyOp(emu.get(), &net, send, 0, true);
  RunProxyOp(emu.get(), &net, recv, 0, false);
  ASSERT_TRUE(emu->Finalize().ok());
  TraceIndex t(LoadJson(Base(0, comm) + ".trace.json"));
  ASSERT_EQ(t.Count("p2p"), 2u);
  ASSERT_EQ(t.Count("group"), 1u);
  for (uint64_t p : t.by_cat["p2p"]) {
    EXPECT_EQ(t.Parent(p), t.by_cat["group"][0]);
    EXPECT_EQ(t.At(p).at("args").at("peer"), 1);
    EXPECT_EQ(t.At(p).at("args").at("count"), 4096);
    ASSERT_EQ(t.children[p].size(), 1u);
    uint64_t op = t.children[p][0];
    EXPECT_EQ(t.At(op).at("name"), t.At(p).at("name") == "Send" ? "ProxySend" : "ProxyRecv");
  }
  EXPECT_EQ(t.Count("net"), size_t(2 * kSteps));
}

TEST_F(ProfTree, V6CopyEngineEventsThroughTheRawTable) {
  // NcclEmu does not emulate NCCL 2.30's copy-engine collectives; call the v6 table directly.
  void* lib = dlopen(RERAIL_PROFILER_SO, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto* v6 = static_cast<const rrProfiler_v6_t*>(dlsym(lib, "ncclProfiler_v6"));
  ASSERT_NE(v6, nullptr);
  const uint64_t comm = 0x7ee0007;
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(v6->init(&ctx, comm, &mask, "ce", 1, 1, 0, nullptr), 0);
  EXPECT_TRUE(mask & RR_PROF_CE_COLL);
  rrProfEventDescr_v6_t d;
  std::memset(&d, 0, sizeof(d));
  d.type = RR_PROF_CE_COLL;
  d.ceColl.func = "AllGather";
  d.ceColl.count = 1 << 20;
  d.ceColl.datatype = "ncclBfloat16";
  d.ceColl.syncStrategy = "batched";
  d.ceColl.batchSize = 4;
  void* ce = nullptr;
  ASSERT_EQ(v6->startEvent(ctx, &ce, &d), 0);
  ASSERT_NE(ce, nullptr);
  std::memset(&d, 0, sizeof(d));
  d.type = RR_PROF_CE_BATCH;
  d.parentObj = ce;
  d.ceBatch.numOps = 3;
  d.ceBatch.totalBytes = 3 << 20;
  void* batch = nullptr;
  ASSERT_EQ(v6->startEvent(ctx, &batch, &d), 0);
  d.type = 1u << 20;  // not an event type: ignored, NULL handle
  void* bogus = &d;
  ASSERT_EQ(v6->startEvent(ctx, &bogus, &d), 0);
  EXPECT_EQ(bogus, nullptr);
  EXPECT_EQ(v6->stopEvent(batch), 0);
  EXPECT_EQ(v6->stopEvent(ce), 0);
  EXPECT_EQ(v6->finalize(ctx), 0);
  TraceIndex t(LoadJson(Base(0, comm) + ".trace.json"));
  ASSERT_EQ(t.Count("cecoll"), 1u);
  ASSERT_EQ(t.Count("cebatch"), 1u);
  uint64_t c = t.by_cat["cecoll"][0];
  EXPECT_EQ(t.At(c).at("name"), "CE AllGather");
  EXPECT_EQ(t.At(c).at("args").at("syncStrategy"), "batched");
  EXPECT_EQ(t.Parent(t.by_cat["cebatch"][0]), c);
  EXPECT_EQ(t.At(t.by_cat["cebatch"][0]).at("args").at("totalBytes"), 3u << 20);
}

TEST_F(ProfTree, NullAndForeignInputsAreHarmless) {
  const uint64_t comm = 0x7ee0004;
  auto emu = Open(comm);
  ASSERT_TRUE(emu);
  emu->Stop(nullptr);
  emu->ProxyCtrlState(nullptr, RR_PROF_STATE_PROXY_CTRL_IDLE, 0);
  // The callback refuses a NULL phandle instead of crashing, and says so.
  std::vector<std::string> warns;
  log::SetCapture([&](log::Level l, const std::string& s) {
    if (l == log::Level::kWarn) warns.push_back(s);
  });
  void* h = nullptr;
  rrProfNetEvent_v1_t ev = MakeNetEvent(RR_PROF_NET_EV_FAILBACK, 0);
  EXPECT_NE(NcclEmu::NetCallback()(&h, 0, nullptr, RR_PROF_NET_PLUGIN_ID, &ev), 0);
  log::SetCapture(nullptr);
  EXPECT_EQ(h, nullptr);
  ASSERT_EQ(warns.size(), 1u);
  EXPECT_NE(warns[0].find("NULL phandle"), std::string::npos);
  // The emitter never passes a NULL phandle: the event stays queued until a real step comes.
  NetEventEmitter net(NcclEmu::NetCallback());
  net.Post(ev);
  EXPECT_EQ(net.StartIo(nullptr, &ev), nullptr);
  net.Flush(nullptr);
  EXPECT_EQ(net.Pending(), 1u);
  EXPECT_EQ(net.Delivered(), 0u);
  ASSERT_TRUE(emu->Finalize().ok());
  EXPECT_EQ(LoadJson(Base(0, comm) + ".summary.json").at("orphan_records"), 0u);
}

}  // namespace
}  // namespace rr::prof::test
