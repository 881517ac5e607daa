// One rank of a synthetic job for the multi-process profiler test: loads the profiler through NcclEmu and
// runs `--colls` AllReduce collectives, each with one send and one receive proxy operation per rail
// (channel c uses rail c). With --fail-rail R the rank reports, between collective 0 and 1, that rail R
// failed (stall --stall-us) and its traffic moved to the other rail, which carries everything from then on.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "nccl_emu.h"
#include "rerail/prof_net_event.h"

namespace {

using rr::prof::NcclEmu;
using rr::prof::NetEventEmitter;

void ProxyOp(NcclEmu* emu, NetEventEmitter* net, void* coll, int ch, int rail, int peer, bool send,
             int steps) {
  void* op = emu->StartProxyOp(coll, ch, peer, steps, 1 << 16, send);
  NcclEmu::ProxyStep slot;
  for (int s = 0; s < steps; ++s) {
    emu->StartProxyStep(&slot, op, s);
    rrProfNetEvent_v1_t io = rr::prof::MakeNetEvent(RR_PROF_NET_EV_IO, rail);
    io.flags = send ? RR_PROF_NET_FLAG_SEND : 0;
    io.peer = peer;
    io.bytes = 1 << 16;
    void* h = net->StartIo(&slot, &io);
    usleep(100);
    net->StopIo(h);
    emu->StopProxyStep(&slot);
  }
  emu->Stop(op);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rerail profiler test rank"};
  int rank = 0, nranks = 2, colls = 3, fail_rail = -1, steps = 4;
  uint64_t comm = 0xc0ffee;
  int64_t stall_us = 1500;
  app.add_option("--rank", rank)->required();
  app.add_option("--nranks", nranks);
  app.add_option("--comm", comm);
  app.add_option("--colls", colls)->check(CLI::Range(2, 1000));
  app.add_option("--steps", steps)->check(CLI::Range(1, 1000));
  app.add_option("--fail-rail", fail_rail)->check(CLI::Range(0, 1));
  app.add_option("--stall-us", stall_us);
  std::string lib;
  app.add_option("--profiler", lib, "profiler library to load")->required();
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<NcclEmu> emu;
  rr::Status st = NcclEmu::Open(lib, {comm, "job", nranks, nranks, rank}, &emu);
  if (!st.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, st.ToString().c_str());
    return 1;
  }
  NetEventEmitter net(NcclEmu::NetCallback());
  const int peer = (rank + 1) % nranks;
  bool failed = false;
  for (int c = 0; c < colls; ++c) {
    if (c == 1 && fail_rail >= 0) {
      rrProfNetEvent_v1_t fo = rr::prof::MakeNetEvent(RR_PROF_NET_EV_FAILOVER, fail_rail, "link-down");
      fo.toRail = 1 - fail_rail;
      fo.peer = peer;
      fo.stallNs = static_cast<uint64_t>(stall_us) * 1000;
      fo.bytes = 3 << 16;
      fo.count = 3;
      net.Post(fo);
      failed = true;
    }
    void* g = emu->StartGroup();
    NcclEmu::CollInfo info;
    info.count = 1 << 20;
    info.n_channels = 2;
    void* coll = emu->StartColl(g, info);
    emu->Stop(coll);
    emu->Stop(g);
    for (int ch = 0; ch < 2; ++ch) {
      int rail = failed && ch == fail_rail ? 1 - fail_rail : ch;
      ProxyOp(emu.get(), &net, coll, ch, rail, peer, true, steps);
      ProxyOp(emu.get(), &net, coll, ch, rail, peer, false, steps);
    }
  }
  st = emu->Finalize();
  if (!st.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, st.ToString().c_str());
    return 1;
  }
  return 0;
}
