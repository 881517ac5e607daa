// rerail's own declarations of NCCL's profiler plugin ABI, versions 5 (NCCL 2.28) and 6 (NCCL 2.30).
//
// Written from shared/reference/nccl-plugin-abi.md §2.5 and §4 (plus the v6 CE descriptor members,
// read as facts from NVIDIA/nccl's plugins/profiler/example); no text is copied from NCCL's headers.
// Every size and offset the reference lists is checked with static_assert at the bottom, so a layout
// mismatch breaks the build instead of a job. Names carry an `rr` prefix so this header can coexist
// with NCCL's headers in one translation unit.
//
// Users: the ABI shims (profiler_v5.cc, profiler_v6.cc), the NCCL emulation (emu/) and the tests.
// Layout notes
//   * v5 and v6 descriptors share the header (type, parentObj, rank) and every v5 union member at the
//     same offsets; v6 only adds union members (ceColl, ceSync, ceBatch) that fit in the same 112 B.
//     The implementation therefore reads both through the v5 view and treats CE types separately.
//   * State args are one 8-byte union, identical in v5 and v6.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

extern "C" {

typedef int rrProfResult_t;  // ncclResult_t values (0 = success, 3 = internal error, 5 = invalid usage)
typedef void (*rrProfLogger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt,
                               ...);

// Event type bits (§4.1). Also the values of descriptor.type and the activation mask bits.
enum {
  RR_PROF_GROUP = 1 << 0,
  RR_PROF_COLL = 1 << 1,
  RR_PROF_P2P = 1 << 2,
  RR_PROF_PROXY_OP = 1 << 3,
  RR_PROF_PROXY_STEP = 1 << 4,
  RR_PROF_PROXY_CTRL = 1 << 5,
  RR_PROF_KERNEL_CH = 1 << 6,
  RR_PROF_NET_PLUGIN = 1 << 7,
  RR_PROF_GROUP_API = 1 << 8,
  RR_PROF_COLL_API = 1 << 9,
  RR_PROF_P2P_API = 1 << 10,
  RR_PROF_KERNEL_LAUNCH = 1 << 11,
  RR_PROF_CE_COLL = 1 << 12,   // v6 only
  RR_PROF_CE_SYNC = 1 << 13,   // v6 only
  RR_PROF_CE_BATCH = 1 << 14,  // v6 only
};

// Event states passed to recordEventState (§4.1; 0–7 are pre-v4 proxyOp states NCCL no longer sends).
enum {
  RR_PROF_STATE_PROXY_STEP_SEND_GPU_WAIT = 8,
  RR_PROF_STATE_PROXY_STEP_SEND_WAIT = 9,
  RR_PROF_STATE_PROXY_STEP_RECV_WAIT = 10,
  RR_PROF_STATE_PROXY_STEP_RECV_FLUSH_WAIT = 11,
  RR_PROF_STATE_PROXY_STEP_RECV_GPU_WAIT = 12,
  RR_PROF_STATE_PROXY_CTRL_IDLE = 13,
  RR_PROF_STATE_PROXY_CTRL_ACTIVE = 14,
  RR_PROF_STATE_PROXY_CTRL_SLEEP = 15,
  RR_PROF_STATE_PROXY_CTRL_WAKEUP = 16,
  RR_PROF_STATE_PROXY_CTRL_APPEND = 17,
  RR_PROF_STATE_PROXY_CTRL_APPEND_END = 18,
  RR_PROF_STATE_PROXY_OP_IN_PROGRESS = 19,
  RR_PROF_STATE_PROXY_STEP_SEND_PEER_WAIT = 20,
  RR_PROF_STATE_NET_PLUGIN_UPDATE = 21,
  RR_PROF_STATE_KERNEL_CH_STOP = 22,
  RR_PROF_STATE_GROUP_START_API_STOP = 23,
  RR_PROF_STATE_GROUP_END_API_START = 24,
};

// pluginId of NetPlugin events: high 16 bits = plugin type, low 16 bits = descriptor version (§4.2).
enum { RR_PROF_NET_VER_BITS = 16 };
#define RR_PROF_NET_TYPE_IB (1u << RR_PROF_NET_VER_BITS)
#define RR_PROF_NET_TYPE_SOCK (2u << RR_PROF_NET_VER_BITS)

// ---- the v5 event descriptor (112 B) ------------------------------------------------------------
typedef struct {
  uint64_t type;    // one RR_PROF_* bit
  void* parentObj;  // handle this plugin returned for the parent event, or NULL
  int rank;         // originating rank
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;  // NCCL's static names ("AllReduce", ...): valid while libnccl is loaded
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;  // Group event handle (parentObj is the CollApi handle in v5)
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;  // GPU globaltimer at kernel start
    } kernelCh;
    struct {
      int64_t id;  // pluginId: type << 16 | descriptor version
      void* data;  // plugin-owned descriptor, valid until the event stops
    } netPlugin;
  };
} rrProfEventDescr_v5_t;

// ---- the v6 event descriptor (112 B): v5 plus copy-engine collective members ---------------------
typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceBatch;
    // The v5 members, at the same offsets (checked below).
    unsigned char v5Union[88];
  };
} rrProfEventDescr_v6_t;

