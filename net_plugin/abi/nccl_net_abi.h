// rerail's own declarations of NCCL's net plugin ABI, versions 10, 11 and 12.
//
// Written from shared/reference/nccl-plugin-abi.md (§2.1–§2.5); every size and offset listed there is
// checked below with static_assert, so a mismatch breaks the build instead of a job. Nothing here is
// copied from NCCL's headers. Names carry an `rr` prefix so this header can coexist with nccl.h in
// one translation unit (tools and tests include both).
//
// Users of this header: the ABI shims (net_v10.cc, net_v11.cc, net_v12.cc), rerail-perf and the
// conformance tests (which load any plugin and drive it through these tables).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// ---- results, logging, profiler callback -------------------------------------------------------
typedef enum {
  rrNcclSuccess = 0,
  rrNcclUnhandledCudaError = 1,
  rrNcclSystemError = 2,
  rrNcclInternalError = 3,
  rrNcclInvalidArgument = 4,
  rrNcclInvalidUsage = 5,
  rrNcclRemoteError = 6,
  rrNcclInProgress = 7,
} rrNcclResult_t;

typedef void (*rrNcclDebugLogger_t)(int level, unsigned long flags, const char* file, int line,
                                    const char* fmt, ...);

// type: 0 start, 1 stop, 2 update, 3 update+stop (reference §4.2).
typedef rrNcclResult_t (*rrNcclProfilerCallback_t)(void** eHandle, int type, void* pHandle, int64_t pluginId,
                                                   void* extData);

// ---- constants (§2.1) ---------------------------------------------------------------------------
enum {
  RR_NCCL_NET_HANDLE_MAXSIZE = 128,
  RR_NCCL_PTR_HOST = 0x1,
  RR_NCCL_PTR_CUDA = 0x2,
  RR_NCCL_PTR_DMABUF = 0x4,
  RR_NCCL_NET_MAX_REQUESTS = 32,
  RR_NCCL_NET_DEVICE_HOST = 0,
  RR_NCCL_NET_DEVICE_UNPACK = 1,
  RR_NCCL_NET_MAX_DEVS_PER_NIC_V11 = 4,
  RR_NCCL_NET_MAX_DEVS_PER_NIC_V12 = 8,
  RR_NCCL_NET_TRAFFIC_CLASS_UNDEF = -1,
  RR_NCCL_NET_ATTR_UNDEF = -1,
};
#define RR_NCCL_NET_OPTIONAL_RECV_COMPLETION ((void*)0x1)
#define RR_NCCL_MAX_NET_SIZE_BYTES (1ull << 40)

// ---- small structs -------------------------------------------------------------------------------
typedef struct {
  int type;     // RR_NCCL_NET_DEVICE_*
  int version;
  void* handle;
  size_t size;
  int needsProxyProgress;
} rrNcclNetDeviceHandle_t;

typedef struct {
  int ndevs;
  int devs[RR_NCCL_NET_MAX_DEVS_PER_NIC_V11];
} rrNcclNetVDeviceProps_v11_t;  // also v9, v10
typedef rrNcclNetVDeviceProps_v11_t rrNcclNetVDeviceProps_v10_t;

typedef struct {
  int ndevs;
  int devs[RR_NCCL_NET_MAX_DEVS_PER_NIC_V12];
} rrNcclNetVDeviceProps_v12_t;

typedef struct {
  int trafficClass;
} rrNcclNetCommConfig_t;  // v10, v11, v12

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} rrNcclNetCommAttr_t;

typedef struct {
  rrNcclNetCommAttr_t sendCommAttr;
  rrNcclNetCommAttr_t recvCommAttr;
  uint32_t op;     // bitmask of 1 << ncclFunc_t
  uint32_t algo;   // bitmask of 1 << NCCL_ALGO_*
  uint32_t proto;  // bitmask of 1 << NCCL_PROTO_*
} rrNcclNetAttr_t;  // v11, v12

// ---- properties (§2.4) ---------------------------------------------------------------------------
// The leading fields are common to v10..v12; keep these three structs in step.
typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;    // Mbps
  int port;
  float latency;  // us
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  rrNcclNetVDeviceProps_v10_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} rrNcclNetProperties_v10_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  rrNcclNetVDeviceProps_v11_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
} rrNcclNetProperties_v11_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  rrNcclNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
} rrNcclNetProperties_v12_t;

