// rerail — the 128-byte listen handle NCCL carries from the receiving rank to the sending rank.
//
// Layout (all multi-byte fields little-endian except ports, which are network order):
//   0   u32  magic 'RRLH'          4  u8 version (1)   5  u8 naddr (1..kMaxAddrs)   6  u16 reserved (0)
//   8   u8[16] nonce (getrandom)   — a connecting stream must echo it in its hello
//   24  kMaxAddrs × 20-byte address entries: u8 family (4|6), u8 rail, u16 port (network order),
//       u8[16] address (IPv4 uses the first 4 bytes; the rest must be zero)
//   124 u32  xxh32 of bytes 0..123 (seed kHandleMagic) — catches garbage and truncated handles
// Entry 0 is the primary rail (the NCCL device listen() was called on); the others let a sender reach
// the listener when the primary rail is down at connect time (issue 4).
//
// Contract: Encode never fails for valid input (≤ kMaxAddrs addresses). Decode never trusts its input:
// any inconsistency returns Code::kInvalidArgument with a message saying what is wrong. Value types,
// thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "rerail/sock.h"
#include "rerail/status.h"

namespace rr::net {

constexpr size_t kHandleSize = 128;
constexpr uint32_t kHandleMagic = 0x484c5252u;  // "RRLH" little-endian
constexpr uint8_t kHandleVersion = 1;
constexpr int kMaxAddrs = 5;

using Nonce = std::array<uint8_t, 16>;

struct HandleAddr {
  int rail = 0;    // listener's device index
  sock::Addr addr;  // includes the port
};

struct Handle {
  Nonce nonce{};
  std::vector<HandleAddr> addrs;  // [0] = primary
};

// Fills `out` (exactly kHandleSize bytes). kInvalidArgument when addrs is empty or too long or an
// address is neither IPv4 nor IPv6.
Status EncodeHandle(const Handle& h, void* out);
Status DecodeHandle(const void* in, Handle* h);

// 16 random bytes from getrandom(); kSystemError when the kernel cannot provide them.
Status RandomNonce(Nonce* n);
Status RandomU64(uint64_t* v);

}  // namespace rr::net