// ---- state args (8 B, v5 == v6) -----------------------------------------------------------------
typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} rrProfEventStateArgs_v5_t;
typedef rrProfEventStateArgs_v5_t rrProfEventStateArgs_v6_t;

// ---- function tables (48 B each) ----------------------------------------------------------------
typedef struct {
  const char* name;
  rrProfResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                         int nNodes, int nRanks, int rank, rrProfLogger_t logfn);
  rrProfResult_t (*startEvent)(void* context, void** eHandle, rrProfEventDescr_v5_t* eDescr);
  rrProfResult_t (*stopEvent)(void* eHandle);
  rrProfResult_t (*recordEventState)(void* eHandle, int eState, rrProfEventStateArgs_v5_t* eStateArgs);
  rrProfResult_t (*finalize)(void* context);
} rrProfiler_v5_t;

typedef struct {
  const char* name;
  rrProfResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                         int nNodes, int nRanks, int rank, rrProfLogger_t logfn);
  rrProfResult_t (*startEvent)(void* context, void** eHandle, rrProfEventDescr_v6_t* eDescr);
  rrProfResult_t (*stopEvent)(void* eHandle);
  rrProfResult_t (*recordEventState)(void* eHandle, int eState, rrProfEventStateArgs_v6_t* eStateArgs);
  rrProfResult_t (*finalize)(void* context);
} rrProfiler_v6_t;

// ---- built-in net plugin descriptors (decoded for completeness; §2.5) ----------------------------
typedef struct {
  uint8_t type;  // 1 = QP event
  struct {
    int device;
    uint64_t wr_id;
    int opcode;
    int qpNum;
    size_t length;
  } qp;
} rrProfNetIbDescr_v1_t;

typedef struct {
  uint8_t type;  // 1 = socket event
  struct {
    int fd;
    int op;
    size_t length;
  } sock;
} rrProfNetSockDescr_v1_t;

}  // extern "C"

// ---- layout checks (reference §2.5, x86-64) ------------------------------------------------------
#define RR_PROF_OFF(T, f, o) static_assert(offsetof(T, f) == (o), #T "." #f " must be at offset " #o)
#define RR_PROF_SIZE(T, s) static_assert(sizeof(T) == (s), #T " must be " #s " bytes")

RR_PROF_SIZE(rrProfiler_v5_t, 48);
RR_PROF_SIZE(rrProfiler_v6_t, 48);
RR_PROF_OFF(rrProfiler_v5_t, name, 0);
RR_PROF_OFF(rrProfiler_v5_t, init, 8);
RR_PROF_OFF(rrProfiler_v5_t, startEvent, 16);
RR_PROF_OFF(rrProfiler_v5_t, stopEvent, 24);
RR_PROF_OFF(rrProfiler_v5_t, recordEventState, 32);
RR_PROF_OFF(rrProfiler_v5_t, finalize, 40);
RR_PROF_OFF(rrProfiler_v6_t, recordEventState, 32);
RR_PROF_OFF(rrProfiler_v6_t, finalize, 40);

