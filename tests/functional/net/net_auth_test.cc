// RERAIL_JOB_SECRET on net links (issue 15): with the secret set, a stranger that holds the listen handle
// (a replayed or leaked handle: right nonce) but not the secret - no tag, or a tag keyed by another secret
// - and a port scanner sending garbage are each rejected with a WARN and never become a comm; a raw
// hello tagged with the right secret is accepted (so the rejections are the tag's doing), and the real
// peer connects and moves data as usual. Plus the pure pieces: HMAC-SHA256 against RFC 4231, the
// constant-time compare, and CheckHello's secret rules.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "handle.h"
#include "net_loader.h"
#include "rerail/auth.h"
#include "rerail/clock.h"
#include "transports/tcp/tcp.h"
#include "wire.h"

namespace {

using rr::netdrv::NetPlugin;
constexpr const char* kSecret = "right-secret-of-this-job";
constexpr uint64_t kBoundMs = 20000;  // hang guard only

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
size_t WarnsWith(const std::string& what) {
  std::lock_guard<std::mutex> lk(g_mu);
  size_t n = 0;
  for (const auto& w : g_warns) n += w.find(what) != std::string::npos;
  return n;
}

TEST(Auth, HmacSha256MatchesRfc4231) {
  rr::auth::Tag t;
  const char* data = "what do ya want for nothing?";
  ASSERT_TRUE(rr::auth::Hmac("Jefe", "", data, std::strlen(data), &t));
  const uint8_t want[32] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                            0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                            0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
  EXPECT_EQ(std::memcmp(t.data(), want, 32), 0);
  EXPECT_TRUE(rr::auth::VerifyHmac("Jefe", "", data, std::strlen(data), want));
  EXPECT_FALSE(rr::auth::VerifyHmac("jefe", "", data, std::strlen(data), want));
  // The context is part of the message: a tag of one protocol step is not valid for another.
  EXPECT_FALSE(rr::auth::VerifyHmac("Jefe", "x", data, std::strlen(data), want));
}

TEST(Auth, ConstantTimeEqual) {
  uint8_t a[16] = {1, 2, 3}, b[16] = {1, 2, 3};
  EXPECT_TRUE(rr::auth::ConstantTimeEqual(a, b, 16));
  b[15] = 1;
  EXPECT_FALSE(rr::auth::ConstantTimeEqual(a, b, 16));
  EXPECT_TRUE(rr::auth::ConstantTimeEqual(a, b, 0));
}

rr::net::LinkIdentity Identity(const rr::net::Nonce& nonce) {
  rr::net::LinkIdentity id;
  id.nonce = nonce;
  id.conn_id = 0x1515151515151515ull;
  id.chunk_size = 131072;
  id.nstreams = 1;
  return id;
}

TEST(Auth, CheckHelloSecretRules) {
  rr::net::Nonce nonce{};
  nonce[0] = 7;
  rr::net::Hello h;
  uint8_t tag[32];
  std::string why;
  bool follows = false;
  rr::net::tcp::MakeHello(Identity(nonce), 0, kSecret, &h, tag);
  ASSERT_TRUE(rr::net::tcp::CheckHello(h, nonce, kSecret, &follows, &why)) << why;
  EXPECT_TRUE(follows);
  EXPECT_TRUE(rr::net::tcp::CheckHelloTag(h, kSecret, tag, &why));
  EXPECT_FALSE(rr::net::tcp::CheckHelloTag(h, "another", tag, &why));
  EXPECT_FALSE(rr::net::tcp::CheckHello(h, nonce, "", &follows, &why)) << "tagged hello, listener without secret";
  rr::net::Hello plain;
  rr::net::tcp::MakeHello(Identity(nonce), 0, "", &plain, nullptr);
  EXPECT_FALSE(rr::net::tcp::CheckHello(plain, nonce, kSecret, &follows, &why)) << "untagged hello, secret required";
  EXPECT_NE(why.find("no RERAIL_JOB_SECRET tag"), std::string::npos) << why;
  EXPECT_TRUE(rr::net::tcp::CheckHello(plain, nonce, "", &follows, &why)) << why;
  rr::net::Nonce other = nonce;
  other[15] ^= 1;
  EXPECT_FALSE(rr::net::tcp::CheckHello(plain, other, "", &follows, &why));
  EXPECT_EQ(why, "wrong nonce");
}

class NetAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("RERAIL_TCP_IFNAME", "lo", 1);
    setenv("RERAIL_JOB_SECRET", kSecret, 1);
    std::string err;
    plugin_ = NetPlugin::Open(RERAIL_NET_SO, &err);
    ASSERT_NE(plugin_, nullptr) << err;
    ASSERT_EQ(plugin_->Init(&ctx_, 1, Logger, nullptr), rrNcclSuccess);
  }
  void TearDown() override {
    if (plugin_) {
      EXPECT_EQ(plugin_->Finalize(ctx_), rrNcclSuccess);
    }
  }
  // Connects a raw stream to the handle's primary address and sends `bytes`.
  static int RawSend(const rr::net::Handle& h, const void* bytes, size_t n) {
    const rr::sock::Addr& a = h.addrs[0].addr;
    int fd = socket(a.family(), SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(connect(fd, a.sa(), a.len), 0) << strerror(errno);
    EXPECT_EQ(write(fd, bytes, n), static_cast<ssize_t>(n));
    return fd;
  }
  // Polls accept until the listener closed the stranger's stream; every accept must yield no comm.
  void ExpectRejected(void* listen, int fd) {
    rr::Deadline dl = rr::Deadline::AfterMs(kBoundMs);
    bool closed = false;
    while (!closed && !dl.Expired()) {
      void* rc = nullptr;
      ASSERT_EQ(plugin_->Accept(listen, &rc), rrNcclSuccess);
      ASSERT_EQ(rc, nullptr) << "a stranger became a comm";
      char c;
      ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
      closed = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    }
    EXPECT_TRUE(closed) << "the listener did not close the stranger's stream";
    close(fd);
  }

  std::unique_ptr<NetPlugin> plugin_;
  void* ctx_ = nullptr;
};

