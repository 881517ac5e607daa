// rerail — load any NCCL net plugin and call it through one version-neutral interface.
//
// Used by rerail-perf and the conformance tests: they drive a plugin exactly as NCCL's proxy does, so
// they must be able to load rerail or any other library exporting ncclNetPlugin_v10/v11/v12.
//
// Contract
//   * Open(path) dlopens with RTLD_NOW|RTLD_LOCAL (as NCCL does) and picks the highest version
//     exported: v12, then v11, then v10. NCCL's name rule is applied to bare names: "rerail" →
//     "libnccl-net-rerail.so" when "rerail" itself does not open.
//   * Calls return the plugin's raw result code (rrNcclResult_t) so callers can assert on it.
//   * v10 plugins: Init() calls the plugin's init only once per process and returns ctx=nullptr;
//     Connect() passes a config with trafficClass undefined; Finalize() is a no-op.
//   * GetProperties() normalises every version to the v12 layout (v10/v11 get railId/planeId = -1,
//     v10 gets maxMultiRequestSize = 1).
//   * Thread-safety: whatever the plugin guarantees; this wrapper adds no state after Open().
#pragma once

#include <memory>
#include <string>

#include "../../net_plugin/abi/nccl_net_abi.h"

namespace rr::netdrv {

class NetPlugin {
 public:
  // Returns nullptr and fills *err on failure.
  static std::unique_ptr<NetPlugin> Open(const std::string& path, std::string* err);
  ~NetPlugin();
  NetPlugin(const NetPlugin&) = delete;
  NetPlugin& operator=(const NetPlugin&) = delete;

  int Version() const { return version_; }  // 10, 11 or 12
  const char* Name() const;
  const std::string& Path() const { return path_; }  // the file loaded (dlinfo), not the name asked for

  rrNcclResult_t Init(void** ctx, uint64_t commId, rrNcclDebugLogger_t log, rrNcclProfilerCallback_t prof);
  rrNcclResult_t Finalize(void* ctx);
  rrNcclResult_t Devices(int* ndev);
  rrNcclResult_t GetProperties(int dev, rrNcclNetProperties_v12_t* props);
  rrNcclResult_t Listen(void* ctx, int dev, void* handle, void** listenComm);
  rrNcclResult_t Connect(void* ctx, int dev, void* handle, void** sendComm);
  rrNcclResult_t Accept(void* listenComm, void** recvComm);
  rrNcclResult_t RegMr(void* comm, void* data, size_t size, int type, void** mhandle);
  rrNcclResult_t DeregMr(void* comm, void* mhandle);
  rrNcclResult_t Isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                       void** request);
  rrNcclResult_t Irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                       void** phandles, void** request);
  rrNcclResult_t Iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  rrNcclResult_t Test(void* request, int* done, int* sizes);
  rrNcclResult_t CloseSend(void* sendComm);
  rrNcclResult_t CloseRecv(void* recvComm);
  rrNcclResult_t CloseListen(void* listenComm);
  rrNcclResult_t SetNetAttr(void* ctx, rrNcclNetAttr_t* attr);  // success no-op when absent

 private:
  NetPlugin() = default;
  void* dl_ = nullptr;
  int version_ = 0;
  std::string path_;
  const rrNcclNet_v10_t* v10_ = nullptr;
  const rrNcclNet_v11_t* v11_ = nullptr;  // also used for v12 (identical slots but getProperties)
  const rrNcclNet_v12_t* v12_ = nullptr;
  bool v10_inited_ = false;
};

// "success", "systemError", ... for messages.
const char* ResultName(rrNcclResult_t r);

}  // namespace rr::netdrv
