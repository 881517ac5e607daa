// rerail tuner — the entry points both exported tables share (v5 and v6 differ only by getChunkSize).
//
// Contract: every function returns rrTunerSuccess, always: a tuner error fails comm init (init) or the
// collective (getCollInfo). Internal problems, exceptions included, are logged once and leave NCCL's
// choices unchanged; a context that could not be created is NULL and every later call on it is a no-op.
#pragma once

#include "tuner_abi.h"

namespace rr::tuner::abi {

// abi_version: 5 or 6, the table NCCL took (for the init log line).
rrTunerResult_t Init(int abi_version, void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                     rrTunerLogger_t logFn, rrTunerNvlDomainInfo_v5_t* nvlDomainInfo,
                     rrTunerConstants_v5_t* constants);
rrTunerResult_t GetCollInfo(void* ctx, int collType, size_t nBytes, int numPipeOps, float** collCostTable,
                            int numAlgo, int numProto, int regBuff, int* nChannels);
rrTunerResult_t Finalize(void* ctx);

}  // namespace rr::tuner::abi
