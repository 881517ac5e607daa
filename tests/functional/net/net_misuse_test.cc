// ABI boundary audit (issue 15): every exported net entry point, called with NULL or foreign pointers,
// returns an error (never crashes, never lets an exception out) and logs one WARN naming the call.
#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "net_loader.h"

namespace {

using rr::netdrv::NetPlugin;

std::mutex g_mu;
std::vector<std::string> g_warns;
void Logger(int level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != 2) return;  // NCCL_LOG_WARN
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lk(g_mu);
  g_warns.emplace_back(buf);
}
std::string LastWarn() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_warns.empty() ? std::string() : g_warns.back();
}

TEST(NetMisuse, EveryEntryPointRejectsNullAndForeignPointers) {
  setenv("RERAIL_TCP_IFNAME", "lo", 1);
  std::string err;
  auto p = NetPlugin::Open(RERAIL_NET_SO, &err);
  ASSERT_NE(p, nullptr) << err;
  void* ctx = nullptr;
  ASSERT_EQ(p->Init(&ctx, 1, Logger, nullptr), rrNcclSuccess);
  alignas(64) unsigned char foreign[4096] = {};  // zeros: not a rerail object, request or handle
  void* out = nullptr;
  int done = 0;
  size_t sizes[1] = {16};
  void* data[1] = {foreign};
  int tags[1] = {0};
  void* mh[1] = {nullptr};
  auto check = [&](const char* call, rrNcclResult_t r) {
    EXPECT_NE(r, rrNcclSuccess) << call;
    EXPECT_NE(LastWarn().find(call), std::string::npos) << call << ": last WARN was '" << LastWarn() << "'";
  };
  check("devices", p->Devices(nullptr));
  rrNcclNetProperties_v12_t props;  // (a NULL props pointer cannot pass through rr::netdrv, which converts)
  check("getProperties", p->GetProperties(9999, &props));
  check("listen", p->Listen(ctx, 0, nullptr, &out));
  check("listen", p->Listen(ctx, 0, foreign, nullptr));
  check("listen", p->Listen(ctx, -1, foreign, &out));
  check("connect", p->Connect(ctx, 0, nullptr, &out));
  check("connect", p->Connect(ctx, 0, foreign, &out));  // a handle of zeros
  check("accept", p->Accept(nullptr, &out));
  check("accept", p->Accept(foreign, &out));
  check("regMr", p->RegMr(foreign, foreign, 16, 1, &out));
  check("regMr", p->RegMr(nullptr, foreign, 16, 1, &out));
  check("deregMr", p->DeregMr(nullptr, foreign));
  check("isend", p->Isend(nullptr, foreign, 16, 0, nullptr, nullptr, &out));
  check("isend", p->Isend(foreign, foreign, 16, 0, nullptr, nullptr, &out));
  check("irecv", p->Irecv(foreign, 1, data, sizes, tags, mh, nullptr, &out));
  check("irecv", p->Irecv(nullptr, 1, data, sizes, tags, mh, nullptr, &out));
  check("iflush", p->Iflush(foreign, 1, data, nullptr, mh, &out));
  check("test", p->Test(nullptr, &done, nullptr));
  check("test", p->Test(foreign, &done, nullptr));
  check("closeSend", p->CloseSend(nullptr));
  check("closeSend", p->CloseSend(foreign));
  check("closeRecv", p->CloseRecv(foreign));
  check("closeListen", p->CloseListen(foreign));
  // Still healthy: a real listen works after all that.
  char handle[128] = {0};
  void* listen = nullptr;
  ASSERT_EQ(p->Listen(ctx, 0, handle, &listen), rrNcclSuccess);
  EXPECT_EQ(p->CloseListen(listen), rrNcclSuccess);
  EXPECT_EQ(p->Finalize(ctx), rrNcclSuccess);
}

}  // namespace