RR_PROF_SIZE(rrProfEventDescr_v5_t, 112);
RR_PROF_SIZE(rrProfEventDescr_v6_t, 112);
RR_PROF_SIZE(rrProfEventStateArgs_v5_t, 8);
RR_PROF_OFF(rrProfEventDescr_v5_t, type, 0);
RR_PROF_OFF(rrProfEventDescr_v5_t, parentObj, 8);
RR_PROF_OFF(rrProfEventDescr_v5_t, rank, 16);
RR_PROF_OFF(rrProfEventDescr_v5_t, coll.seqNumber, 24);
RR_PROF_OFF(rrProfEventDescr_v5_t, coll.func, 32);
RR_PROF_OFF(rrProfEventDescr_v5_t, coll.sendBuff, 40);
RR_PROF_OFF(rrProfEventDescr_v5_t, coll.recvBuff, 48);
RR_PROF_OFF(rrProfEventDescr_v5_t, coll.count, 56);
RR_PROF_OFF(rrProfEventDescr_v5_t, coll.root, 64);
RR_PROF_OFF(rrProfEventDescr_v5_t, coll.datatype, 72);
RR_PROF_OFF(rrProfEventDescr_v5_t, coll.nChannels, 80);
RR_PROF_OFF(rrProfEventDescr_v5_t, coll.nWarps, 81);
RR_PROF_OFF(rrProfEventDescr_v5_t, coll.algo, 88);
RR_PROF_OFF(rrProfEventDescr_v5_t, coll.proto, 96);
RR_PROF_OFF(rrProfEventDescr_v5_t, coll.parentGroup, 104);
RR_PROF_OFF(rrProfEventDescr_v5_t, p2p.func, 24);
RR_PROF_OFF(rrProfEventDescr_v5_t, p2p.buff, 32);
RR_PROF_OFF(rrProfEventDescr_v5_t, p2p.datatype, 40);
RR_PROF_OFF(rrProfEventDescr_v5_t, p2p.count, 48);
RR_PROF_OFF(rrProfEventDescr_v5_t, p2p.peer, 56);
RR_PROF_OFF(rrProfEventDescr_v5_t, p2p.nChannels, 60);
RR_PROF_OFF(rrProfEventDescr_v5_t, p2p.parentGroup, 64);
RR_PROF_OFF(rrProfEventDescr_v5_t, proxyOp.pid, 24);
RR_PROF_OFF(rrProfEventDescr_v5_t, proxyOp.channelId, 28);
RR_PROF_OFF(rrProfEventDescr_v5_t, proxyOp.peer, 32);
RR_PROF_OFF(rrProfEventDescr_v5_t, proxyOp.nSteps, 36);
RR_PROF_OFF(rrProfEventDescr_v5_t, proxyOp.chunkSize, 40);
RR_PROF_OFF(rrProfEventDescr_v5_t, proxyOp.isSend, 44);
RR_PROF_OFF(rrProfEventDescr_v5_t, proxyStep.step, 24);
RR_PROF_OFF(rrProfEventDescr_v5_t, kernelCh.channelId, 24);
RR_PROF_OFF(rrProfEventDescr_v5_t, kernelCh.pTimer, 32);
RR_PROF_OFF(rrProfEventDescr_v5_t, netPlugin.id, 24);
RR_PROF_OFF(rrProfEventDescr_v5_t, netPlugin.data, 32);
RR_PROF_OFF(rrProfEventDescr_v5_t, groupApi.graphCaptured, 24);
RR_PROF_OFF(rrProfEventDescr_v5_t, groupApi.groupDepth, 28);
RR_PROF_OFF(rrProfEventDescr_v5_t, collApi.func, 24);
RR_PROF_OFF(rrProfEventDescr_v5_t, collApi.count, 32);
RR_PROF_OFF(rrProfEventDescr_v5_t, collApi.datatype, 40);
RR_PROF_OFF(rrProfEventDescr_v5_t, collApi.root, 48);
RR_PROF_OFF(rrProfEventDescr_v5_t, collApi.stream, 56);
RR_PROF_OFF(rrProfEventDescr_v5_t, collApi.graphCaptured, 64);
RR_PROF_OFF(rrProfEventDescr_v5_t, p2pApi.func, 24);
RR_PROF_OFF(rrProfEventDescr_v5_t, p2pApi.count, 32);
RR_PROF_OFF(rrProfEventDescr_v5_t, p2pApi.datatype, 40);
RR_PROF_OFF(rrProfEventDescr_v5_t, p2pApi.stream, 48);
RR_PROF_OFF(rrProfEventDescr_v5_t, p2pApi.graphCaptured, 56);
RR_PROF_OFF(rrProfEventDescr_v5_t, kernelLaunch.stream, 24);
// v6 keeps the v5 header and union start; the CE members are placed in the same union.
RR_PROF_OFF(rrProfEventDescr_v6_t, type, 0);
RR_PROF_OFF(rrProfEventDescr_v6_t, parentObj, 8);
RR_PROF_OFF(rrProfEventDescr_v6_t, rank, 16);
RR_PROF_OFF(rrProfEventDescr_v6_t, v5Union, 24);
RR_PROF_OFF(rrProfEventDescr_v6_t, ceColl.seqNumber, 24);
RR_PROF_OFF(rrProfEventDescr_v6_t, ceColl.func, 32);
RR_PROF_OFF(rrProfEventDescr_v6_t, ceColl.count, 56);
RR_PROF_OFF(rrProfEventDescr_v6_t, ceColl.datatype, 72);
RR_PROF_OFF(rrProfEventDescr_v6_t, ceColl.syncStrategy, 80);
RR_PROF_OFF(rrProfEventDescr_v6_t, ceColl.stream, 104);
RR_PROF_OFF(rrProfEventDescr_v6_t, ceSync.nRanks, 28);
RR_PROF_OFF(rrProfEventDescr_v6_t, ceBatch.totalBytes, 32);
static_assert(sizeof(rrProfEventDescr_v5_t) - offsetof(rrProfEventDescr_v5_t, coll) == 88,
              "the v5 union must be 88 bytes (v6 views it as v5Union)");

RR_PROF_SIZE(rrProfNetIbDescr_v1_t, 40);
RR_PROF_OFF(rrProfNetIbDescr_v1_t, type, 0);
RR_PROF_OFF(rrProfNetIbDescr_v1_t, qp.device, 8);
RR_PROF_OFF(rrProfNetIbDescr_v1_t, qp.wr_id, 16);
RR_PROF_OFF(rrProfNetIbDescr_v1_t, qp.opcode, 24);
RR_PROF_OFF(rrProfNetIbDescr_v1_t, qp.qpNum, 28);
RR_PROF_OFF(rrProfNetIbDescr_v1_t, qp.length, 32);
RR_PROF_SIZE(rrProfNetSockDescr_v1_t, 24);
RR_PROF_OFF(rrProfNetSockDescr_v1_t, sock.fd, 8);
RR_PROF_OFF(rrProfNetSockDescr_v1_t, sock.op, 12);
RR_PROF_OFF(rrProfNetSockDescr_v1_t, sock.length, 16);
