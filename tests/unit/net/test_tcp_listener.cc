// The TCP listener's grouping of a link's streams (transports/tcp/tcp_listener.cc), driven by raw
// loopback sockets that play a sender's connector: hellos built with MakeHello, the listener polled
// in this thread. A connect attempt whose other streams never arrive (a rail black-holed between two
// stream connects, a lost SYN: the sender's connector times out and closes what it opened) must not
// capture the next attempt of the same link, nor keep its socket for the listener's whole life.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "handle.h"
#include "rerail/clock.h"
#include "rerail/sock.h"
#include "transports/tcp/tcp.h"
#include "wire.h"

namespace rr::net::tcp {
namespace {

class TcpListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DeviceInfo d;
    d.name = "lo";
    d.loopback = true;
    ASSERT_TRUE(sock::Addr::Parse("127.0.0.1", 0, &d.addr));
    TcpConfig cfg;
    cfg.connect_timeout_ms = 300;
    tr_ = std::make_unique<TcpTransport>(std::vector<DeviceInfo>{d}, cfg);
    for (int i = 0; i < 16; ++i) nonce_[i] = static_cast<uint8_t>(i * 7 + 1);
    Handle h;
    ASSERT_TRUE(tr_->Listen(0, nonce_, &h, &ls_).ok());
    ASSERT_FALSE(h.addrs.empty());
    addr_ = h.addrs[0].addr;
  }
  // One stream of a sender's connect attempt: connected, its hello written.
  int Stream(int stream, int nstreams, uint32_t epoch) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(connect(fd, addr_.sa(), addr_.len), 0);
    LinkIdentity id;
    id.nonce = nonce_, id.conn_id = 0x5eed, id.chunk_size = 131072, id.rail = 0, id.link = 1;
    id.nstreams = nstreams, id.epoch = epoch;
    Hello hello;
    MakeHello(id, stream, &hello);
    EXPECT_EQ(send(fd, &hello, sizeof(hello), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(hello)));
    return fd;
  }
  // Polls the listener for `ms` (every hello read); the first link it hands out, if any.
  std::unique_ptr<Link> PollFor(uint64_t ms) {
    Deadline dl = Deadline::AfterMs(ms);
    std::unique_ptr<Link> link;
    while (!link && !dl.Expired()) {
      EXPECT_TRUE(ls_->Poll(&link).ok());
      if (!link) usleep(1000);
    }
    return link;
  }
  // True when the listener closed its end of `fd` (EOF or reset) within `ms`.
  static bool ClosedByListener(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return false;
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
  }

  std::unique_ptr<TcpTransport> tr_;
  std::unique_ptr<Listener> ls_;
  Nonce nonce_{};
  sock::Addr addr_;
};

// Attempt 1 gets stream 0 of 2 through, then its connector gives up and closes it. Attempt 2 (the
// same epoch: a connect failure does not bump it) connects stream 1, then stream 0. The link handed
// out must be attempt 2's: a byte written on each of its streams is read from the link's stream.
TEST_F(TcpListenerTest, AHalfConnectedAttemptDoesNotCaptureTheNextAttemptOfItsLink) {
  int a0 = Stream(0, 2, 3);
  EXPECT_EQ(PollFor(50), nullptr);  // stream 0 of 2: no link yet
  close(a0);
  int b1 = Stream(1, 2, 3);
  int b0 = Stream(0, 2, 3);
  std::unique_ptr<Link> link = PollFor(2000);
  ASSERT_NE(link, nullptr) << "attempt 2 never became a link";
  EXPECT_EQ(link->streams(), 2);
  for (int s = 0; s < 2; ++s) {
    char out = static_cast<char>('a' + s);
    ASSERT_EQ(send(s == 0 ? b0 : b1, &out, 1, MSG_NOSIGNAL), 1);
    char in = 0;
    size_t n = 0;
    int err = 0;
    IoState st = IoState::kAgain;
    Deadline dl = Deadline::AfterMs(2000);
    while (st == IoState::kAgain && !dl.Expired()) st = link->Read(s, &in, 1, &n, &err);
    EXPECT_EQ(st, IoState::kOk) << "stream " << s << " of the link is not attempt 2's socket";
    EXPECT_EQ(in, out) << "stream " << s;
  }
  EXPECT_EQ(PollFor(50), nullptr);
  close(b0), close(b1);
}

// A stream whose link never completes is closed once RERAIL_CONNECT_TIMEOUT_MS passed (300 ms here),
// as a stream that never sends its hello is: the listener lives as long as its recv comm.
TEST_F(TcpListenerTest, AStreamWhoseLinkNeverCompletesIsClosedAfterTheConnectTimeout) {
  int a0 = Stream(0, 2, 0);
  Deadline dl = Deadline::AfterMs(2000);
  bool closed = false;
  while (!closed && !dl.Expired()) {
    std::unique_ptr<Link> link;
    ASSERT_TRUE(ls_->Poll(&link).ok());
    ASSERT_EQ(link, nullptr);
    closed = ClosedByListener(a0, 10);
  }
  EXPECT_TRUE(closed) << "the listener kept half a link's socket past the connect timeout";
  close(a0);
}

}  // namespace
}  // namespace rr::net::tcp