TEST_F(NetAuth, StrangersWithoutTheSecretAreRejectedAndTheRealPeerConnects) {
  char handle[128] = {0};
  void* listen = nullptr;
  ASSERT_EQ(plugin_->Listen(ctx_, 0, handle, &listen), rrNcclSuccess);
  rr::net::Handle h;
  ASSERT_TRUE(rr::net::DecodeHandle(handle, &h).ok());

  // 1. A port scanner.
  uint8_t junk[48];
  for (size_t i = 0; i < sizeof(junk); ++i) junk[i] = static_cast<uint8_t>(i * 37 + 1);
  ExpectRejected(listen, RawSend(h, junk, sizeof(junk)));
  EXPECT_EQ(WarnsWith("bad magic"), 1u);
  // 2. The handle replayed by a process without the secret: right nonce, no tag.
  rr::net::Hello hello;
  rr::net::tcp::MakeHello(Identity(h.nonce), 0, "", &hello, nullptr);
  ExpectRejected(listen, RawSend(h, &hello, sizeof(hello)));
  EXPECT_EQ(WarnsWith("no RERAIL_JOB_SECRET tag"), 1u);
  // 3. The handle with another job's secret.
  uint8_t wire[48 + 32];
  rr::net::tcp::MakeHello(Identity(h.nonce), 0, "wrong-secret", &hello, wire + 48);
  std::memcpy(wire, &hello, 48);
  ExpectRejected(listen, RawSend(h, wire, sizeof(wire)));
  EXPECT_EQ(WarnsWith("bad RERAIL_JOB_SECRET tag"), 1u);
  EXPECT_EQ(WarnsWith("rejected incoming connection"), 3u);

  // Control: the same raw hello keyed by the right secret is accepted (the test's hellos are well formed).
  rr::net::tcp::MakeHello(Identity(h.nonce), 0, kSecret, &hello, wire + 48);
  std::memcpy(wire, &hello, 48);
  int fd = RawSend(h, wire, sizeof(wire));
  void* raw = nullptr;
  rr::Deadline dl = rr::Deadline::AfterMs(kBoundMs);
  while (raw == nullptr && !dl.Expired()) {
    ASSERT_EQ(plugin_->Accept(listen, &raw), rrNcclSuccess);
  }
  ASSERT_NE(raw, nullptr) << "a hello with the right secret's tag is accepted";
  EXPECT_EQ(plugin_->CloseRecv(raw), rrNcclSuccess);
  close(fd);

  // The real peer (same secret) is unaffected.
  void *sc = nullptr, *rc = nullptr;
  dl = rr::Deadline::AfterMs(kBoundMs);
  while ((sc == nullptr || rc == nullptr) && !dl.Expired()) {
    if (sc == nullptr) {
      ASSERT_EQ(plugin_->Connect(ctx_, 0, handle, &sc), rrNcclSuccess);
    }
    if (rc == nullptr) {
      ASSERT_EQ(plugin_->Accept(listen, &rc), rrNcclSuccess);
    }
  }
  ASSERT_NE(sc, nullptr);
  ASSERT_NE(rc, nullptr);
  std::vector<uint8_t> src(300000), dst(300000, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 13 + 5);
  void *sreq = nullptr, *rreq = nullptr;
  void* dptr = dst.data();
  size_t sizes[1] = {dst.size()};
  int tags[1] = {0};
  void* mh[1] = {nullptr};
  dl = rr::Deadline::AfterMs(kBoundMs);
  while ((sreq == nullptr || rreq == nullptr) && !dl.Expired()) {
    if (sreq == nullptr) {
      ASSERT_EQ(plugin_->Isend(sc, src.data(), src.size(), 0, nullptr, nullptr, &sreq), rrNcclSuccess);
    }
    if (rreq == nullptr) {
      ASSERT_EQ(plugin_->Irecv(rc, 1, &dptr, sizes, tags, mh, nullptr, &rreq), rrNcclSuccess);
    }
  }
  int sdone = 0, rdone = 0;
  while ((!sdone || !rdone) && !dl.Expired()) {
    if (!sdone) {
      ASSERT_EQ(plugin_->Test(sreq, &sdone, nullptr), rrNcclSuccess);
    }
    if (!rdone) {
      ASSERT_EQ(plugin_->Test(rreq, &rdone, nullptr), rrNcclSuccess);
    }
  }
  ASSERT_TRUE(sdone && rdone);
  EXPECT_EQ(src, dst);
  EXPECT_EQ(WarnsWith("rejected incoming connection"), 3u) << "the real peer's links raised no WARN";
  EXPECT_EQ(plugin_->CloseSend(sc), rrNcclSuccess);
  EXPECT_EQ(plugin_->CloseRecv(rc), rrNcclSuccess);
  EXPECT_EQ(plugin_->CloseListen(listen), rrNcclSuccess);
}

}  // namespace
