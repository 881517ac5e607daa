#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "handle.h"

namespace {

using namespace rr::net;

Handle TwoRails() {
  Handle h;
  EXPECT_TRUE(RandomNonce(&h.nonce).ok());
  HandleAddr a, b;
  EXPECT_TRUE(rr::sock::Addr::Parse("10.0.0.1", 5000, &a.addr));
  a.rail = 0;
  EXPECT_TRUE(rr::sock::Addr::Parse("fd00::1:2", 6000, &b.addr));
  b.rail = 3;
  h.addrs = {a, b};
  return h;
}

TEST(Handle, RoundTripKeepsNonceAndEveryAddress) {
  Handle h = TwoRails();
  uint8_t buf[kHandleSize];
  ASSERT_TRUE(EncodeHandle(h, buf).ok());
  Handle d;
  rr::Status st = DecodeHandle(buf, &d);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(d.nonce, h.nonce);
  ASSERT_EQ(d.addrs.size(), 2u);
  EXPECT_EQ(d.addrs[0].addr.ToString(), "10.0.0.1:5000");
  EXPECT_EQ(d.addrs[1].addr.ToString(), "[fd00::1:2]:6000");
  EXPECT_EQ(d.addrs[1].rail, 3);
}

TEST(Handle, CarriesUpToMaxAddrs) {
  Handle h = TwoRails();
  while (h.addrs.size() < static_cast<size_t>(kMaxAddrs)) h.addrs.push_back(h.addrs[0]);
  uint8_t buf[kHandleSize];
  EXPECT_TRUE(EncodeHandle(h, buf).ok());
  h.addrs.push_back(h.addrs[0]);
  EXPECT_EQ(EncodeHandle(h, buf).code(), rr::Code::kInvalidArgument);
  h.addrs.clear();
  EXPECT_EQ(EncodeHandle(h, buf).code(), rr::Code::kInvalidArgument);
}

TEST(Handle, NoncesDiffer) {
  Nonce a, b;
  ASSERT_TRUE(RandomNonce(&a).ok());
  ASSERT_TRUE(RandomNonce(&b).ok());
  EXPECT_NE(a, b);
}

TEST(Handle, GarbageIsRejectedWithReason) {
  std::mt19937 rng(42);
  uint8_t buf[kHandleSize];
  for (int iter = 0; iter < 2000; ++iter) {
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    Handle d;
    rr::Status st = DecodeHandle(buf, &d);
    EXPECT_EQ(st.code(), rr::Code::kInvalidArgument);
    EXPECT_FALSE(st.message().empty());
  }
  Handle d;
  EXPECT_EQ(DecodeHandle(nullptr, &d).code(), rr::Code::kInvalidArgument);
  std::memset(buf, 0, sizeof(buf));
  EXPECT_NE(DecodeHandle(buf, &d).message().find("bad magic"), std::string::npos);
}

TEST(Handle, TruncatedOrFlippedIsRejected) {
  uint8_t good[kHandleSize];
  ASSERT_TRUE(EncodeHandle(TwoRails(), good).ok());
  for (size_t cut = 8; cut < kHandleSize; cut += 8) {
    uint8_t buf[kHandleSize] = {0};
    std::memcpy(buf, good, cut);
    Handle d;
    EXPECT_FALSE(DecodeHandle(buf, &d).ok()) << "cut at " << cut;
  }
  for (size_t i = 0; i < kHandleSize; ++i) {
    uint8_t buf[kHandleSize];
    std::memcpy(buf, good, sizeof(buf));
    buf[i] ^= 0x10;
    Handle d;
    EXPECT_FALSE(DecodeHandle(buf, &d).ok()) << "bit flip at byte " << i;
  }
}

}  // namespace
