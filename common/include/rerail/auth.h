// rerail — authentication helpers shared by the net plugin's hello and the bootstrap exchange (issue 15).
//
// Contract
//   * ConstantTimeEqual compares two byte strings in time that depends only on n (no early exit), for
//     nonces, magics and tags received from the network.
//   * JobSecret() is RERAIL_JOB_SECRET (empty when unset): a secret every process of the job shares.
//     When set, each side proves it with a tag = HMAC-SHA256(secret, context || message) sent with its
//     hello/request; a receiver with the secret rejects messages without a valid tag, so a stranger (a
//     port scanner, or someone replaying a handle it obtained) never gets past the hello. The secret is
//     never logged (RERAIL_DUMP_PARAMS prints "(hidden)").
//   * Hmac uses OpenSSL's libcrypto (HMAC with EVP_sha256). Thread-safe; no state.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace rr::auth {

constexpr size_t kTagBytes = 32;
using Tag = std::array<uint8_t, kTagBytes>;

bool ConstantTimeEqual(const void* a, const void* b, size_t n);

// HMAC-SHA256(key, context || data); `context` names the protocol step so a tag of one message is
// never valid for another. False only if libcrypto fails (not expected).
bool Hmac(const std::string& key, const char* context, const void* data, size_t n, Tag* out);

// True when `tag` is HMAC(key, context || data) (compared in constant time).
bool VerifyHmac(const std::string& key, const char* context, const void* data, size_t n, const uint8_t* tag);

// RERAIL_JOB_SECRET, read once (empty when unset).
const std::string& JobSecret();

}  // namespace rr::auth
