// rerail-netbench — deterministic message content and size sequences.
//
// Both ends of a connection compute the same bytes independently, so the receiver can check a message
// byte for byte without the sender shipping a copy. Content depends on a seed (per stream/comm), the
// message index (iteration) and the byte offset, so a chunk placed at the wrong offset, a stale chunk
// of an earlier message or a message delivered out of order never matches.
//
// Contract: pure functions, thread-safe, no allocation. Fill/Check run at several GB/s (64-bit words).
#pragma once

#include <cstddef>
#include <cstdint>

namespace rr::netbench {

// Expected byte at `offset` of message `iter` of stream `seed`.
uint8_t PatternByte(uint64_t seed, uint64_t iter, size_t offset);

// Writes PatternByte(seed, iter, i) for i in [0, size) to dst.
void Fill(void* dst, size_t size, uint64_t seed, uint64_t iter);

// Returns size if every byte matches, else the offset of the first wrong byte.
size_t Check(const void* src, size_t size, uint64_t seed, uint64_t iter);

// Stateless random numbers: the n-th value of stream `seed` (splitmix64).
uint64_t Mix(uint64_t seed, uint64_t n);

}  // namespace rr::netbench
