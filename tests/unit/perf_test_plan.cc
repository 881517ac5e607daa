// rerail-perf unit tests: the NCCL schedules (plan.h) match send for send between peers, move the
// right data (checked by an in-memory interpreter + the verifier), and the small parsers/timeline.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "options.h"
#include "plan.h"
#include "timeline.h"
#include "verify.h"

namespace rr::perf {
namespace {

// memcpy/memmove of 0 bytes from or to an empty vector's NULL data() is undefined (UBSan: nonnull).
void Copy(void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}
void Move(void* dst, const void* src, size_t n) {
  if (n > 0) std::memmove(dst, src, n);
}

const Coll kAll[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter,
                     Coll::kBroadcast, Coll::kSendRecv,  Coll::kAllToAll};

std::vector<Plan> PlansFor(Coll c, size_t size, int n, int ch, bool in_place, int root = 0) {
  std::vector<Plan> plans;
  for (int r = 0; r < n; ++r) plans.push_back(BuildPlan({c, size, 4, n, r, ch, root % n, in_place}));
  return plans;
}

// Byte sizes of the messages a rank sends (or expects) on one connection, in order.
std::vector<size_t> Messages(const Plan& p, const ConnKey& k) {
  std::vector<size_t> out;
  for (const Stream& s : p.streams)
    for (const Elem& e : s.elems) {
      int ci = k.send ? (NeedsSend(e.op) ? s.send_conn : -1) : (NeedsRecv(e.op) ? s.recv_conn : -1);
      if (ci >= 0 && p.conns[ci] == k) out.push_back(e.bytes);
    }
  return out;
}

TEST(PerfPlan, EverySendMatchesTheReceiveOfItsPeer) {
  size_t compared = 0;
  for (Coll c : kAll)
    for (int n : {2, 3, 4, 5})
      for (int ch : {1, 2, 3})
        for (size_t size : {size_t{8}, size_t{100}, size_t{4100}, size_t{3u << 20} + 12, size_t{9u << 20}})
          for (bool ip : {false, true}) {
            std::vector<Plan> plans = PlansFor(c, size, n, ch, ip, 1);
            for (int r = 0; r < n; ++r) {
              const Plan& p = plans[r];
              for (size_t i = 0; i < p.conns.size(); ++i) {
                const ConnKey& k = p.conns[i];
                std::vector<size_t> mine = Messages(p, k);
                EXPECT_EQ(mine.size(), p.conn_slices[i]) << CollName(c);
                size_t cap = (k.p2p ? kP2pStepBytes : kRingStepBytes) * static_cast<size_t>(p.slice_steps);
                for (size_t b : mine) EXPECT_LE(b, cap);
                if (!k.send) continue;
                ConnKey peer_key{k.p2p, false, r, k.channel};
                ++compared;
                EXPECT_EQ(mine, Messages(plans[k.peer], peer_key))
                    << CollName(c) << " n=" << n << " ch=" << ch << " size=" << size << " rank " << r << " -> "
                    << k.peer << " channel " << k.channel;
              }
            }
          }
  EXPECT_GT(compared, 5000u);  // the loops really compared connections
}

// Runs every rank's plan over in-memory FIFOs (unbounded slots) and returns each rank's output.
std::vector<std::vector<char>> Interpret(const std::vector<Plan>& plans, DataType dt, std::vector<std::vector<char>>* ins) {
  const int n = static_cast<int>(plans.size());
  std::map<std::tuple<bool, int, int, int>, std::deque<std::vector<char>>> wire;  // (p2p, from, to, ch)
  std::vector<std::vector<char>> bufs(n), outs(n);
  std::vector<char*> in(n), out(n);
  for (int r = 0; r < n; ++r) {
    const Plan& p = plans[r];
    if (p.in_place) {
      bufs[r].assign(std::max(p.in_bytes, p.out_bytes), 0);
      Copy(bufs[r].data() + p.in_offset, (*ins)[r].data(), p.in_bytes);
      in[r] = bufs[r].data() + p.in_offset, out[r] = bufs[r].data() + p.out_offset;
    } else {
      bufs[r] = (*ins)[r];
      outs[r].assign(p.out_bytes, 0);
      in[r] = bufs[r].data(), out[r] = outs[r].data();
    }
  }
  std::vector<std::vector<size_t>> pos(n);
  for (int r = 0; r < n; ++r) pos[r].assign(plans[r].streams.size(), 0);
  auto reduce = [dt](char* d, const char* a, const char* b, size_t bytes) {
    for (size_t i = 0; i < bytes / 4; ++i) {
      if (dt == DataType::kFloat) reinterpret_cast<float*>(d)[i] = reinterpret_cast<const float*>(a)[i] + reinterpret_cast<const float*>(b)[i];
      else reinterpret_cast<int32_t*>(d)[i] = reinterpret_cast<const int32_t*>(a)[i] + reinterpret_cast<const int32_t*>(b)[i];
    }
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < n; ++r)
      for (size_t s = 0; s < plans[r].streams.size(); ++s) {
        const Stream& st = plans[r].streams[s];
        while (pos[r][s] < st.elems.size()) {
          const Elem& e = st.elems[pos[r][s]];
          if (st.gate >= 0 && pos[r][st.gate] <= pos[r][s]) break;
          std::vector<char> rx, tx(e.bytes);
          if (NeedsRecv(e.op)) {
            const ConnKey& k = plans[r].conns[st.recv_conn];
            auto& q = wire[{k.p2p, k.peer, r, k.channel}];
            if (q.empty()) break;
            rx = q.front();
            q.pop_front();
            EXPECT_EQ(rx.size(), e.bytes);
          }
          char *src = in[r] + e.src, *dst = out[r] + e.dst;
          switch (e.op) {
            case ElemOp::kSend: Copy(tx.data(), src, e.bytes); break;
            case ElemOp::kCopySend: Move(dst, src, e.bytes), Copy(tx.data(), src, e.bytes); break;
            case ElemOp::kRecvReduceSend: reduce(tx.data(), rx.data(), src, e.bytes); break;
            case ElemOp::kRecvReduceCopySend: reduce(dst, rx.data(), src, e.bytes), Copy(tx.data(), dst, e.bytes); break;
            case ElemOp::kRecvCopySend: Copy(dst, rx.data(), e.bytes), tx = rx; break;
            case ElemOp::kRecv: Copy(dst, rx.data(), e.bytes); break;
            case ElemOp::kRecvReduceCopy: reduce(dst, rx.data(), src, e.bytes); break;
            case ElemOp::kCopy: Move(dst, src, e.bytes); break;
          }
          if (NeedsSend(e.op)) {
            const ConnKey& k = plans[r].conns[st.send_conn];
            wire[{k.p2p, r, k.peer, k.channel}].push_back(tx);
          }
          ++pos[r][s];
          moved = true;
        }
      }
  }
  for (int r = 0; r < n; ++r)
    for (size_t s = 0; s < plans[r].streams.size(); ++s)
      EXPECT_EQ(pos[r][s], plans[r].streams[s].elems.size()) << "deadlock: rank " << r << " stream " << s;
  std::vector<std::vector<char>> result(n);
  for (int r = 0; r < n; ++r) result[r].assign(out[r], out[r] + plans[r].out_bytes);
  return result;
}

TEST(PerfPlan, SchedulesComputeTheCollective) {
  // Small sizes on every rank count with 2 channels; one large size on 1 channel and 2-3 ranks covers
  // multi-slice chunks and several ring loops while staying fast.
  struct Case { int n; size_t size; int ch; };
  std::vector<Case> cases;
  for (int n : {1, 2, 3, 4})
    for (size_t size : {size_t{8}, size_t{1000}, size_t{300000}}) cases.push_back({n, size, 2});
  cases.push_back({2, (5u << 20) + 40, 1});
  for (Coll c : kAll)
    for (const Case& cs : cases)
        for (bool ip : {false, true})
          for (DataType dt : {DataType::kFloat, DataType::kInt32}) {
            const int n = cs.n;
            const size_t size = cs.size;
            if (size > (1u << 20) && (dt == DataType::kInt32 || ip)) continue;
            std::vector<Plan> plans = PlansFor(c, size, n, cs.ch, ip, 1);
            std::vector<std::vector<char>> ins(n);
            for (int r = 0; r < n; ++r) {
              ins[r].resize(plans[r].in_bytes);
              FillInput({c, dt, n, r, 1 % n, plans[r].count, 7}, ins[r].data(), ins[r].size());
            }
            std::vector<std::vector<char>> outs = Interpret(plans, dt, &ins);
            for (int r = 0; r < n; ++r)
              EXPECT_EQ(CountWrong({c, dt, n, r, 1 % n, plans[r].count, 7}, outs[r].data(), outs[r].size()), 0u)
                  << CollName(c) << " n=" << n << " size=" << size << " in-place=" << ip << " rank " << r;
          }
}

TEST(PerfVerify, CountsEveryWrongElement) {
  VerifyArgs a{Coll::kAllReduce, DataType::kFloat, 3, 0, 0, 1000, 3};
  std::vector<float> out(1000);
  for (size_t i = 0; i < out.size(); ++i) {
    double s = 0;
    for (int q = 0; q < 3; ++q) {
      std::vector<float> in(1000);
      VerifyArgs b = a;
      b.rank = q;
      FillInput(b, reinterpret_cast<char*>(in.data()), 4000);
      s += in[i];
    }
    out[i] = static_cast<float>(s);
  }
  EXPECT_EQ(CountWrong(a, reinterpret_cast<char*>(out.data()), 4000), 0u);
  out[0] += 1, out[999] = -out[999] + 1;
  EXPECT_EQ(CountWrong(a, reinterpret_cast<char*>(out.data()), 4000), 2u);
  Poison(a, reinterpret_cast<char*>(out.data()), 4000);
  EXPECT_EQ(CountWrong(a, reinterpret_cast<char*>(out.data()), 4000), 1000u);
}

TEST(PerfOptions, ParsesFaultsSizesAndDurations) {
  FaultSpec f;
  ASSERT_TRUE(ParseFault("at=2s,host=0,rail=1,kind=down", &f).ok());
  EXPECT_EQ(f.at_ms, 2000u);
  EXPECT_EQ(f.rail, 1);
  EXPECT_EQ(f.kind, "down");
  ASSERT_TRUE(ParseFault("kind=slow:100mbit,rail=3,host=1,at=1500ms", &f).ok());
  EXPECT_EQ(f.kind, "slow");
  EXPECT_EQ(f.rate, "100mbit");
  EXPECT_EQ(f.at_ms, 1500u);
  for (const char* bad : {"at=2s,host=0,rail=1", "at=2s,host=0,rail=1,kind=melt", "at=x,host=0,rail=1,kind=down",
                          "at=2s,host=-1,rail=1,kind=down", "at=2s,host=0,rail=1,kind=down,extra=1", "garbage"})
    EXPECT_EQ(ParseFault(bad, &f).code(), Code::kInvalidUsage) << bad;
  uint64_t b = 0;
  ASSERT_TRUE(ParseSize("128M", &b).ok());
  EXPECT_EQ(b, 128ull << 20);
  ASSERT_TRUE(ParseSize("8", &b).ok());
  EXPECT_EQ(b, 8u);
  EXPECT_FALSE(ParseSize("1X", &b).ok());
  EXPECT_FALSE(ParseSize("", &b).ok());
  uint64_t ms = 0;
  ASSERT_TRUE(ParseDurationMs("1.5s", &ms).ok());
  EXPECT_EQ(ms, 1500u);
  EXPECT_FALSE(ParseDurationMs("3h", &ms).ok());
}

TEST(PerfOptions, RejectsBadFlagsWithAMessage) {
  auto parse = [](std::vector<std::string> args, Options* o) {
    std::vector<char*> argv;
    static std::string prog = "rerail-perf";
    argv.push_back(prog.data());
    for (auto& a : args) argv.push_back(a.data());
    return Parse(static_cast<int>(argv.size()), argv.data(), o);
  };
  Options o;
  ASSERT_TRUE(parse({"all_reduce,alltoall", "-N", "4", "-b", "8", "-e", "1M", "-f", "4", "-c", "0"}, &o).ok());
  EXPECT_EQ(o.colls.size(), 2u);
  EXPECT_EQ(o.max_bytes, 1u << 20);
  EXPECT_EQ(o.check, 0);
  Options o2;
  Status s = parse({"-r", "7", "-N", "2"}, &o2);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("-r 7"), std::string::npos);
  Options o3;
  EXPECT_EQ(parse({"--fault", "at=1s,host=3,rail=0,kind=down", "--hosts", "2"}, &o3).code(), Code::kInvalidUsage);
}