// ---- function tables (§2.2) ------------------------------------------------------------------------
typedef struct {
  const char* name;
  rrNcclResult_t (*init)(rrNcclDebugLogger_t logFunction, rrNcclProfilerCallback_t profFunction);
  rrNcclResult_t (*devices)(int* ndev);
  rrNcclResult_t (*getProperties)(int dev, rrNcclNetProperties_v10_t* props);
  rrNcclResult_t (*listen)(int dev, void* handle, void** listenComm);
  rrNcclResult_t (*connect)(int dev, rrNcclNetCommConfig_t* config, void* handle, void** sendComm,
                            rrNcclNetDeviceHandle_t** sendDevComm);
  rrNcclResult_t (*accept)(void* listenComm, void** recvComm, rrNcclNetDeviceHandle_t** recvDevComm);
  rrNcclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  rrNcclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                void** mhandle);
  rrNcclResult_t (*deregMr)(void* comm, void* mhandle);
  rrNcclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                          void** request);
  rrNcclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                          void** phandles, void** request);
  rrNcclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  rrNcclResult_t (*test)(void* request, int* done, int* sizes);
  rrNcclResult_t (*closeSend)(void* sendComm);
  rrNcclResult_t (*closeRecv)(void* recvComm);
  rrNcclResult_t (*closeListen)(void* listenComm);
  rrNcclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  rrNcclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  rrNcclResult_t (*makeVDevice)(int* d, rrNcclNetVDeviceProps_v10_t* props);
} rrNcclNet_v10_t;

#define RR_NET_V11_V12_TABLE(PROPS_T, VPROPS_T)                                                               \
  const char* name;                                                                                         \
  rrNcclResult_t (*init)(void** ctx, uint64_t commId, rrNcclNetCommConfig_t* config,                        \
                         rrNcclDebugLogger_t logFunction, rrNcclProfilerCallback_t profFunction);           \
  rrNcclResult_t (*devices)(int* ndev);                                                                     \
  rrNcclResult_t (*getProperties)(int dev, PROPS_T* props);                                                 \
  rrNcclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);                            \
  rrNcclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,                              \
                            rrNcclNetDeviceHandle_t** sendDevComm);                                         \
  rrNcclResult_t (*accept)(void* listenComm, void** recvComm, rrNcclNetDeviceHandle_t** recvDevComm);       \
  rrNcclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);                    \
  rrNcclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,     \
                                void** mhandle);                                                            \
  rrNcclResult_t (*deregMr)(void* comm, void* mhandle);                                                     \
  rrNcclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,   \
                          void** request);                                                                  \
  rrNcclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,    \
                          void** phandles, void** request);                                                 \
  rrNcclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request); \
  rrNcclResult_t (*test)(void* request, int* done, int* sizes);                                             \
  rrNcclResult_t (*closeSend)(void* sendComm);                                                              \
  rrNcclResult_t (*closeRecv)(void* recvComm);                                                              \
  rrNcclResult_t (*closeListen)(void* listenComm);                                                          \
  rrNcclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);                            \
  rrNcclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);                                    \
  rrNcclResult_t (*makeVDevice)(int* d, VPROPS_T* props);                                                   \
  rrNcclResult_t (*finalize)(void* ctx);                                                                    \
  rrNcclResult_t (*setNetAttr)(void* ctx, rrNcclNetAttr_t* netAttr);

typedef struct {
  RR_NET_V11_V12_TABLE(rrNcclNetProperties_v11_t, rrNcclNetVDeviceProps_v11_t)
} rrNcclNet_v11_t;

typedef struct {
  RR_NET_V11_V12_TABLE(rrNcclNetProperties_v12_t, rrNcclNetVDeviceProps_v12_t)
} rrNcclNet_v12_t;

}  // extern "C"

// ---- layout checks (§2.5, x86-64) ----------------------------------------------------------------
#define RR_OFF(T, f, o) static_assert(offsetof(T, f) == (o), #T "." #f " must be at offset " #o)
#define RR_SIZE(T, s) static_assert(sizeof(T) == (s), #T " must be " #s " bytes")

RR_SIZE(rrNcclNetDeviceHandle_t, 32);
RR_OFF(rrNcclNetDeviceHandle_t, type, 0);
RR_OFF(rrNcclNetDeviceHandle_t, version, 4);
RR_OFF(rrNcclNetDeviceHandle_t, handle, 8);
RR_OFF(rrNcclNetDeviceHandle_t, size, 16);
RR_OFF(rrNcclNetDeviceHandle_t, needsProxyProgress, 24);
RR_SIZE(rrNcclNetVDeviceProps_v11_t, 20);
RR_OFF(rrNcclNetVDeviceProps_v11_t, devs, 4);
RR_SIZE(rrNcclNetVDeviceProps_v12_t, 36);
RR_SIZE(rrNcclNetCommConfig_t, 4);
RR_SIZE(rrNcclNetCommAttr_t, 16);
RR_OFF(rrNcclNetCommAttr_t, minConcurrentPeers, 4);
RR_OFF(rrNcclNetCommAttr_t, maxFlowsPerPeer, 8);
RR_OFF(rrNcclNetCommAttr_t, minFlowsPerPeer, 12);
RR_SIZE(rrNcclNetAttr_t, 44);
RR_OFF(rrNcclNetAttr_t, recvCommAttr, 16);
RR_OFF(rrNcclNetAttr_t, op, 32);
RR_OFF(rrNcclNetAttr_t, algo, 36);
RR_OFF(rrNcclNetAttr_t, proto, 40);

