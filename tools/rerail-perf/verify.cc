#include "verify.h"

namespace rr::perf {
namespace {

constexpr int32_t kPoison = 1000003;  // far outside any reachable sum of inputs for sane rank counts

inline int32_t V(int rank, size_t i, uint32_t seed) {
  return static_cast<int32_t>((i * 7 + static_cast<size_t>(rank) * 13 + seed * 5) % 31) - 15;
}

template <typename T>
void FillT(const VerifyArgs& a, T* in, size_t n) {
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<T>(V(a.rank, i, a.seed));
}

// Expected value of output element i of this rank.
int64_t Expected(const VerifyArgs& a, size_t i) {
  const size_t cnt = a.count;
  switch (a.coll) {
    case Coll::kAllReduce: {
      int64_t s = 0;
      for (int q = 0; q < a.nranks; ++q) s += V(q, i, a.seed);
      return s;
    }
    case Coll::kAllGather: return V(static_cast<int>(i / cnt), i % cnt, a.seed);
    case Coll::kReduceScatter: {
      int64_t s = 0;
      for (int q = 0; q < a.nranks; ++q) s += V(q, a.rank * cnt + i, a.seed);
      return s;
    }
    case Coll::kBroadcast: return V(a.root, i, a.seed);
    case Coll::kSendRecv: return V((a.rank + a.nranks - 1) % a.nranks, i, a.seed);
    case Coll::kAllToAll: return V(static_cast<int>(i / cnt), a.rank * cnt + i % cnt, a.seed);
  }
  return 0;
}

template <typename T>
uint64_t CountT(const VerifyArgs& a, const T* out, size_t n) {
  uint64_t wrong = 0;
  for (size_t i = 0; i < n; ++i)
    if (out[i] != static_cast<T>(Expected(a, i))) ++wrong;
  return wrong;
}

}  // namespace

void FillInput(const VerifyArgs& a, char* in, size_t in_bytes) {
  if (a.dtype == DataType::kFloat) FillT(a, reinterpret_cast<float*>(in), in_bytes / sizeof(float));
  else FillT(a, reinterpret_cast<int32_t*>(in), in_bytes / sizeof(int32_t));
}

void Poison(const VerifyArgs& a, char* out, size_t out_bytes) {
  size_t n = out_bytes / 4;
  if (a.dtype == DataType::kFloat) {
    float* f = reinterpret_cast<float*>(out);
    for (size_t i = 0; i < n; ++i) f[i] = static_cast<float>(kPoison);
  } else {
    int32_t* v = reinterpret_cast<int32_t*>(out);
    for (size_t i = 0; i < n; ++i) v[i] = kPoison;
  }
}

uint64_t CountWrong(const VerifyArgs& a, const char* out, size_t out_bytes) {
  if (a.dtype == DataType::kFloat) return CountT(a, reinterpret_cast<const float*>(out), out_bytes / sizeof(float));
  return CountT(a, reinterpret_cast<const int32_t*>(out), out_bytes / sizeof(int32_t));
}

}  // namespace rr::perf
