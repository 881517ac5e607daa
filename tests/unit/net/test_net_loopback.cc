// In-process loopback smoke test of libnccl-net-rerail.so through its exported v11/v12 tables
// (dlopen via rr::netdrv, as NCCL does). The full multi-process conformance suite lives in
// tests/functional; this keeps the net branch self-checking.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "net_loader.h"
#include "rerail/clock.h"
#include "rerail/sock.h"
#include "rerail/version.h"

namespace {

using rr::netdrv::NetPlugin;

std::mutex g_log_mu;
std::vector<std::string> g_warns;
std::vector<std::string> g_infos;

void Logger(int level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lk(g_log_mu);
  if (level == 2) g_warns.push_back(buf);
  if (level == 3) g_infos.push_back(buf);
}

int CountFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

class Loopback : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("RERAIL_TCP_IFNAME", "lo", 1);
    setenv("RERAIL_CHUNK_SIZE", "65536", 1);
    std::string err;
    plugin_ = NetPlugin::Open(RERAIL_NET_SO, &err).release();
    ASSERT_NE(plugin_, nullptr) << err;
    ASSERT_EQ(plugin_->Init(&ctx_, 1, Logger, nullptr), rrNcclSuccess);
  }
  static void TearDownTestSuite() {
    if (plugin_ != nullptr) {
      EXPECT_EQ(plugin_->Finalize(ctx_), rrNcclSuccess);
    }
    delete plugin_;
    plugin_ = nullptr;
  }

  // Listens, connects and accepts with the non-blocking polling contract.
  void Connect(void** send, void** recv) {
    char handle[128] = {0};
    void* listen = nullptr;
    ASSERT_EQ(plugin_->Listen(ctx_, 0, handle, &listen), rrNcclSuccess);
    *send = *recv = nullptr;
    rr::Deadline dl = rr::Deadline::AfterMs(10000);
    while ((*send == nullptr || *recv == nullptr) && !dl.Expired()) {
      if (*send == nullptr) {
        ASSERT_EQ(plugin_->Connect(ctx_, 0, handle, send), rrNcclSuccess);
      }
      if (*recv == nullptr) {
        ASSERT_EQ(plugin_->Accept(listen, recv), rrNcclSuccess);
      }
    }
    ASSERT_NE(*send, nullptr);
    ASSERT_NE(*recv, nullptr);
    ASSERT_EQ(plugin_->CloseListen(listen), rrNcclSuccess);
  }

  // Posts, retrying on NULL requests, as NCCL's proxy does.
  void* Send(void* comm, void* data, size_t size) {
    void* req = nullptr;
    rr::Deadline dl = rr::Deadline::AfterMs(10000);
    while (req == nullptr && !dl.Expired()) {
      EXPECT_EQ(plugin_->Isend(comm, data, size, 0, nullptr, nullptr, &req), rrNcclSuccess);
    }
    return req;
  }
  void* Recv(void* comm, void* data, size_t cap) {
    void* req = reinterpret_cast<void*>(0x1);  // NCCL's optional-completion hint: only a hint
    size_t sizes[1] = {cap};
    int tags[1] = {0};
    void* mh[1] = {nullptr};
    rr::Deadline dl = rr::Deadline::AfterMs(10000);
    do {
      rrNcclResult_t r = plugin_->Irecv(comm, 1, &data, sizes, tags, mh, nullptr, &req);
      if (r != rrNcclSuccess) return nullptr;
    } while (req == nullptr && !dl.Expired());
    return req;
  }
  // Tests until done; returns the last result code.
  rrNcclResult_t Wait(void* req, int* size) {
    int done = 0;
    rr::Deadline dl = rr::Deadline::AfterMs(20000);
    while (!done && !dl.Expired()) {
      rrNcclResult_t r = plugin_->Test(req, &done, size);
      if (r != rrNcclSuccess) return r;
    }
    return done ? rrNcclSuccess : rrNcclInProgress;
  }
  // Interleaves test() on both requests (one thread drives both ends).
  void WaitBoth(void* sreq, void* rreq, int* rsize) {
    int sdone = 0, rdone = 0;
    rr::Deadline dl = rr::Deadline::AfterMs(20000);
    while ((!sdone || !rdone) && !dl.Expired()) {
      if (!sdone) {
        ASSERT_EQ(plugin_->Test(sreq, &sdone, nullptr), rrNcclSuccess);
      }
      if (!rdone) {
        ASSERT_EQ(plugin_->Test(rreq, &rdone, rsize), rrNcclSuccess);
      }
    }
    ASSERT_TRUE(sdone && rdone) << "request did not complete";
  }

  static NetPlugin* plugin_;
  static void* ctx_;
};
NetPlugin* Loopback::plugin_ = nullptr;
void* Loopback::ctx_ = nullptr;

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
  return v;
}

// One INFO line at init names the version (rr::Version(), from git describe) and the transports.
TEST_F(Loopback, InitLineNamesVersion) {
  const std::string want = std::string("NET/rerail : rerail ") + rr::Version() + " ABI v";
  std::lock_guard<std::mutex> lk(g_log_mu);
  int found = 0;
  for (const std::string& l : g_infos) found += l.rfind(want, 0) == 0 && l.find("transports: tcp") != std::string::npos;
  EXPECT_EQ(found, 1) << "no init line starting with '" << want << "'";
  EXPECT_STRNE(rr::Version(), "");
}