#define RR_PROPS_COMMON_OFFSETS(T)   \
  RR_OFF(T, name, 0);                \
  RR_OFF(T, pciPath, 8);             \
  RR_OFF(T, guid, 16);               \
  RR_OFF(T, ptrSupport, 24);         \
  RR_OFF(T, regIsGlobal, 28);        \
  RR_OFF(T, forceFlush, 32);         \
  RR_OFF(T, speed, 36);              \
  RR_OFF(T, port, 40);               \
  RR_OFF(T, latency, 44);            \
  RR_OFF(T, maxComms, 48);           \
  RR_OFF(T, maxRecvs, 52);           \
  RR_OFF(T, netDeviceType, 56);      \
  RR_OFF(T, netDeviceVersion, 60);   \
  RR_OFF(T, vProps, 64)
RR_PROPS_COMMON_OFFSETS(rrNcclNetProperties_v10_t);
RR_PROPS_COMMON_OFFSETS(rrNcclNetProperties_v11_t);
RR_PROPS_COMMON_OFFSETS(rrNcclNetProperties_v12_t);
RR_SIZE(rrNcclNetProperties_v10_t, 104);
RR_OFF(rrNcclNetProperties_v10_t, maxP2pBytes, 88);
RR_OFF(rrNcclNetProperties_v10_t, maxCollBytes, 96);
RR_SIZE(rrNcclNetProperties_v11_t, 112);
RR_OFF(rrNcclNetProperties_v11_t, maxP2pBytes, 88);
RR_OFF(rrNcclNetProperties_v11_t, maxCollBytes, 96);
RR_OFF(rrNcclNetProperties_v11_t, maxMultiRequestSize, 104);
RR_SIZE(rrNcclNetProperties_v12_t, 128);
RR_OFF(rrNcclNetProperties_v12_t, maxP2pBytes, 104);
RR_OFF(rrNcclNetProperties_v12_t, maxCollBytes, 112);
RR_OFF(rrNcclNetProperties_v12_t, maxMultiRequestSize, 120);
RR_OFF(rrNcclNetProperties_v12_t, railId, 124);
RR_OFF(rrNcclNetProperties_v12_t, planeId, 126);

RR_SIZE(rrNcclNet_v10_t, 160);
RR_SIZE(rrNcclNet_v11_t, 176);
RR_SIZE(rrNcclNet_v12_t, 176);
#define RR_NET_SLOTS(T)              \
  RR_OFF(T, init, 8);                \
  RR_OFF(T, devices, 16);            \
  RR_OFF(T, getProperties, 24);      \
  RR_OFF(T, listen, 32);             \
  RR_OFF(T, connect, 40);            \
  RR_OFF(T, accept, 48);             \
  RR_OFF(T, regMr, 56);              \
  RR_OFF(T, regMrDmaBuf, 64);        \
  RR_OFF(T, deregMr, 72);            \
  RR_OFF(T, isend, 80);              \
  RR_OFF(T, irecv, 88);              \
  RR_OFF(T, iflush, 96);             \
  RR_OFF(T, test, 104);              \
  RR_OFF(T, closeSend, 112);         \
  RR_OFF(T, closeRecv, 120);         \
  RR_OFF(T, closeListen, 128);       \
  RR_OFF(T, getDeviceMr, 136);       \
  RR_OFF(T, irecvConsumed, 144);     \
  RR_OFF(T, makeVDevice, 152)
RR_NET_SLOTS(rrNcclNet_v10_t);
RR_NET_SLOTS(rrNcclNet_v11_t);
RR_NET_SLOTS(rrNcclNet_v12_t);
RR_OFF(rrNcclNet_v11_t, finalize, 160);
RR_OFF(rrNcclNet_v11_t, setNetAttr, 168);
RR_OFF(rrNcclNet_v12_t, finalize, 160);
RR_OFF(rrNcclNet_v12_t, setNetAttr, 168);
