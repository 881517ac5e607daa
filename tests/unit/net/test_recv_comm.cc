// RecvComm's read pass (recv_comm.cc, Progress) driven over socketpairs that play the sender's
// streams (the TCP transport's TcpLink on a socketpair: the same I/O, no TCP_INFO, so no stall
// watchdog): frames are written by hand, so the order in which a failover's pieces reach the receiver
// is chosen here, not left to timing.
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "conn.h"
#include "request.h"
#include "transport.h"
#include "transports/tcp/tcp.h"
#include "wire.h"

namespace rr::net {
namespace {

class QueueListener : public Listener {
 public:
  Status Poll(std::unique_ptr<Link>* out) override {
    if (!links.empty()) *out = std::move(links.front()), links.pop_front();
    return Status::Ok();
  }
  std::deque<std::unique_ptr<Link>> links;
};

constexpr uint64_t kConn = 0x5eed0000c0ffee11ull;
constexpr uint32_t kChunk = 64 * 1024;

class RecvCommTest : public ::testing::Test {
 protected:
  // Links 0..n-1, one stream each; link 0 is the one the comm is created with.
  void Open(int n) {
    auto listener = std::make_unique<QueueListener>();
    std::unique_ptr<Link> first;
    for (int i = 0; i < n; ++i) {
      int sv[2];
      ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
      int big = 4 << 20;
      setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
      setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
      sender_.push_back(sv[1]);
      receiver_.push_back(sv[0]);
      LinkIdentity id;
      id.conn_id = kConn;
      id.chunk_size = kChunk;
      id.rail = i;
      id.link = i;
      auto link = std::make_unique<tcp::TcpLink>(std::vector<int>{sv[0]}, id, "pair link " + std::to_string(i));
      if (i == 0) first = std::move(link);
      else listener->links.push_back(std::move(link));
    }
    comm_ = std::make_unique<RecvComm>(cfg_, std::move(listener), std::move(first));
  }
  void TearDown() override {
    comm_.reset();
    for (int fd : sender_) close(fd);
  }
  // Writes bytes on link `l` as the sender would (all of them: the socket buffers are large).
  void Send(int l, const void* p, size_t len) {
    ASSERT_EQ(write(sender_[l], p, len), static_cast<ssize_t>(len));
  }
  static Frame Data(uint64_t seq, uint32_t len, uint64_t total) {
    return Frame{FrameMagic(FrameType::kData), len, static_cast<uint32_t>(kConn), 0, seq, 0, total};
  }
  // test() until done or about 2 s of calls: a bound on a loop, not a timing assertion.
  bool TestUntilDone(Request* r, int* size, int* calls) {
    int done = 0;
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (*calls = 0; !done && std::chrono::steady_clock::now() < end; ++*calls) {
      EXPECT_TRUE(comm_->Test(r, &done, size).ok());
    }
    return done != 0;
  }

  // Bytes waiting in link l's socket, not yet read by the comm.
  int Unread(int l) const {
    int n = -1;
    EXPECT_EQ(ioctl(receiver_[l], FIONREAD, &n), 0);
    return n;
  }

  ConnConfig cfg_;
  std::vector<int> sender_;
  std::vector<int> receiver_;  // the comm's ends (its TcpLinks close them)
  std::unique_ptr<RecvComm> comm_;
};

// A failover as the receiver sees it when only the sender saw the link go down (its rail's switch
// port, not the receiver's): link 0 carried half a chunk and died; the sender re-sent the chunk on
// link 2 and wrote its link-down notice for link 0 on link 1, which arrives after the copy. The copy
// completes the message, but NCCL must not get the buffer while link 0's stream is still placing
// into it, so the completion waits for link 0 to be dropped: for the notice. test() used to stop
// reading once the tested receive was complete in the core's prefix, which was already true, so it
// read link 0 alone and never the notice; only the stall watchdog (RERAIL_STALL_MS later) ended it.
// Seen on 2 netns hosts x 4 rails at 500 Mbit/s, rerail-perf -C 4 sendrecv, rail 1 of host 0 down:
// 0.66-0.81 s stalls in about 1 of 12 runs.
TEST_F(RecvCommTest, ACompletionWaitingForADeadLinksNoticeReadsTheNotice) {
  Open(3);
  std::vector<uint8_t> payload(kChunk), buf(kChunk, 0);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 131 + 7);
  void* data = buf.data();
  size_t cap = buf.size();
  int tag = 0;
  Request* r = nullptr;
  ASSERT_TRUE(comm_->Irecv(1, &data, &cap, &tag, nullptr, &r).ok());
  ASSERT_NE(r, nullptr);