TEST_F(Loopback, PropertiesDescribeLoopbackRail) {
  int n = 0;
  ASSERT_EQ(plugin_->Devices(&n), rrNcclSuccess);
  ASSERT_EQ(n, 1);
  rrNcclNetProperties_v12_t p;
  ASSERT_EQ(plugin_->GetProperties(0, &p), rrNcclSuccess);
  EXPECT_STREQ(p.name, "lo");
  EXPECT_EQ(p.pciPath, nullptr);
  EXPECT_EQ(p.ptrSupport, RR_NCCL_PTR_HOST);
  EXPECT_EQ(p.speed, 10000);
  EXPECT_EQ(p.maxRecvs, 1);  // RERAIL_MAX_RECVS default: no grouped receives
  EXPECT_EQ(p.vProps.ndevs, 1);
  EXPECT_GT(p.maxP2pBytes, 0u);
  EXPECT_LE(p.maxP2pBytes, RR_NCCL_MAX_NET_SIZE_BYTES);
  EXPECT_STREQ(plugin_->Name(), "rerail");
}

TEST_F(Loopback, SizesRoundTripByteExact) {
  void *s, *r;
  Connect(&s, &r);
  for (size_t size : {size_t(0), size_t(1), size_t(7), size_t(4095), size_t(4096), size_t(65537), size_t(1) << 20,
                      size_t(5) << 20}) {
    auto src = Pattern(size, static_cast<uint32_t>(size));
    std::vector<uint8_t> dst(size + 100, 0xee);
    void* rreq = Recv(r, dst.data(), dst.size());
    void* sreq = Send(s, src.data(), size);
    ASSERT_NE(rreq, nullptr);
    ASSERT_NE(sreq, nullptr);
    int got = -1;
    WaitBoth(sreq, rreq, &got);
    EXPECT_EQ(got, static_cast<int>(size)) << "receive larger than the message reports the sent size";
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << "size " << size;
    EXPECT_EQ(dst[size], 0xee) << "wrote past the message";
  }
  EXPECT_EQ(plugin_->CloseSend(s), rrNcclSuccess);
  EXPECT_EQ(plugin_->CloseRecv(r), rrNcclSuccess);
}

TEST_F(Loopback, FullWindowInOrderAndNullSizes) {
  void *s, *r;
  Connect(&s, &r);
  constexpr int kN = 8;
  std::vector<std::vector<uint8_t>> src, dst;
  void* rreq[kN];
  void* sreq[kN];
  for (int i = 0; i < kN; ++i) {
    src.push_back(Pattern(1000 + i * 70001, i));
    dst.emplace_back(src.back().size() + 5);
  }
  for (int i = 0; i < kN; ++i) rreq[i] = Recv(r, dst[i].data(), dst[i].size());
  for (int i = 0; i < kN; ++i) sreq[i] = Send(s, src[i].data(), src[i].size());
  for (int i = 0; i < kN; ++i) {
    int got = -1;
    WaitBoth(sreq[i], rreq[i], i % 2 ? nullptr : &got);
    if (i % 2 == 0) {
      EXPECT_EQ(got, static_cast<int>(src[i].size()));
    }
    EXPECT_TRUE(std::equal(src[i].begin(), src[i].end(), dst[i].begin())) << "message " << i;
  }
  EXPECT_EQ(plugin_->CloseSend(s), rrNcclSuccess);
  EXPECT_EQ(plugin_->CloseRecv(r), rrNcclSuccess);
}

TEST_F(Loopback, SendLargerThanReceiveIsAnError) {
  void *s, *r;
  Connect(&s, &r);
  std::vector<uint8_t> src(5000), dst(100);
  void* rreq = Recv(r, dst.data(), dst.size());
  void* sreq = Send(s, src.data(), src.size());
  int got = 0;
  EXPECT_NE(Wait(rreq, &got), rrNcclSuccess);
  (void)sreq;
  EXPECT_EQ(plugin_->CloseSend(s), rrNcclSuccess);
  EXPECT_EQ(plugin_->CloseRecv(r), rrNcclSuccess);
}

TEST_F(Loopback, GarbageHandleIsRejectedWithoutCrash) {
  char handle[128];
  for (int i = 0; i < 128; ++i) handle[i] = static_cast<char>(i * 37);
  void* s = nullptr;
  g_warns.clear();
  EXPECT_EQ(plugin_->Connect(ctx_, 0, handle, &s), rrNcclInvalidArgument);
  EXPECT_EQ(s, nullptr);
  char valid[128] = {0};
  void* listen = nullptr;
  ASSERT_EQ(plugin_->Listen(ctx_, 0, valid, &listen), rrNcclSuccess);
  std::memset(valid + 64, 0, 64);  // truncated
  EXPECT_EQ(plugin_->Connect(ctx_, 0, valid, &s), rrNcclInvalidArgument);
  EXPECT_EQ(plugin_->CloseListen(listen), rrNcclSuccess);
  std::lock_guard<std::mutex> lk(g_log_mu);
  ASSERT_GE(g_warns.size(), 2u);
  EXPECT_NE(g_warns[0].find("not a rerail listen handle"), std::string::npos) << g_warns[0];
  EXPECT_NE(g_warns[1].find("checksum"), std::string::npos) << g_warns[1];
}

