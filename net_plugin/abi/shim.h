// rerail — helpers shared by the extern "C" shims (net_v10.cc, net_v11.cc, net_v12.cc).
//
// Contract: Call(fn, body) runs `body` (returning rr::Status), converts the Status to rrNcclResult_t,
// logs a WARN naming the entry point for every error, and catches every exception so none crosses
// the C boundary (→ rrNcclInternalError). Props copy the version-neutral v12 properties into older
// layouts. Header-only; no state.
#pragma once

#include <exception>
#include <mutex>
#include <new>

#include "../plugin.h"
#include "nccl_net_abi.h"
#include "rerail/log.h"

static_assert(static_cast<int>(rr::Code::kOk) == rrNcclSuccess, "rr::Code must equal ncclResult_t");
static_assert(static_cast<int>(rr::Code::kUnhandledCuda) == rrNcclUnhandledCudaError, "rr::Code mismatch");
static_assert(static_cast<int>(rr::Code::kSystemError) == rrNcclSystemError, "rr::Code mismatch");
static_assert(static_cast<int>(rr::Code::kInternalError) == rrNcclInternalError, "rr::Code mismatch");
static_assert(static_cast<int>(rr::Code::kInvalidArgument) == rrNcclInvalidArgument, "rr::Code mismatch");
static_assert(static_cast<int>(rr::Code::kInvalidUsage) == rrNcclInvalidUsage, "rr::Code mismatch");
static_assert(static_cast<int>(rr::Code::kRemoteError) == rrNcclRemoteError, "rr::Code mismatch");
static_assert(static_cast<int>(rr::Code::kInProgress) == rrNcclInProgress, "rr::Code mismatch");

namespace rr::net::abi {

template <typename F>
rrNcclResult_t Call(const char* fn, F&& body) noexcept {
  try {
    Status st = body();
    if (st.ok()) return rrNcclSuccess;
    RR_WARN("%s: %s", fn, st.ToString().c_str());
    return static_cast<rrNcclResult_t>(st.code());
  } catch (const std::bad_alloc&) {
    RR_WARN("%s: out of memory", fn);
  } catch (const std::exception& e) {
    RR_WARN("%s: internal error: %s", fn, e.what());
  } catch (...) {
    RR_WARN("%s: internal error (unknown exception)", fn);
  }
  return rrNcclInternalError;
}

// Copies the fields common to every props version (everything up to vProps).
template <typename P>
void CopyCommonProps(const rrNcclNetProperties_v12_t& in, P* out) {
  out->name = in.name;
  out->pciPath = in.pciPath;
  out->guid = in.guid;
  out->ptrSupport = in.ptrSupport;
  out->regIsGlobal = in.regIsGlobal;
  out->forceFlush = in.forceFlush;
  out->speed = in.speed;
  out->port = in.port;
  out->latency = in.latency;
  out->maxComms = in.maxComms;
  out->maxRecvs = in.maxRecvs;
  out->netDeviceType = in.netDeviceType;
  out->netDeviceVersion = in.netDeviceVersion;
  out->vProps.ndevs = in.vProps.ndevs;
  for (int i = 0; i < RR_NCCL_NET_MAX_DEVS_PER_NIC_V11; ++i) out->vProps.devs[i] = in.vProps.devs[i];
  out->maxP2pBytes = in.maxP2pBytes;
  out->maxCollBytes = in.maxCollBytes;
}

inline Plugin& P() { return Plugin::Get(); }

// The calls whose signature is the same in v10, v11 and v12: one definition for every table.
inline rrNcclResult_t Accept(void* lc, void** rc, rrNcclNetDeviceHandle_t** /*devComm*/) {
  return Call("accept", [&] { return P().Accept(lc, rc); });
}
inline rrNcclResult_t RegMr(void* comm, void* data, size_t size, int type, void** mh) {
  return Call("regMr", [&] { return P().RegMr(comm, data, size, type, mh); });
}
inline rrNcclResult_t DeregMr(void* comm, void* mh) { return Call("deregMr", [&] { return P().DeregMr(comm, mh); }); }
inline rrNcclResult_t Isend(void* sc, void* data, size_t size, int tag, void* mh, void* ph, void** req) {
  return Call("isend", [&] { return P().Isend(sc, data, size, tag, mh, ph, req); });
}
inline rrNcclResult_t Irecv(void* rc, int n, void** data, size_t* sizes, int* tags, void** mh, void** ph,
                     void** req) {
  return Call("irecv", [&] { return P().Irecv(rc, n, data, sizes, tags, mh, ph, req); });
}
inline rrNcclResult_t Iflush(void* rc, int n, void** /*data*/, int* /*sizes*/, void** /*mh*/, void** req) {
  return Call("iflush", [&] { return P().Iflush(rc, n, req); });
}
inline rrNcclResult_t Test(void* req, int* done, int* sizes) { return Call("test", [&] { return P().Test(req, done, sizes); }); }
inline rrNcclResult_t CloseSend(void* c) { return Call("closeSend", [&] { return P().CloseSend(c); }); }
inline rrNcclResult_t CloseRecv(void* c) { return Call("closeRecv", [&] { return P().CloseRecv(c); }); }
inline rrNcclResult_t CloseListen(void* c) { return Call("closeListen", [&] { return P().CloseListen(c); }); }

}  // namespace rr::net::abi
