// ncclNetPlugin_v10: for NCCL releases without v11. init runs once per process (NCCL's v10 shim), so
// this adapter holds one process-global context and never finalizes it (v10 has no finalize).
#include "shim.h"

namespace {
using namespace rr::net::abi;

rrNcclResult_t Init(rrNcclDebugLogger_t log, rrNcclProfilerCallback_t prof) {
  static std::once_flag once;
  static rrNcclResult_t result = rrNcclSuccess;
  std::call_once(once, [&] { result = Call("init", [&] { return P().Init(log, prof, 10, nullptr); }); });
  return result;
}
rrNcclResult_t Devices(int* n) { return Call("devices", [&] { return P().Devices(n); }); }
rrNcclResult_t GetProperties(int dev, rrNcclNetProperties_v10_t* props) {
  return Call("getProperties", [&] {
    rrNcclNetProperties_v12_t p12;
    RR_CHECK(P().GetProperties(dev, &p12));
    CopyCommonProps(p12, props);
    return rr::Status::Ok();
  });
}
rrNcclResult_t Listen(int dev, void* handle, void** lc) {
  return Call("listen", [&] { return P().Listen(dev, handle, lc); });
}
rrNcclResult_t Connect(int dev, rrNcclNetCommConfig_t* /*config*/, void* handle, void** sc,
                       rrNcclNetDeviceHandle_t** /*devComm*/) {
  return Call("connect", [&] { return P().Connect(dev, handle, sc); });
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) rrNcclNet_v10_t ncclNetPlugin_v10 = {
    "rerail", Init,    Devices, GetProperties, Listen,    Connect,     Accept,
    RegMr,    nullptr, DeregMr, Isend,         Irecv,     Iflush,      Test,
    CloseSend, CloseRecv, CloseListen, nullptr, nullptr, nullptr,
};
}  // extern "C"
