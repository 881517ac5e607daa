// libFuzzer target: the 128-byte listen handle NCCL carries between ranks (net_plugin/handle.cc).
// DecodeHandle must never crash on any bytes; a handle it accepts must re-encode to bytes that decode
// to the same handle (round trip).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <xxhash.h>

#include "handle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t in[rr::net::kHandleSize] = {};
  std::memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
  // Random bytes rarely pass the xxh32: a 129th byte with bit 0 set asks for magic, version and
  // checksum to be fixed up so that the address checks behind them are reached.
  if (size > sizeof(in) && (data[sizeof(in)] & 1)) {
    const uint32_t magic = rr::net::kHandleMagic;
    std::memcpy(in, &magic, 4);
    in[4] = rr::net::kHandleVersion;
    const uint32_t check = XXH32(in, 124, rr::net::kHandleMagic);
    std::memcpy(in + 124, &check, 4);
  }
  rr::net::Handle h;
  if (!rr::net::DecodeHandle(in, &h).ok()) return 0;
  if (h.addrs.empty() || h.addrs.size() > static_cast<size_t>(rr::net::kMaxAddrs)) std::abort();
  uint8_t out[rr::net::kHandleSize];
  if (!rr::net::EncodeHandle(h, out).ok()) std::abort();
  rr::net::Handle h2;
  if (!rr::net::DecodeHandle(out, &h2).ok()) std::abort();
  if (h2.nonce != h.nonce || h2.addrs.size() != h.addrs.size()) std::abort();
  for (size_t i = 0; i < h.addrs.size(); ++i) {
    if (h2.addrs[i].rail != h.addrs[i].rail || h2.addrs[i].addr.ToString() != h.addrs[i].addr.ToString()) std::abort();
  }
  return 0;
}
