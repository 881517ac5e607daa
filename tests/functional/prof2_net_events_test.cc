// The real net plugin emits rerail's net events through the profiler callback NCCL hands to init, and
// they land in the profiler's trace under NCCL's ProxyStep events. Both plugins come from one library,
// libnccl-net-rerail.so (NCCL's fallback when no profiler library is set, reference §1.3): the net side
// through rr::netdrv::NetPlugin, the profiler side through rr::prof::NcclEmu, over loopback.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "nccl_emu.h"
#include "net_loader.h"
#include "prof_test_util.h"

namespace {

using rr::netdrv::NetPlugin;
using rr::prof::NcclEmu;
using rr::prof::test::TraceIndex;

constexpr uint64_t kComm = 0x5052'4f46'3200'0001ull;
constexpr int kSteps = 6;
constexpr size_t kBytes = 300 * 1024;  // several chunks per message

struct Pair {
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  void* smh = nullptr;
  void* rmh = nullptr;
};

void Connect(NetPlugin* net, void* ctx, Pair* p) {
  char handle[128] = {};
  ASSERT_EQ(net->Listen(ctx, 0, handle, &p->listen), rrNcclSuccess);
  for (int i = 0; i < 200000 && (p->send == nullptr || p->recv == nullptr); ++i) {
    if (p->send == nullptr) {
      ASSERT_EQ(net->Connect(ctx, 0, handle, &p->send), rrNcclSuccess);
    }
    if (p->recv == nullptr) {
      ASSERT_EQ(net->Accept(p->listen, &p->recv), rrNcclSuccess);
    }
  }
  ASSERT_NE(p->send, nullptr);
  ASSERT_NE(p->recv, nullptr);
}

// One isend/irecv pair; phandles may be NULL (bootstrap-like traffic).
void Transfer(NetPlugin* net, Pair* p, std::vector<char>* src, std::vector<char>* dst, void* sph, void* rph) {
  void* rreq = nullptr;
  void* sreq = nullptr;
  void* data = dst->data();
  size_t size = dst->size();
  int tag = 0;
  void* rphs[1] = {rph};
  while (rreq == nullptr) ASSERT_EQ(net->Irecv(p->recv, 1, &data, &size, &tag, &p->rmh, rphs, &rreq), rrNcclSuccess);
  while (sreq == nullptr) ASSERT_EQ(net->Isend(p->send, src->data(), src->size(), 0, p->smh, sph, &sreq), rrNcclSuccess);
  int sdone = 0, rdone = 0, n = 0;
  while (!sdone || !rdone) {
    if (!sdone) {
      ASSERT_EQ(net->Test(sreq, &sdone, &n), rrNcclSuccess);
    }
    if (!rdone) {
      ASSERT_EQ(net->Test(rreq, &rdone, &n), rrNcclSuccess);
    }
  }
  ASSERT_EQ(static_cast<size_t>(n), src->size());
}

TEST(Prof2NetEvents, RealPluginIoSpansNestUnderProxyStepsAndNullParentsStartNothing) {
  setenv("RERAIL_TCP_IFNAME", "lo", 1);
  setenv("RERAIL_PROFILE_MASK", "coll,proxyop,proxystep,net", 1);
  std::string err;
  std::unique_ptr<NetPlugin> net = NetPlugin::Open(RERAIL_NET_SO, &err);
  ASSERT_NE(net, nullptr) << err;
  std::unique_ptr<NcclEmu> emu;
  ASSERT_TRUE(NcclEmu::Open(RERAIL_NET_SO, {kComm, "prof2", 1, 1, 0}, &emu).ok());
  void* ctx = nullptr;
  ASSERT_EQ(net->Init(&ctx, kComm, nullptr, reinterpret_cast<rrNcclProfilerCallback_t>(NcclEmu::NetCallback())),
            rrNcclSuccess);
  Pair p;
  ASSERT_NO_FATAL_FAILURE(Connect(net.get(), ctx, &p));
  std::vector<char> src(kBytes), dst(kBytes);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 1);
  ASSERT_EQ(net->RegMr(p.send, src.data(), src.size(), RR_NCCL_PTR_HOST, &p.smh), rrNcclSuccess);
  ASSERT_EQ(net->RegMr(p.recv, dst.data(), dst.size(), RR_NCCL_PTR_HOST, &p.rmh), rrNcclSuccess);

  // Bootstrap-like traffic first: NULL phandles must start nothing (NCCL would dereference them).
  ASSERT_NO_FATAL_FAILURE(Transfer(net.get(), &p, &src, &dst, nullptr, nullptr));

  void* g = emu->StartGroup();
  void* c = emu->StartColl(g, {"AllReduce", kBytes / 4, "ncclFloat32", "Ring", "Simple", 1});
  emu->Stop(c);
  emu->Stop(g);
  void* sop = emu->StartProxyOp(c, 0, 0, kSteps, static_cast<int>(kBytes), true);
  void* rop = emu->StartProxyOp(c, 0, 0, kSteps, static_cast<int>(kBytes), false);
  NcclEmu::ProxyStep ss[8], rs[8];
  for (int s = 0; s < kSteps; ++s) {
    emu->StartProxyStep(&ss[s % 8], sop, s);
    emu->StartProxyStep(&rs[s % 8], rop, s);
    ASSERT_NO_FATAL_FAILURE(Transfer(net.get(), &p, &src, &dst, &ss[s % 8], &rs[s % 8]));
    ASSERT_EQ(std::memcmp(src.data(), dst.data(), kBytes), 0);
    emu->StopProxyStep(&ss[s % 8]);
    emu->StopProxyStep(&rs[s % 8]);
  }
  emu->Stop(sop);
  emu->Stop(rop);
  ASSERT_EQ(net->DeregMr(p.send, p.smh), rrNcclSuccess);
  ASSERT_EQ(net->DeregMr(p.recv, p.rmh), rrNcclSuccess);
  ASSERT_EQ(net->CloseSend(p.send), rrNcclSuccess);
  ASSERT_EQ(net->CloseRecv(p.recv), rrNcclSuccess);
  ASSERT_EQ(net->CloseListen(p.listen), rrNcclSuccess);
  ASSERT_TRUE(emu->Finalize().ok());
  ASSERT_EQ(net->Finalize(ctx), rrNcclSuccess);

  nlohmann::json trace = rr::prof::test::LoadJson(rr::prof::test::Base(0, kComm) + ".trace.json");
  ASSERT_TRUE(trace.contains("traceEvents")) << "no trace written in " << rr::prof::test::ProcessDir();
  TraceIndex idx(trace);
  EXPECT_EQ(idx.Count("proxystep"), 2u * kSteps);
  ASSERT_EQ(idx.Count("net"), 2u * kSteps) << "one IO span per isend/irecv with a step handle, none without";
  int sends = 0, recvs = 0;
  for (uint64_t id : idx.by_cat.at("net")) {
    const auto& e = idx.At(id);
    EXPECT_EQ(e.at("ph"), "X");
    EXPECT_EQ(e.at("tid").get<int>() % 10000, 1000) << "rail 0 track: " << e.dump();
    EXPECT_EQ(e.at("args").at("kind"), "io");
    EXPECT_EQ(e.at("args").at("rail"), 0);
    EXPECT_EQ(e.at("args").at("bytes").get<uint64_t>(), kBytes) << e.dump();
    EXPECT_EQ(idx.Cat(idx.Parent(id)), "proxystep") << e.dump();
    (e.at("args").at("dir") == "send" ? sends : recvs)++;
  }
  EXPECT_EQ(sends, kSteps);
  EXPECT_EQ(recvs, kSteps);
}

}  // namespace
