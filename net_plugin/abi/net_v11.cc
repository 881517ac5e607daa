// ncclNetPlugin_v11: thin adapter over rr::net::Plugin (NCCL 2.28.x probes this first).
#include "shim.h"

namespace {
using namespace rr::net::abi;

rrNcclResult_t Init(void** ctx, uint64_t commId, rrNcclNetCommConfig_t* /*config*/, rrNcclDebugLogger_t log,
                    rrNcclProfilerCallback_t prof) {
  return Call("init", [&] { return P().Init(log, prof, 11, ctx, commId); });
}
rrNcclResult_t Devices(int* n) { return Call("devices", [&] { return P().Devices(n); }); }
rrNcclResult_t GetProperties(int dev, rrNcclNetProperties_v11_t* props) {
  return Call("getProperties", [&] {
    rrNcclNetProperties_v12_t p12;
    RR_CHECK(P().GetProperties(dev, &p12));
    CopyCommonProps(p12, props);
    props->maxMultiRequestSize = p12.maxMultiRequestSize;
    return rr::Status::Ok();
  });
}
rrNcclResult_t Listen(void* /*ctx*/, int dev, void* handle, void** lc) {
  return Call("listen", [&] { return P().Listen(dev, handle, lc); });
}
rrNcclResult_t Connect(void* /*ctx*/, int dev, void* handle, void** sc, rrNcclNetDeviceHandle_t** /*devComm*/) {
  return Call("connect", [&] { return P().Connect(dev, handle, sc); });
}
rrNcclResult_t Finalize(void* ctx) { return Call("finalize", [&] { return P().Finalize(ctx); }); }

}  // namespace

extern "C" {
__attribute__((visibility("default"))) rrNcclNet_v11_t ncclNetPlugin_v11 = {
    "rerail", Init,    Devices, GetProperties, Listen,    Connect,     Accept,
    RegMr,    nullptr, DeregMr, Isend,         Irecv,     Iflush,      Test,
    CloseSend, CloseRecv, CloseListen, nullptr, nullptr, nullptr, Finalize, nullptr,
};
}  // extern "C"