  Frame f = Data(0, kChunk, kChunk);
  Send(0, &f, sizeof f);             // link 0: the header and 1000 bytes, then the link died
  Send(0, payload.data(), 1000);
  Send(2, &f, sizeof f);             // link 2: the re-sent chunk, whole
  Send(2, payload.data(), payload.size());
  int done = 0, size = 0;
  for (int i = 0; i < 50; ++i) {     // attaches links 1 and 2, reads both copies
    ASSERT_TRUE(comm_->Test(r, &done, &size).ok());
    ASSERT_EQ(done, 0) << "done while link 0 still writes into the buffer";
  }

  Frame notice{FrameMagic(FrameType::kLinkDown), 0, static_cast<uint32_t>(kConn), 1, 0, 0, 0};
  Send(1, &notice, sizeof notice);   // link 1: "link 0 is down, epoch 1"
  int calls = 0;
  ASSERT_TRUE(TestUntilDone(r, &size, &calls)) << "the notice on link 1 was never read (" << calls << " test() calls)";
  EXPECT_EQ(size, static_cast<int>(kChunk));
  EXPECT_EQ(0, std::memcmp(buf.data(), payload.data(), payload.size()));
}

// A message that came before its receive was posted (read ahead with the one before it) completes at
// irecv from what was read, and test() reports it, without another read: on a ping-pong's critical
// path that read is a recv that finds nothing (the one that brought the message drained the socket).
// The next message, already in the socket, stays there until a test() of its own receive.
TEST_F(RecvCommTest, AReceivePostedAfterItsMessageCameCompletesWithoutARead) {
  Open(1);
  const uint8_t m[3][8] = {{1, 2, 3, 4, 5, 6, 7, 8}, {11, 12, 13, 14, 15, 16, 17, 18}, {21, 22, 23, 24, 25, 26, 27, 28}};
  uint8_t buf[3][8] = {};
  Request* r[3] = {};
  auto post = [&](int k) {
    void* data = buf[k];
    size_t cap = sizeof buf[k];
    int tag = 0;
    ASSERT_TRUE(comm_->Irecv(1, &data, &cap, &tag, nullptr, &r[k]).ok());
    ASSERT_NE(r[k], nullptr);
  };
  for (int k = 0; k < 2; ++k) {      // messages 0 and 1, one read brings both
    Frame f = Data(static_cast<uint64_t>(k), 8, 8);
    Send(0, &f, sizeof f);
    Send(0, m[k], 8);
  }
  post(0);
  int size = 0, calls = 0;
  ASSERT_TRUE(TestUntilDone(r[0], &size, &calls));
  ASSERT_EQ(Unread(0), 0) << "message 1 was not read with message 0";

  Frame f2 = Data(2, 8, 8);          // message 2 waits in the socket
  Send(0, &f2, sizeof f2);
  Send(0, m[2], 8);
  post(1);
  int done = 0;
  ASSERT_TRUE(comm_->Test(r[1], &done, &size).ok());
  EXPECT_EQ(done, 1) << "message 1 was in hand when its receive was posted";
  EXPECT_EQ(size, 8);
  EXPECT_EQ(0, std::memcmp(buf[1], m[1], 8));
  EXPECT_EQ(Unread(0), static_cast<int>(sizeof f2 + 8)) << "irecv or test() of a message already read read the socket";

  post(2);
  ASSERT_TRUE(TestUntilDone(r[2], &size, &calls));
  EXPECT_EQ(0, std::memcmp(buf[2], m[2], 8));
  EXPECT_EQ(Unread(0), 0);
}

}  // namespace
}  // namespace rr::net
