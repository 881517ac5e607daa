// rerail's own declarations of NCCL's tuner plugin ABI, versions 5 (NCCL 2.28) and 6 (2.30).
//
// Written from shared/reference/nccl-plugin-abi.md §5 and checked against the layout NCCL 2.28.9
// compiles (the constants struct is 144 doubles = 1152 bytes). Every size and offset is asserted
// below, so a mismatch breaks the build instead of a job. Names carry an `rrTuner` prefix so this
// header can coexist with nccl.h in one translation unit (tests and the benchmark include both).
//
// Ownership, as NCCL uses the table:
//   * init(ctx, commId, nRanks, nNodes, logFn, nvlDomainInfo, constants): once per communicator,
//     before NCCL computes its model. `constants` is NCCL's 1152-byte struct, in/out; rerail only
//     reads it (never writes past, nor into, what NCCL owns). A non-success result fails comm init.
//   * getCollInfo(ctx, collType, nBytes, numPipeOps, costTable, numAlgo, numProto, regBuff, nChannels):
//     once per collective task at enqueue; `costTable` is really float[numAlgo][numProto] cast to
//     float**; -1.0 marks a combination NCCL cannot use. NCCL takes the smallest non-negative entry.
//     *nChannels comes in as 0 (keep NCCL's choice); non-zero replaces NCCL's size-based channel count
//     for the task (getAlgoInfo in 2.28.9; the comm's channel count still bounds it). A non-success
//     result FAILS THE COLLECTIVE (2.28.9 propagates it), so rerail always returns success.
//   * finalize(ctx): at communicator destroy.
//   * v6 (2.30) adds getChunkSize(ctx, collType, nBytes, algo, proto, nChannels, size_t* chunkSize),
//     optional (NULL = keep NCCL's).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

typedef int rrTunerResult_t;  // ncclResult_t; rerail's tuner returns 0 (ncclSuccess) only
enum { rrTunerSuccess = 0 };

typedef void (*rrTunerLogger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// Algorithm, protocol and index constants of the v5/v6 tables (reference §5).
enum {
  RR_TUNER_NUM_ALGORITHMS = 7,  // TREE, RING, COLLNET_DIRECT, COLLNET_CHAIN, NVLS, NVLS_TREE, PAT
  RR_TUNER_NUM_PROTOCOLS = 3,   // LL, LL128, SIMPLE
  RR_TUNER_NUM_HW_LINKS = 3,    // NVLINK, PCI, NET
  RR_TUNER_NUM_COMPCAPS = 4,    // VOLTA, AMPERE, HOPPER, BLACKWELL
  RR_TUNER_NUM_TUNING_SCALES = 3,  // 1 node, 2 nodes, 4 nodes
};
enum {
  RR_ALGO_TREE = 0,
  RR_ALGO_RING = 1,
  RR_ALGO_COLLNET_DIRECT = 2,
  RR_ALGO_COLLNET_CHAIN = 3,
  RR_ALGO_NVLS = 4,
  RR_ALGO_NVLS_TREE = 5,
  RR_ALGO_PAT = 6,
};
enum { RR_PROTO_LL = 0, RR_PROTO_LL128 = 1, RR_PROTO_SIMPLE = 2 };
enum { RR_HW_NVLINK = 0, RR_HW_PCI = 1, RR_HW_NET = 2 };
// ncclFunc_t values (an int-sized enum in NCCL).
enum {
  RR_FUNC_BROADCAST = 0,
  RR_FUNC_REDUCE = 1,
  RR_FUNC_ALLGATHER = 2,
  RR_FUNC_REDUCESCATTER = 3,
  RR_FUNC_ALLREDUCE = 4,
  RR_FUNC_SENDRECV = 5,
  RR_FUNC_SEND = 6,
  RR_FUNC_RECV = 7,
  RR_FUNC_ALLTOALL = 8,
  RR_FUNC_SCATTER = 9,
  RR_FUNC_GATHER = 10,
  RR_FUNC_COUNT = 11,
};
#define RR_TUNER_ALGO_PROTO_IGNORE (-1.0f)  // a cost-table entry NCCL cannot use

typedef struct {
  int nNvlDomains;           // NVLink domains in the communicator
  int minRanksPerNvlDomain;  // fewest ranks of any domain
  int maxRanksPerNvlDomain;  // most ranks of any domain
} rrTunerNvlDomainInfo_v5_t;  // v6: same

// NCCL's tuning constants (µs and GB/s), in/out at init. 1152 bytes in NCCL 2.28.9 and 2.30.
typedef struct {
  double baseLatencies[RR_TUNER_NUM_ALGORITHMS][RR_TUNER_NUM_PROTOCOLS];
  double hwLatencies[RR_TUNER_NUM_HW_LINKS][RR_TUNER_NUM_ALGORITHMS][RR_TUNER_NUM_PROTOCOLS];
  double llMaxBws[RR_TUNER_NUM_COMPCAPS][RR_TUNER_NUM_TUNING_SCALES];
  double perChMaxRingLL128Bws[RR_TUNER_NUM_COMPCAPS][RR_TUNER_NUM_TUNING_SCALES];
  double perChMaxTreeLL128Bws[RR_TUNER_NUM_COMPCAPS][RR_TUNER_NUM_TUNING_SCALES];
  double perChMaxTreeBws[RR_TUNER_NUM_COMPCAPS][RR_TUNER_NUM_TUNING_SCALES];
  double perChMaxNVLSTreeBws[RR_TUNER_NUM_COMPCAPS][RR_TUNER_NUM_TUNING_SCALES];
} rrTunerConstants_v5_t;  // v6: same

typedef rrTunerResult_t (*rrTunerInit_v5_fn)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                                             rrTunerLogger_t logFn, rrTunerNvlDomainInfo_v5_t* nvlDomainInfo,
                                             rrTunerConstants_v5_t* constants);
