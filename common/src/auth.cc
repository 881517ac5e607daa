#include "rerail/auth.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>
#include <vector>

#include "rerail/params.h"

namespace rr::auth {

bool ConstantTimeEqual(const void* a, const void* b, size_t n) {
  const auto* x = static_cast<const volatile uint8_t*>(a);
  const auto* y = static_cast<const volatile uint8_t*>(b);
  uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff |= static_cast<uint8_t>(x[i] ^ y[i]);
  return diff == 0;
}

bool Hmac(const std::string& key, const char* context, const void* data, size_t n, Tag* out) {
  const size_t clen = std::strlen(context);
  std::vector<uint8_t> msg(clen + n);
  std::memcpy(msg.data(), context, clen);
  if (n > 0) std::memcpy(msg.data() + clen, data, n);
  unsigned int len = 0;
  const unsigned char* r = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(),
                                out->data(), &len);
  return r != nullptr && len == kTagBytes;
}

bool VerifyHmac(const std::string& key, const char* context, const void* data, size_t n, const uint8_t* tag) {
  Tag want;
  if (!Hmac(key, context, data, n, &want)) return false;
  return ConstantTimeEqual(want.data(), tag, kTagBytes);
}

const std::string& JobSecret() {
  static const std::string secret = [] {
    if (!Params::Load().ok()) return std::string();
    return Params::Str(ParamId::JobSecret);
  }();
  return secret;
}

}  // namespace rr::auth