TEST_F(Loopback, StrangerWithWrongNonceIsRejectedPeerUnaffected) {
  char handle[128] = {0};
  void* listen = nullptr;
  ASSERT_EQ(plugin_->Listen(ctx_, 0, handle, &listen), rrNcclSuccess);
  // The listening port is in the handle (entry 0: port at bytes 26-27, network order).
  uint16_t port = static_cast<uint16_t>((static_cast<uint8_t>(handle[26]) << 8) | static_cast<uint8_t>(handle[27]));
  rr::sock::Addr a;
  ASSERT_TRUE(rr::sock::Addr::Parse("127.0.0.1", port, &a));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(fd, a.sa(), a.len), 0);
  char junk[48];
  std::memset(junk, 0x5a, sizeof(junk));
  ASSERT_EQ(write(fd, junk, sizeof(junk)), 48);
  g_warns.clear();
  void *s = nullptr, *r = nullptr;
  rr::Deadline dl = rr::Deadline::AfterMs(10000);
  while ((s == nullptr || r == nullptr) && !dl.Expired()) {
    if (s == nullptr) {
      ASSERT_EQ(plugin_->Connect(ctx_, 0, handle, &s), rrNcclSuccess);
    }
    if (r == nullptr) {
      ASSERT_EQ(plugin_->Accept(listen, &r), rrNcclSuccess);
    }
  }
  ASSERT_NE(s, nullptr);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(plugin_->CloseListen(listen), rrNcclSuccess);
  char buf[8];
  EXPECT_EQ(read(fd, buf, sizeof(buf)), 0) << "stranger's socket must be closed";
  close(fd);
  {
    std::lock_guard<std::mutex> lk(g_log_mu);
    bool seen = false;
    for (auto& w : g_warns) seen |= w.find("rejected incoming connection") != std::string::npos;
    EXPECT_TRUE(seen);
  }
  uint64_t v = 0x1122334455667788ull, out = 0;
  void* rreq = Recv(r, &out, sizeof(out));
  void* sreq = Send(s, &v, sizeof(v));
  int got = 0;
  WaitBoth(sreq, rreq, &got);
  EXPECT_EQ(out, v);
  EXPECT_EQ(plugin_->CloseSend(s), rrNcclSuccess);
  EXPECT_EQ(plugin_->CloseRecv(r), rrNcclSuccess);
}

TEST_F(Loopback, PeerClosedMidMessageErrorsNoHang) {
  void *s, *r;
  Connect(&s, &r);
  std::vector<uint8_t> dst(1 << 20);
  void* rreq = Recv(r, dst.data(), dst.size());
  ASSERT_EQ(plugin_->CloseSend(s), rrNcclSuccess);
  int got = 0;
  EXPECT_EQ(Wait(rreq, &got), rrNcclRemoteError);
  EXPECT_EQ(plugin_->CloseRecv(r), rrNcclSuccess);
}

TEST_F(Loopback, CloseReleasesEveryDescriptor) {
  int before = CountFds();
  for (int i = 0; i < 5; ++i) {
    void *s, *r;
    Connect(&s, &r);
    char a = 1, b = 0;
    void* rreq = Recv(r, &b, 1);
    void* sreq = Send(s, &a, 1);
    WaitBoth(sreq, rreq, nullptr);
    EXPECT_EQ(plugin_->CloseSend(s), rrNcclSuccess);
    EXPECT_EQ(plugin_->CloseRecv(r), rrNcclSuccess);
  }
  EXPECT_EQ(CountFds(), before);
}

TEST_F(Loopback, IflushHostMemoryNeedsNoWait) {
  void *s, *r;
  Connect(&s, &r);
  void* mh = nullptr;
  char buf[64];
  EXPECT_EQ(plugin_->RegMr(r, buf, sizeof(buf), RR_NCCL_PTR_HOST, &mh), rrNcclSuccess);
  void* req = reinterpret_cast<void*>(0xdead);
  int sizes[1] = {64};
  void* data[1] = {buf};
  EXPECT_EQ(plugin_->Iflush(r, 1, data, sizes, &mh, &req), rrNcclSuccess);
  EXPECT_EQ(req, nullptr);
  void* mh2 = nullptr;
  EXPECT_EQ(plugin_->RegMr(r, buf, sizeof(buf), RR_NCCL_PTR_CUDA, &mh2), rrNcclInternalError);
  EXPECT_EQ(plugin_->DeregMr(r, mh), rrNcclSuccess);
  EXPECT_EQ(plugin_->CloseSend(s), rrNcclSuccess);
  EXPECT_EQ(plugin_->CloseRecv(r), rrNcclSuccess);
}

}  // namespace
