// Issue 15: the profiler survives what NCCL and other net plugins may hand it. For each ABI version,
// RERAIL_HARDEN_EVENTS (default 1 M) NetPlugin events with random and foreign descriptors - other plugins'
// ids (IB, socket, NCCL's example 0x100, random), rerail's id with other versions, NULL data, garbage,
// wrong magic, short sizes, valid descriptors with random fields and unterminated random reasons, and
// updates with all of those - plus collectives whose strings (and the commName) are random bytes, are
// driven through the real libnccl-profiler-rerail.so (dlopen, NcclEmu). The process must survive, the
// trace and summary must parse as JSON, and the summary's net_opaque counts must match what was sent.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "nccl_emu.h"
#include "prof_test_util.h"
#include "rerail/prof_net_event.h"

namespace rr::prof {
namespace {

using test::Base;
using test::LoadJson;

const char* const kReasons[] = {"foreign_id", "bad_version", "null_data", "bad_magic", "short_size", "bad_update"};
enum Reject { kForeign, kVersion, kNull, kMagic, kShort, kUpdate, kAccepted };

size_t EventCount() {
  const char* env = std::getenv("RERAIL_HARDEN_EVENTS");
  return env != nullptr ? std::strtoull(env, nullptr, 0) : 1000000;
}

std::string RandomBytes(std::mt19937_64& rng, size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (auto& c : s) c = static_cast<char>(1 + rng() % 255);  // no NUL inside
  return s;
}

// One random NetPlugin descriptor: fills id/data (pointing into `store`) and says what the profiler must
// decide about it.
struct Gen {
  std::mt19937_64 rng;
  alignas(8) unsigned char store[4][128];
  int slot = 0;

  explicit Gen(uint64_t seed) : rng(seed) {}

