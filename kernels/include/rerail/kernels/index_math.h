// Index math of the staging kernels, shared by the device code and a host emulation of the grid.
//
// Contract: every function here is pure (no globals, no CUDA calls) and compiles both with nvcc
// (as __host__ __device__) and with a plain C++ compiler, so tests/unit/kernels_emu_test.cc runs the
// exact per-thread code the kernels run, thread by thread, and compares bytes with a reference.
//
// Copy layout: a copy of `bytes` from src to dst is cut into a head (bytes until src reaches a
// 16-byte boundary), a body of 16-byte vectors and a tail. The body uses 16-byte loads/stores only
// when src and dst are equally misaligned mod 16; otherwise the whole copy is byte-wise (still
// grid-stride). Thread t of T handles head bytes, body vectors and tail bytes t, t+T, t+2T ... (head
// and tail are < 16 bytes, so with T >= 16 threads 0..15 take them in one step).
//
// Checksum: XXH64 (seed-compatible with libxxhash's XXH64) of fixed-size segments, one segment per
// thread (grid-stride over segments), then XXH64 of the array of segment hashes (little-endian
// uint64 values). A chunk of at most one segment hashes to XXH64(chunk, seed) itself.
#pragma once
#include <stdint.h>

#if defined(__CUDACC__)
#define RERAIL_HD __host__ __device__ __forceinline__
#else
#define RERAIL_HD inline
#endif

namespace rerail::kernels {

inline constexpr uint64_t kVec = 16;                       // bytes per vector access
inline constexpr uint64_t kChecksumSegment = 64 * 1024;     // bytes hashed by one thread

struct alignas(16) Vec16 {
  uint64_t lo, hi;
};

struct CopyPlan {
  uint64_t head;    // bytes copied one by one before the body
  uint64_t nvec;    // 16-byte vectors in the body; 0 (all in head) when src/dst alignments differ
                    // or no whole vector fits
  uint64_t tail;    // bytes copied one by one after the body
};

RERAIL_HD CopyPlan MakeCopyPlan(uintptr_t src, uintptr_t dst, uint64_t bytes) {
  CopyPlan p{bytes, 0, 0};
  if (((src ^ dst) & (kVec - 1)) != 0) return p;             // mutually misaligned: bytes only
  uint64_t head = (kVec - (src & (kVec - 1))) & (kVec - 1);
  if (head + kVec > bytes) return p;                         // no whole vector: bytes only
  p.head = head;
  p.nvec = (bytes - head) / kVec;
  p.tail = bytes - head - p.nvec * kVec;
  return p;
}

// The work of thread `tid` of `nthreads` (grid-stride). Byte-wise parts go through volatile-free
// plain loads; the body through Vec16 (a 16-byte load/store on the device).
RERAIL_HD void CopyThread(const CopyPlan& p, uint64_t tid, uint64_t nthreads, const unsigned char* src,
                          unsigned char* dst) {
  if (p.nvec == 0) {
    for (uint64_t i = tid; i < p.head; i += nthreads) dst[i] = src[i];
    return;
  }
  for (uint64_t i = tid; i < p.head; i += nthreads) dst[i] = src[i];
  const Vec16* vs = reinterpret_cast<const Vec16*>(src + p.head);
  Vec16* vd = reinterpret_cast<Vec16*>(dst + p.head);
  for (uint64_t i = tid; i < p.nvec; i += nthreads) vd[i] = vs[i];
  uint64_t t0 = p.head + p.nvec * kVec;
  for (uint64_t i = tid; i < p.tail; i += nthreads) dst[t0 + i] = src[t0 + i];
}

// ---- XXH64 (the algorithm of libxxhash's XXH64; tests compare with it) ----------------------------
inline constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL, kP2 = 0xC2B2AE3D27D4EB4FULL,
                          kP3 = 0x165667B19E3779F9ULL, kP4 = 0x85EBCA77C2B2AE63ULL,
                          kP5 = 0x27D4EB2F165667C5ULL;

RERAIL_HD uint64_t Rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
RERAIL_HD uint64_t Read64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
RERAIL_HD uint32_t Read32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
RERAIL_HD uint64_t XxRound(uint64_t acc, uint64_t in) { return Rotl64(acc + in * kP2, 31) * kP1; }
RERAIL_HD uint64_t XxMerge(uint64_t acc, uint64_t v) { return (acc ^ XxRound(0, v)) * kP1 + kP4; }

RERAIL_HD uint64_t Xxh64(const unsigned char* p, uint64_t len, uint64_t seed) {
  const unsigned char* end = p + len;
  uint64_t h;
  if (len >= 32) {
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    const unsigned char* limit = end - 32;
    do {
      v1 = XxRound(v1, Read64(p)); v2 = XxRound(v2, Read64(p + 8));
      v3 = XxRound(v3, Read64(p + 16)); v4 = XxRound(v4, Read64(p + 24));
      p += 32;
    } while (p <= limit);
    h = Rotl64(v1, 1) + Rotl64(v2, 7) + Rotl64(v3, 12) + Rotl64(v4, 18);
    h = XxMerge(h, v1); h = XxMerge(h, v2); h = XxMerge(h, v3); h = XxMerge(h, v4);
  } else {
    h = seed + kP5;
  }
  h += len;
  while (p + 8 <= end) { h ^= XxRound(0, Read64(p)); h = Rotl64(h, 27) * kP1 + kP4; p += 8; }
  if (p + 4 <= end) { h ^= uint64_t(Read32(p)) * kP1; h = Rotl64(h, 23) * kP2 + kP3; p += 4; }
  while (p < end) { h ^= (*p) * kP5; h = Rotl64(h, 11) * kP1; ++p; }
  h ^= h >> 33; h *= kP2; h ^= h >> 29; h *= kP3; h ^= h >> 32;
  return h;
}

RERAIL_HD uint64_t ChecksumSegments(uint64_t bytes) {
  return bytes == 0 ? 1 : (bytes + kChecksumSegment - 1) / kChecksumSegment;
}

// Thread `tid` of `nthreads` hashes its segments of `data` into seg_hash[].
RERAIL_HD void ChecksumThread(uint64_t tid, uint64_t nthreads, const unsigned char* data, uint64_t bytes,
                              uint64_t seed, uint64_t* seg_hash) {
  uint64_t nseg = ChecksumSegments(bytes);
  for (uint64_t s = tid; s < nseg; s += nthreads) {
    uint64_t off = s * kChecksumSegment;
    uint64_t len = bytes - off < kChecksumSegment ? bytes - off : kChecksumSegment;
    seg_hash[s] = Xxh64(data + off, len, seed);
  }
}

// The chunk checksum from the segment hashes (one thread).
RERAIL_HD uint64_t ChecksumCombine(const uint64_t* seg_hash, uint64_t nseg, uint64_t seed) {
  if (nseg == 1) return seg_hash[0];
  return Xxh64(reinterpret_cast<const unsigned char*>(seg_hash), nseg * 8, seed);
}

}  // namespace rerail::kernels
