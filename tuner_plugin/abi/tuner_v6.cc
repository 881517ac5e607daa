// ncclTunerPlugin_v6 (NCCL 2.30): v5 plus getChunkSize, which keeps NCCL's chunk size (rerail moves
// chunks between rails inside the net plugin; NCCL's chunking is not what a lost rail changes).
#include "shim.h"

namespace {

rrTunerResult_t Init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, rrTunerLogger_t logFn,
                     rrTunerNvlDomainInfo_v5_t* nvl, rrTunerConstants_v5_t* constants) {
  return rr::tuner::abi::Init(6, ctx, commId, nRanks, nNodes, logFn, nvl, constants);
}

rrTunerResult_t GetChunkSize(void* /*ctx*/, int /*collType*/, size_t /*nBytes*/, int /*algo*/, int /*proto*/,
                             int /*nChannels*/, size_t* /*chunkSize*/) {
  return rrTunerSuccess;
}

}  // namespace

extern "C" __attribute__((visibility("default")))
const rrTuner_v6_t ncclTunerPlugin_v6 = {"rerail", Init, rr::tuner::abi::GetCollInfo, rr::tuner::abi::Finalize,
                                         GetChunkSize};
