// Profiler hardening (issue 15): one test per NetPlugin descriptor the profiler must refuse to read
// (foreign plugin ids, rerail's id with another version, NULL data, wrong magic, short size, a bad update),
// the UTF-8 sanitiser every foreign string goes through, and JSON output that cannot throw.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "comm_output.h"
#include "event_model.h"
#include "profiler.h"
#include "rerail/prof_net_event.h"
#include "safe_text.h"
#include "trace_format.h"

namespace rr::prof {
namespace {

constexpr int64_t kIb = (1ll << 16) | 1;
constexpr int64_t kSocket = (2ll << 16) | 1;
constexpr int64_t kOldRerail = (0x100ll << 16) | 1;  // rerail's id before issue 15, NCCL's example value

rrProfNetEvent_v1_t Valid() {
  return MakeNetEvent(RR_PROF_NET_EV_FAILOVER, 1, "link-down");
}

// Starts a NetPlugin event through the real entry point and returns how many `why` rejects it added.
uint64_t StartNet(int64_t id, const void* data, NetReject why, void** handle_out = nullptr) {
  static Context ctx;  // Start() records into the thread's ring and never dereferences the context
  unsigned char u[kPayloadBytes] = {};
  std::memcpy(u, &id, sizeof(id));
  std::memcpy(u + 8, &data, sizeof(data));
  uint64_t before = NetRejectCount(why);
  void* h = nullptr;
  Profiler::Start(&ctx, &h, RR_PROF_NET_PLUGIN, nullptr, u);
  EXPECT_NE(h, nullptr) << "opaque events are still recorded";
  if (handle_out != nullptr) *handle_out = h;
  return NetRejectCount(why) - before;
}

TEST(ProfNetReject, ValidRerailDescriptorIsAccepted) {
  rrProfNetEvent_v1_t ev = Valid();
  EXPECT_EQ(RR_PROF_NET_PLUGIN_ID >> 16, 0x7272) << "distinctive type id, not NCCL's example 0x100";
  EXPECT_EQ(ev.magic, RR_PROF_NET_MAGIC);
  EXPECT_TRUE(CheckNetDescr(RR_PROF_NET_PLUGIN_ID, &ev, nullptr));
}

TEST(ProfNetReject, ForeignPluginIdsAreNeverRead) {
  // Data that would pass every other check: only the id says whose it is.
  rrProfNetEvent_v1_t ev = Valid();
  for (int64_t id : {kIb, kSocket, kOldRerail, int64_t(0), int64_t(-1), int64_t(0x7273) << 16 | 1}) {
    NetReject why{};
    EXPECT_FALSE(CheckNetDescr(id, &ev, &why)) << std::hex << id;
    EXPECT_EQ(why, NetReject::kForeignId) << std::hex << id;
  }
  // Never dereferenced: an unreadable pointer is fine.
  EXPECT_EQ(StartNet(kIb, reinterpret_cast<void*>(0x10), NetReject::kForeignId), 1u);
  EXPECT_EQ(StartNet(kSocket, nullptr, NetReject::kForeignId), 1u);
}

TEST(ProfNetReject, RerailIdWithAnotherVersionIsOpaque) {
  rrProfNetEvent_v1_t ev = Valid();
  for (int64_t v : {0, 2, 0xffff}) {
    NetReject why{};
    EXPECT_FALSE(CheckNetDescr(int64_t(RR_PROF_NET_TYPE_RERAIL) | v, &ev, &why));
    EXPECT_EQ(why, NetReject::kBadVersion);
  }
  EXPECT_EQ(StartNet(int64_t(RR_PROF_NET_TYPE_RERAIL) | 2, reinterpret_cast<void*>(0x10), NetReject::kBadVersion),
            1u);
}

TEST(ProfNetReject, NullDataIsOpaque) {
  NetReject why{};
  EXPECT_FALSE(CheckNetDescr(RR_PROF_NET_PLUGIN_ID, nullptr, &why));
  EXPECT_EQ(why, NetReject::kNullData);
  EXPECT_EQ(StartNet(RR_PROF_NET_PLUGIN_ID, nullptr, NetReject::kNullData), 1u);
}

TEST(ProfNetReject, WrongMagicIsOpaque) {
  // The pre-issue-15 layout (size first) and plain garbage.
  unsigned char old[88] = {};
  uint32_t size = 88;
  std::memcpy(old, &size, 4);
  unsigned char junk[88];
  std::memset(junk, 0xff, sizeof(junk));
  for (const void* d : {static_cast<const void*>(old), static_cast<const void*>(junk)}) {
    NetReject why{};
    EXPECT_FALSE(CheckNetDescr(RR_PROF_NET_PLUGIN_ID, d, &why));
    EXPECT_EQ(why, NetReject::kBadMagic);
    EXPECT_EQ(StartNet(RR_PROF_NET_PLUGIN_ID, d, NetReject::kBadMagic), 1u);
  }
}

TEST(ProfNetReject, ShortSizeIsOpaque) {
  rrProfNetEvent_v1_t ev = Valid();
  for (uint32_t size : {0u, 8u, 87u}) {
    ev.size = size;
    NetReject why{};
    EXPECT_FALSE(CheckNetDescr(RR_PROF_NET_PLUGIN_ID, &ev, &why));
    EXPECT_EQ(why, NetReject::kShortSize);
  }
  EXPECT_EQ(StartNet(RR_PROF_NET_PLUGIN_ID, &ev, NetReject::kShortSize), 1u);
  ev.size = 4096;  // a longer (newer) descriptor: only the 88 known bytes are read
  EXPECT_TRUE(CheckNetDescr(RR_PROF_NET_PLUGIN_ID, &ev, nullptr));
}

TEST(ProfNetReject, BadUpdateOfARerailEventIsIgnoredAndCounted) {
  rrProfNetEvent_v1_t ev = Valid();
  void* h = nullptr;
  StartNet(RR_PROF_NET_PLUGIN_ID, &ev, NetReject::kForeignId, &h);
  ASSERT_NE(h, nullptr);
  unsigned char junk[88];
  std::memset(junk, 0xab, sizeof(junk));
  rrProfEventStateArgs_v5_t a;
  uint64_t before = NetRejectCount(NetReject::kBadUpdate);
  a.netPlugin.data = nullptr;
  Profiler::State(h, RR_PROF_STATE_NET_PLUGIN_UPDATE, &a);
  a.netPlugin.data = junk;
  Profiler::State(h, RR_PROF_STATE_NET_PLUGIN_UPDATE, &a);
  Profiler::State(h, RR_PROF_STATE_NET_PLUGIN_UPDATE, nullptr);
  EXPECT_EQ(NetRejectCount(NetReject::kBadUpdate) - before, 3u);
  a.netPlugin.data = &ev;
  Profiler::State(h, RR_PROF_STATE_NET_PLUGIN_UPDATE, &a);
  EXPECT_EQ(NetRejectCount(NetReject::kBadUpdate) - before, 3u) << "a valid update is not a reject";
}

TEST(ProfNetReject, OpaqueEventIsWrittenWithItsIdOnly) {
  Context ctx;
  EventRec ev;
  ev.ctx = &ctx;
  ev.type = RR_PROF_NET_PLUGIN;
  ev.rerail_net = false;
  int64_t id = kIb;
  std::memset(ev.payload, 0xff, sizeof(ev.payload));  // whatever the foreign plugin's bytes were
  std::memcpy(ev.payload, &id, sizeof(id));
  nlohmann::json j = EventJson(ev, [](uint64_t ns) { return ns / 1e3; });
  EXPECT_EQ(j.at("name"), "NetPlugin");
  EXPECT_EQ(j.at("args").at("pluginId"), "0x10001");
  EXPECT_EQ(j.at("args").at("opaque"), true);
  EXPECT_FALSE(j.at("args").contains("reason"));
}

TEST(ProfNetReject, RailOutOfRangeIsShownAsNoRail) {
  Context ctx;
  EventRec ev;
  ev.ctx = &ctx;
  ev.type = RR_PROF_NET_PLUGIN;
  ev.rerail_net = true;
  rrProfNetEvent_v1_t n = Valid();
  n.rail = 0x7fffffff;
  n.toRail = -5;
  std::memcpy(ev.payload, &n, sizeof(n));
  rrProfNetEvent_v1_t out;
  ASSERT_TRUE(NetDescr(ev, &out));
  EXPECT_EQ(out.rail, -1);
  EXPECT_EQ(out.toRail, -1);
}

TEST(ProfSafeText, InvalidUtf8IsReplacedAndValidTextKept) {
  EXPECT_EQ(SafeUtf8(nullptr, 10), "");
  EXPECT_EQ(SafeUtf8("plain", 64), "plain");
  EXPECT_EQ(SafeUtf8("r\xC3\xA9sum\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", 64), "r\xC3\xA9sum\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(SafeUtf8("a\xFF" "b", 64), "a" + r + "b");                 // never valid
  EXPECT_EQ(SafeUtf8("\xC0\xAF", 64), r + r);                           // overlong '/'
  EXPECT_EQ(SafeUtf8("\xED\xA0\x80", 64), r + r + r);                   // surrogate
  EXPECT_EQ(SafeUtf8("\xF4\x90\x80\x80", 64), r + r + r + r);           // > U+10FFFF
  EXPECT_EQ(SafeUtf8("x\xE2\x82", 64), "x" + r + r);                    // truncated at the end
  EXPECT_EQ(SafeUtf8("ab\xC3\xA9", 3), "ab" + r);                       // cut by max_bytes
  EXPECT_EQ(SafeUtf8("abcdef", 3), "abc");
}

TEST(ProfSafeText, PromLabelEscapes) {
  EXPECT_EQ(PromLabel("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(ProfSafeText, DumpNeverThrowsOnInvalidUtf8) {
  nlohmann::json j = {{"s", std::string("bad\xFF\xFE")}};
  EXPECT_THROW(j.dump(), nlohmann::json::type_error) << "the failure the guard exists for";
  std::string out;
  EXPECT_NO_THROW(out = DumpJson(j));
  EXPECT_NO_THROW(nlohmann::json::parse(out));
}

TEST(ProfSafeText, EveryRandomByteStringBecomesParseableJson) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  char buf[65];
  for (int i = 0; i < 20000; ++i) {
    for (int k = 0; k < 64; ++k) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      buf[k] = static_cast<char>(x);
    }
    buf[64] = '\0';
    nlohmann::json j = {{"s", SafeUtf8(buf, 64)}};
    ASSERT_NO_THROW(nlohmann::json::parse(j.dump())) << i;
  }
}

}  // namespace
}  // namespace rr::prof