typedef rrTunerResult_t (*rrTunerGetCollInfo_v5_fn)(void* ctx, int collType, size_t nBytes, int numPipeOps,
                                                    float** collCostTable, int numAlgo, int numProto, int regBuff,
                                                    int* nChannels);
typedef rrTunerResult_t (*rrTunerFinalize_v5_fn)(void* ctx);
typedef rrTunerResult_t (*rrTunerGetChunkSize_v6_fn)(void* ctx, int collType, size_t nBytes, int algo, int proto,
                                                     int nChannels, size_t* chunkSize);

typedef struct {
  const char* name;
  rrTunerInit_v5_fn init;
  rrTunerGetCollInfo_v5_fn getCollInfo;
  rrTunerFinalize_v5_fn finalize;
} rrTuner_v5_t;

typedef struct {
  const char* name;
  rrTunerInit_v5_fn init;
  rrTunerGetCollInfo_v5_fn getCollInfo;
  rrTunerFinalize_v5_fn finalize;
  rrTunerGetChunkSize_v6_fn getChunkSize;
} rrTuner_v6_t;

}  // extern "C"

// ---- layout facts (x86-64 / aarch64 LP64) ----------------------------------------------------------
static_assert(sizeof(rrTunerConstants_v5_t) == 1152, "NCCL's tuner constants struct is 1152 bytes");
static_assert(offsetof(rrTunerConstants_v5_t, baseLatencies) == 0);
static_assert(offsetof(rrTunerConstants_v5_t, hwLatencies) == 168);
static_assert(offsetof(rrTunerConstants_v5_t, llMaxBws) == 672);
static_assert(offsetof(rrTunerConstants_v5_t, perChMaxRingLL128Bws) == 768);
static_assert(offsetof(rrTunerConstants_v5_t, perChMaxTreeLL128Bws) == 864);
static_assert(offsetof(rrTunerConstants_v5_t, perChMaxTreeBws) == 960);
static_assert(offsetof(rrTunerConstants_v5_t, perChMaxNVLSTreeBws) == 1056);
static_assert(sizeof(rrTunerNvlDomainInfo_v5_t) == 12);
static_assert(sizeof(rrTuner_v5_t) == 32 && offsetof(rrTuner_v5_t, getCollInfo) == 16 &&
              offsetof(rrTuner_v5_t, finalize) == 24);
static_assert(sizeof(rrTuner_v6_t) == 40 && offsetof(rrTuner_v6_t, getChunkSize) == 32);
