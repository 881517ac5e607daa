// The shared tuner entry points (shim.h): NCCL's arguments in, rr::tuner::CommTuner calls out, no
// error and no exception back.
#include "shim.h"

#include <new>

#include "../src/tuner.h"
#include "rerail/log.h"

namespace rr::tuner::abi {

rrTunerResult_t Init(int abi_version, void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                     rrTunerLogger_t logFn, rrTunerNvlDomainInfo_v5_t* /*nvlDomainInfo*/,
                     rrTunerConstants_v5_t* constants) {
  if (ctx == nullptr) return rrTunerSuccess;
  *ctx = nullptr;
  bool acquired = false;
  try {
    auto settings = Acquire(logFn, abi_version);
    acquired = true;
    *ctx = new CommTuner(commId, nRanks, nNodes, logFn, constants, std::move(settings));
  } catch (...) {
    if (acquired) Release();
    if (logFn != nullptr) {
      logFn(static_cast<int>(log::Level::kWarn), log::kFlagAll, __FILE__, __LINE__,
            "TUNER/rerail : comm %#llx: cannot set up the tuner (out of memory?); NCCL's choices stand",
            static_cast<unsigned long long>(commId));
    }
  }
  return rrTunerSuccess;
}

rrTunerResult_t GetCollInfo(void* ctx, int collType, size_t nBytes, int /*numPipeOps*/, float** collCostTable,
                            int numAlgo, int numProto, int /*regBuff*/, int* nChannels) {
  auto* t = static_cast<CommTuner*>(ctx);
  if (t == nullptr) return rrTunerSuccess;
  // Work on a copy so an exception half-way leaves NCCL's table exactly as it came.
  // NCCL 2.28/2.30 pass 7 x 3; a few more rows or columns (a newer NCCL) are tolerated, not required.
  constexpr int kMaxAlgo = 16, kMaxProto = 8;
  float copy[kMaxAlgo * kMaxProto];
  float* table = reinterpret_cast<float*>(collCostTable);
  if (table == nullptr || numAlgo <= 0 || numProto <= 0 || numAlgo > kMaxAlgo || numProto > kMaxProto) {
    t->WarnOnce("cost table of an unexpected shape");
    return rrTunerSuccess;
  }
  const int n = numAlgo * numProto;
  for (int i = 0; i < n; ++i) copy[i] = table[i];
  int ch = nChannels != nullptr ? *nChannels : 0;
  try {
    t->GetCollInfo(collType, nBytes, copy, numAlgo, numProto, &ch);
  } catch (...) {
    t->WarnOnce("internal error");
    return rrTunerSuccess;
  }
  for (int i = 0; i < n; ++i) table[i] = copy[i];
  if (nChannels != nullptr) *nChannels = ch;
  return rrTunerSuccess;
}

rrTunerResult_t Finalize(void* ctx) {
  auto* t = static_cast<CommTuner*>(ctx);
  if (t == nullptr) return rrTunerSuccess;
  delete t;
  Release();
  return rrTunerSuccess;
}

}  // namespace rr::tuner::abi
