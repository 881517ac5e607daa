// ncclNetPlugin_v11: thin adapter over rr::net::Plugin (NCCL 2.28.x probes this first).
#include "shim.h"

namespace {
using namespace rr::net::abi;

rrNcclResult_t Init(void** ctx, uint64_t /*commId*/, rrNcclNetCommConfig_t* /*config*/, rrNcclDebugLogger_t log,
                    rrNcclProfilerCallback_t prof) {
  return Call("init", [&] { return P().Init(log, prof, 11, ctx); });
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
rrNcclResult_t Accept(void* lc, void** rc, rrNcclNetDeviceHandle_t** /*devComm*/) {
  return Call("accept", [&] { return P().Accept(lc, rc); });
}
rrNcclResult_t RegMr(void* comm, void* data, size_t size, int type, void** mh) {
  return Call("regMr", [&] { return P().RegMr(comm, data, size, type, mh); });
}
rrNcclResult_t DeregMr(void* comm, void* mh) { return Call("deregMr", [&] { return P().DeregMr(comm, mh); }); }
rrNcclResult_t Isend(void* sc, void* data, size_t size, int /*tag*/, void* /*mh*/, void* ph, void** req) {
  return Call("isend", [&] { return P().Isend(sc, data, size, ph, req); });
}
rrNcclResult_t Irecv(void* rc, int n, void** data, size_t* sizes, int* /*tags*/, void** /*mh*/, void** ph,
                     void** req) {
  return Call("irecv", [&] { return P().Irecv(rc, n, data, sizes, ph, req); });
}
rrNcclResult_t Iflush(void* rc, int n, void** /*data*/, int* /*sizes*/, void** /*mh*/, void** req) {
  return Call("iflush", [&] { return P().Iflush(rc, n, req); });
}
rrNcclResult_t Test(void* req, int* done, int* sizes) { return Call("test", [&] { return P().Test(req, done, sizes); }); }
rrNcclResult_t CloseSend(void* c) { return Call("closeSend", [&] { return P().CloseSend(c); }); }
rrNcclResult_t CloseRecv(void* c) { return Call("closeRecv", [&] { return P().CloseRecv(c); }); }
rrNcclResult_t CloseListen(void* c) { return Call("closeListen", [&] { return P().CloseListen(c); }); }
rrNcclResult_t Finalize(void* ctx) { return Call("finalize", [&] { return P().Finalize(ctx); }); }

}  // namespace

extern "C" {
__attribute__((visibility("default"))) rrNcclNet_v11_t ncclNetPlugin_v11 = {
    "rerail", Init,    Devices, GetProperties, Listen,    Connect,     Accept,
    RegMr,    nullptr, DeregMr, Isend,         Irecv,     Iflush,      Test,
    CloseSend, CloseRecv, CloseListen, nullptr, nullptr, nullptr, Finalize, nullptr,
};
}  // extern "C"
