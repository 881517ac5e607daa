#include "pattern.h"

#include <cstring>

namespace rr::netbench {

uint64_t Mix(uint64_t seed, uint64_t n) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (n + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// One key per (seed, iter); words are key-dependent counters mixed cheaply so 256 MiB fill fast.
static inline uint64_t Key(uint64_t seed, uint64_t iter) {
  return Mix(seed ^ 0x5a17c0de, iter);
}
static inline uint64_t Word(uint64_t key, uint64_t w) {
  uint64_t z = (w + 1) * 0x9e3779b97f4a7c15ull ^ key;
  z ^= z >> 29;
  z *= 0xbf58476d1ce4e5b9ull;
  return z ^ (z >> 32);
}

uint8_t PatternByte(uint64_t seed, uint64_t iter, size_t offset) {
  uint64_t w = Word(Key(seed, iter), offset / 8);
  return static_cast<uint8_t>(w >> (8 * (offset % 8)));
}

void Fill(void* dst, size_t size, uint64_t seed, uint64_t iter) {
  uint64_t key = Key(seed, iter);
  auto* p = static_cast<uint8_t*>(dst);
  size_t words = size / 8;
  for (size_t w = 0; w < words; ++w) {
    uint64_t v = Word(key, w);
    std::memcpy(p + 8 * w, &v, 8);  // little-endian byte order = PatternByte's order on x86-64
  }
  for (size_t i = words * 8; i < size; ++i) p[i] = PatternByte(seed, iter, i);
}

size_t Check(const void* src, size_t size, uint64_t seed, uint64_t iter) {
  uint64_t key = Key(seed, iter);
  const auto* p = static_cast<const uint8_t*>(src);
  size_t words = size / 8;
  for (size_t w = 0; w < words; ++w) {
    uint64_t v;
    std::memcpy(&v, p + 8 * w, 8);
    if (v != Word(key, w)) {
      for (size_t i = 8 * w;; ++i)
        if (p[i] != PatternByte(seed, iter, i)) return i;
    }
  }
  for (size_t i = words * 8; i < size; ++i)
    if (p[i] != PatternByte(seed, iter, i)) return i;
  return size;
}

}  // namespace rr::netbench
