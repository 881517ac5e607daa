// libFuzzer target: the TCP hello a connecting stream sends first (transports/tcp CheckHello and
// CheckHelloTag). Random bytes rarely pass the xxh32 check, so the first input byte can ask for the
// magic, nonce and check to be fixed up and the field checks behind them are reached.
// Invariant: an accepted hello satisfies every documented bound (wire.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include <xxhash.h>

#include "transports/tcp/tcp.h"
#include "wire.h"

using namespace rr::net;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  ++data, --size;
  Hello h;
  std::memset(&h, 0, sizeof(h));
  std::memcpy(&h, data, size < sizeof(h) ? size : sizeof(h));
  Nonce nonce;
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<uint8_t>(0xa0 + i);
  if (mode & 1) {
    h.magic = kHelloMagic;
    if (mode & 2) std::memcpy(h.nonce, nonce.data(), sizeof(h.nonce));
    if (mode & 4) h.version = kWireVersion;
    h.check = XXH32(&h, offsetof(Hello, check), kHelloMagic);
  }
  const std::string secret = (mode & 8) ? std::string("fuzz-secret") : std::string();
  std::string why;
  bool tag_follows = false;
  if (!tcp::CheckHello(h, nonce, secret, &tag_follows, &why)) {
    if (why.empty()) std::abort();  // a rejection always says why
    return 0;
  }
  if (h.magic != kHelloMagic || h.version != kWireVersion || h.nstreams < 1 || h.nstreams > kMaxStreams ||
      h.stream >= h.nstreams || h.chunk_size < 4096 || h.chunk_size > (64u << 20) ||
      std::memcmp(h.nonce, nonce.data(), sizeof(h.nonce)) != 0 || tag_follows != !secret.empty()) {
    std::abort();
  }
  if (tag_follows) {
    uint8_t tag[32] = {};
    const size_t rest = size > sizeof(h) ? size - sizeof(h) : 0;
    std::memcpy(tag, data + sizeof(h), rest < sizeof(tag) ? rest : sizeof(tag));
    (void)tcp::CheckHelloTag(h, secret, tag, &why);
  }
  return 0;
}