TEST(PerfTimeline, MergesRanksAndWritesCsvAndJson) {
  Timeline a(1000, {"rail0", "rail1"}), b(1000, {});
  a.Add(0, 100, 1000 + Timeline::kBinNs / 2);
  a.Add(1, 50, 1000 + 3 * Timeline::kBinNs);
  b.AddNamed("rail1", 25, 1000 + 3 * Timeline::kBinNs + 5);
  b.AddNamed("rail2", 7, 1000 + Timeline::kBinNs);
  b.AddEvent({0.2, "fault", "at=0.2s,host=0,rail=1,kind=down"});
  b.AddMeta("resent_bytes", 42);
  Timeline m(1000, {});
  ASSERT_TRUE(m.Merge(a.Serialize()).ok());
  ASSERT_TRUE(m.Merge(b.Serialize()).ok());
  EXPECT_FALSE(m.Merge("{not json").ok());
  EXPECT_NEAR(m.LongestStallS(), 0.1, 1e-9);  // bin 2 is empty between bins 1 and 3
  EXPECT_NEAR(m.GBps(0, 0.4), (100 + 75 + 7) / 0.4 / 1e9, 1e-12);
  std::string csv = ::testing::TempDir() + "perf_tl.csv", js = ::testing::TempDir() + "perf_tl.json";
  ASSERT_TRUE(m.Write(csv).ok());
  ASSERT_TRUE(m.Write(js).ok());
  std::ifstream f(csv);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  EXPECT_EQ(text.rfind("t_s,rail0,rail1,rail2,total\n", 0), 0u) << text;
  EXPECT_NE(text.find("# event,0.2,fault,at=0.2s;host=0;rail=1;kind=down"), std::string::npos) << text;
  EXPECT_NE(text.find("# meta,resent_bytes,42"), std::string::npos);
  EXPECT_NE(text.find("\n0.3,0,7.5e-07,0,7.5e-07\n"), std::string::npos) << text;
  EXPECT_FALSE(m.Write("/nonexistent-dir/x.csv").ok());
  std::remove(csv.c_str());
  std::remove(js.c_str());
}

TEST(PerfPlan, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kBroadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kSendRecv, 4), 1.0);
}

}  // namespace
}  // namespace rr::perf