  void* Buf() {
    slot = (slot + 1) % 4;
    return store[slot];
  }
  void Fill(void* p) {
    for (size_t i = 0; i < 128; i += 8) {
      uint64_t v = rng();
      std::memcpy(static_cast<char*>(p) + i, &v, 8);
    }
  }
  // A descriptor with rerail's magic and random fields (a reason without NUL, random kind/rail/size).
  void* ValidDescr(bool short_size) {
    void* p = Buf();
    Fill(p);
    rrProfNetEvent_v1_t ev;
    std::memcpy(&ev, p, sizeof(ev));
    ev.magic = RR_PROF_NET_MAGIC;
    ev.size = short_size ? static_cast<uint32_t>(rng() % sizeof(ev))
                         : static_cast<uint32_t>(sizeof(ev) + rng() % 41);
    if (rng() % 2) ev.rail = static_cast<int32_t>(rng() % 8);
    if (rng() % 2) ev.kind = static_cast<uint16_t>(1 + rng() % 6);
    ev.tsNs = 0;  // random times would make the trace unreadable, not invalid
    std::memcpy(p, &ev, sizeof(ev));
    return p;
  }
  Reject Next(int64_t* id, void** data) {
    static const int64_t kForeignIds[] = {(1ll << 16) | 1, (2ll << 16) | 1, (0x100ll << 16) | 1, 0, -1};
    switch (rng() % 8) {
      case 0:  // another plugin's id, with any data (never read: even a wild pointer)
        *id = rng() % 2 ? kForeignIds[rng() % 5] : static_cast<int64_t>(rng());
        if ((static_cast<uint64_t>(*id) & ~0xffffull) == RR_PROF_NET_TYPE_RERAIL) *id ^= 1ll << 20;
        *data = rng() % 2 ? ValidDescr(false) : reinterpret_cast<void*>(rng() | 1);
        return kForeign;
      case 1:  // rerail's type, another version
        *id = static_cast<int64_t>(RR_PROF_NET_TYPE_RERAIL | (2 + rng() % 0xfffe));
        *data = rng() % 2 ? ValidDescr(false) : reinterpret_cast<void*>(rng() | 1);
        return kVersion;
      case 2:
        *id = RR_PROF_NET_PLUGIN_ID;
        *data = nullptr;
        return kNull;
      case 3: {  // garbage (magic fails unless the dice say otherwise: 2^-32)
        *id = RR_PROF_NET_PLUGIN_ID;
        *data = Buf();
        Fill(*data);
        uint32_t m;
        std::memcpy(&m, *data, 4);
        if (m == RR_PROF_NET_MAGIC) static_cast<unsigned char*>(*data)[0] ^= 1;
        return kMagic;
      }
      case 4:
        *id = RR_PROF_NET_PLUGIN_ID;
        *data = ValidDescr(true);
        return kShort;
      default:
        *id = RR_PROF_NET_PLUGIN_ID;
        *data = ValidDescr(false);
        return kAccepted;
    }
  }
};

struct Expect {
  uint64_t n[6] = {};
  uint64_t events = 0;
};

// Drives `n` NetPlugin events under proxy steps of random collectives; returns what the profiler must
// have counted.
Expect Drive(NcclEmu* emu, uint64_t seed, size_t n, std::vector<std::string>* strings) {
  Gen g(seed);
  Expect e;
  rrProfNetCallback_t cb = NcclEmu::NetCallback();
  void* op = nullptr;
  void* coll = nullptr;
  void* group = nullptr;
  NcclEmu::ProxyStep steps[8];
  for (size_t i = 0; i < n; ++i) {
    if (i % 512 == 0) {
      if (op != nullptr) emu->Stop(op);
      for (int k = 0; k < 4; ++k) strings->push_back(RandomBytes(g.rng, 40));
      const std::string* s = &strings->back() - 3;
      NcclEmu::CollInfo ci;
      ci.func = s[0].c_str();
      ci.datatype = s[1].c_str();
      ci.algo = s[2].c_str();
      ci.proto = s[3].c_str();
      ci.count = g.rng() % 4096;
      group = emu->StartGroup();
      coll = emu->StartColl(group, ci);
      emu->Stop(coll);
      emu->Stop(group);
      op = emu->StartProxyOp(coll, 0, 1, 512, 1 << 16, g.rng() % 2);
    }
    NcclEmu::ProxyStep* slot = &steps[i % 8];
    emu->StartProxyStep(slot, op, static_cast<int>(i % 512));
    int64_t id;
    void* data;
    Reject r = g.Next(&id, &data);
    if (r != kAccepted) ++e.n[r];
    ++e.events;
    void* h = nullptr;
    cb(&h, 0, slot, id, data);
    int action = static_cast<int>(g.rng() % 4);  // 0/1 stop, 2 update then stop, 3 update+stop
    if (action >= 2) {
      // An update carries data only; the profiler reads it only for an event it accepted as rerail's
      // (then NULL, garbage and short descriptors are bad updates), otherwise it never touches it.
      void* udata = nullptr;
      bool good = false;
      switch (g.rng() % 4) {
        case 0: break;
        case 1: udata = g.Buf(); g.Fill(udata); static_cast<unsigned char*>(udata)[0] ^= 0x5a; break;
        case 2: udata = g.ValidDescr(true); break;
        default: udata = g.ValidDescr(false); good = true;
      }
      if (r != kAccepted && g.rng() % 2) udata = reinterpret_cast<void*>(g.rng() | 1);  // wild: never read
      if (r == kAccepted && !good) ++e.n[kUpdate];
      cb(&h, action == 2 ? 2 : 3, nullptr, 0, udata);
    }
    if (action != 3) cb(&h, 1, nullptr, 0, nullptr);
    emu->StopProxyStep(slot);
    if (i % 2048 == 2047) usleep(15000);  // lets the collector (10 ms passes) drain: fewer ring drops
  }
  if (op != nullptr) emu->Stop(op);
  return e;
}

uint64_t g_prev[6] = {};  // net_opaque counts are process-wide: each test checks its own increase
uint64_t g_prev_dropped = 0;

void RunAbi(int version) {
  const size_t n = EventCount();
  std::vector<std::string> strings;
  strings.reserve(2 * (n / 512 + 2) * 4);
  NcclEmu::CommInfo comm;
  comm.comm_id = 0x15000 + static_cast<uint64_t>(version);
  comm.name = std::string("comm\xFF\xFE\"\n\x01") + "\xC3";
  std::unique_ptr<NcclEmu> emu;
  ASSERT_TRUE(NcclEmu::Open(RERAIL_PROFILER_SO, comm, &emu, version).ok());
  ASSERT_EQ(emu->abi_version(), version);
  Expect e = Drive(emu.get(), 0x15ull * 1000 + static_cast<uint64_t>(version), n, &strings);
  ASSERT_TRUE(emu->Finalize().ok());

  // The trace (hundreds of MB at 1 M events) is validated as a stream (no DOM) and its events counted
  // line by line (the profiler writes one event per line).
  const std::string base = Base(0, comm.comm_id);
  {
    std::ifstream f(base + ".trace.json");
    ASSERT_TRUE(f.good());
    EXPECT_TRUE(nlohmann::json::accept(f)) << base << ".trace.json is not valid JSON";
  }
  size_t opaque_events = 0, net_events = 0;
  {
    std::ifstream f(base + ".trace.json");
    std::string line;
    std::getline(f, line);
    nlohmann::json head = nlohmann::json::parse(line + "]}", nullptr, false);
    ASSERT_FALSE(head.is_discarded()) << "first line: " << line;
    EXPECT_TRUE(head.at("otherData").at("commName").is_string());
    while (std::getline(f, line)) {
      if (line.find("\"cat\":\"net\"") == std::string::npos) continue;
      ++net_events;
      if (line.find("\"opaque\":true") != std::string::npos) ++opaque_events;
    }
  }
  nlohmann::json sum = LoadJson(base + ".summary.json");
  ASSERT_FALSE(sum.is_discarded()) << base << ".summary.json is not valid JSON";
  EXPECT_TRUE(sum.at("commName").is_string());

  const nlohmann::json& opaque = sum.at("net_opaque");
  for (int k = 0; k < 6; ++k) {
    uint64_t got = opaque.at(kReasons[k]).get<uint64_t>() - g_prev[k];
    g_prev[k] += got;
    EXPECT_EQ(got, e.n[k]) << "v" << version << " " << kReasons[k];
  }
  uint64_t dropped = sum.at("dropped_records").get<uint64_t>() - g_prev_dropped;
  g_prev_dropped += dropped;
  uint64_t rejected_at_start = e.n[kForeign] + e.n[kVersion] + e.n[kNull] + e.n[kMagic] + e.n[kShort];
  std::printf("v%d: %zu net events sent (%llu opaque, %llu bad updates), %zu in the trace (%zu opaque), "
              "%llu records dropped (ring full)\n",
              version, static_cast<size_t>(e.events), static_cast<unsigned long long>(rejected_at_start),
              static_cast<unsigned long long>(e.n[kUpdate]), net_events, opaque_events,
              static_cast<unsigned long long>(dropped));
  EXPECT_LE(net_events, e.events);
  EXPECT_LE(opaque_events, rejected_at_start);
  if (dropped == 0) {
    EXPECT_EQ(net_events, e.events);
    EXPECT_EQ(opaque_events, rejected_at_start);
  }
  EXPECT_GT(opaque_events, 0u);
}

TEST(ProfHarden, RandomAndForeignDescriptorsV5) { RunAbi(5); }
TEST(ProfHarden, RandomAndForeignDescriptorsV6) { RunAbi(6); }

}  // namespace
}  // namespace rr::prof
