// ncclTunerPlugin_v5 (NCCL 2.28): the table NCCL 2.28.9 finds first. Nothing else is extern "C".
#include "shim.h"

namespace {

rrTunerResult_t Init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, rrTunerLogger_t logFn,
                     rrTunerNvlDomainInfo_v5_t* nvl, rrTunerConstants_v5_t* constants) {
  return rr::tuner::abi::Init(5, ctx, commId, nRanks, nNodes, logFn, nvl, constants);
}

}  // namespace

extern "C" __attribute__((visibility("default")))
const rrTuner_v5_t ncclTunerPlugin_v5 = {"rerail", Init, rr::tuner::abi::GetCollInfo, rr::tuner::abi::Finalize};
