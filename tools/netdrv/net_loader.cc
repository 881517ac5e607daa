#include "net_loader.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>

namespace rr::netdrv {

static_assert(sizeof(rrNcclNet_v11_t) == sizeof(rrNcclNet_v12_t), "v11/v12 tables share slot layout");

const char* ResultName(rrNcclResult_t r) {
  static const char* kNames[] = {"success",      "unhandledCudaError", "systemError", "internalError",
                                 "invalidArgument", "invalidUsage",     "remoteError", "inProgress"};
  int i = static_cast<int>(r);
  return (i >= 0 && i < 8) ? kNames[i] : "unknown";
}

std::unique_ptr<NetPlugin> NetPlugin::Open(const std::string& path, std::string* err) {
  std::unique_ptr<NetPlugin> p(new NetPlugin());
  p->dl_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string tried = path;
  bool bare = path.find('/') == std::string::npos &&
              !(path.rfind("lib", 0) == 0 && path.size() > 3 && path.compare(path.size() - 3, 3, ".so") == 0);
  std::string first_err = p->dl_ ? "" : dlerror();
  if (p->dl_ == nullptr && bare) {
    std::string alt = "libnccl-net-" + path + ".so";
    p->dl_ = dlopen(alt.c_str(), RTLD_NOW | RTLD_LOCAL);
    tried = alt;
  }
  if (p->dl_ == nullptr) {
    *err = "cannot load net plugin '" + path + "': " + first_err;
    return nullptr;
  }
  // The file the dynamic loader really picked (a bare name goes through LD_LIBRARY_PATH, RUNPATH and
  // the ld.so cache), so reports and rerail-info name it.
  struct link_map* lm = nullptr;
  p->path_ = (dlinfo(p->dl_, RTLD_DI_LINKMAP, &lm) == 0 && lm != nullptr && lm->l_name[0] != '\0') ? lm->l_name : tried;
  if (auto* t = static_cast<const rrNcclNet_v12_t*>(dlsym(p->dl_, "ncclNetPlugin_v12"))) {
    p->version_ = 12, p->v12_ = t, p->v11_ = reinterpret_cast<const rrNcclNet_v11_t*>(t);
  } else if (auto* t11 = static_cast<const rrNcclNet_v11_t*>(dlsym(p->dl_, "ncclNetPlugin_v11"))) {
    p->version_ = 11, p->v11_ = t11;
  } else if (auto* t10 = static_cast<const rrNcclNet_v10_t*>(dlsym(p->dl_, "ncclNetPlugin_v10"))) {
    p->version_ = 10, p->v10_ = t10;
  } else {
    *err = "'" + tried + "' exports none of ncclNetPlugin_v12, _v11, _v10";
    return nullptr;
  }
  return p;
}

NetPlugin::~NetPlugin() {
  if (dl_ != nullptr) dlclose(dl_);
}

const char* NetPlugin::Name() const { return v10_ ? v10_->name : v11_->name; }

rrNcclResult_t NetPlugin::Init(void** ctx, uint64_t commId, rrNcclDebugLogger_t log,
                               rrNcclProfilerCallback_t prof) {
  if (v10_) {
    *ctx = nullptr;
    if (v10_inited_) return rrNcclSuccess;
    rrNcclResult_t r = v10_->init(log, prof);
    v10_inited_ = (r == rrNcclSuccess);
    return r;
  }
  rrNcclNetCommConfig_t cfg{RR_NCCL_NET_TRAFFIC_CLASS_UNDEF};
  return v11_->init(ctx, commId, &cfg, log, prof);
}

rrNcclResult_t NetPlugin::Finalize(void* ctx) { return v10_ ? rrNcclSuccess : v11_->finalize(ctx); }
rrNcclResult_t NetPlugin::Devices(int* ndev) { return v10_ ? v10_->devices(ndev) : v11_->devices(ndev); }

rrNcclResult_t NetPlugin::GetProperties(int dev, rrNcclNetProperties_v12_t* out) {
  std::memset(out, 0, sizeof(*out));
  out->railId = out->planeId = -1;
  out->maxMultiRequestSize = 1;
  if (v12_) return v12_->getProperties(dev, out);
  // v10 and v11 share the v12 prefix up to vProps; copy field by field.
  auto copy = [out](const auto& p) {
    out->name = p.name, out->pciPath = p.pciPath, out->guid = p.guid;
    out->ptrSupport = p.ptrSupport, out->regIsGlobal = p.regIsGlobal, out->forceFlush = p.forceFlush;
    out->speed = p.speed, out->port = p.port, out->latency = p.latency;
    out->maxComms = p.maxComms, out->maxRecvs = p.maxRecvs;
    out->netDeviceType = p.netDeviceType, out->netDeviceVersion = p.netDeviceVersion;
    out->vProps.ndevs = p.vProps.ndevs;
    for (int i = 0; i < RR_NCCL_NET_MAX_DEVS_PER_NIC_V11; ++i) out->vProps.devs[i] = p.vProps.devs[i];
    out->maxP2pBytes = p.maxP2pBytes, out->maxCollBytes = p.maxCollBytes;
  };
  if (v11_) {
    rrNcclNetProperties_v11_t p{};
    rrNcclResult_t r = v11_->getProperties(dev, &p);
    copy(p);
    out->maxMultiRequestSize = p.maxMultiRequestSize;
    return r;
  }
  rrNcclNetProperties_v10_t p{};
  rrNcclResult_t r = v10_->getProperties(dev, &p);
  copy(p);
  return r;
}

rrNcclResult_t NetPlugin::Listen(void* ctx, int dev, void* handle, void** listenComm) {
  return v10_ ? v10_->listen(dev, handle, listenComm) : v11_->listen(ctx, dev, handle, listenComm);
}

rrNcclResult_t NetPlugin::Connect(void* ctx, int dev, void* handle, void** sendComm) {
  rrNcclNetDeviceHandle_t* dev_handle = nullptr;
  if (v10_) {
    rrNcclNetCommConfig_t cfg{RR_NCCL_NET_TRAFFIC_CLASS_UNDEF};
    return v10_->connect(dev, &cfg, handle, sendComm, &dev_handle);
  }
  return v11_->connect(ctx, dev, handle, sendComm, &dev_handle);
}

rrNcclResult_t NetPlugin::Accept(void* listenComm, void** recvComm) {
  rrNcclNetDeviceHandle_t* dev_handle = nullptr;
  return v10_ ? v10_->accept(listenComm, recvComm, &dev_handle) : v11_->accept(listenComm, recvComm, &dev_handle);
}

rrNcclResult_t NetPlugin::RegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return v10_ ? v10_->regMr(comm, data, size, type, mhandle) : v11_->regMr(comm, data, size, type, mhandle);
}

rrNcclResult_t NetPlugin::DeregMr(void* comm, void* mhandle) {
  return v10_ ? v10_->deregMr(comm, mhandle) : v11_->deregMr(comm, mhandle);
}

rrNcclResult_t NetPlugin::Isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                                void** request) {
  return v10_ ? v10_->isend(sendComm, data, size, tag, mhandle, phandle, request)
              : v11_->isend(sendComm, data, size, tag, mhandle, phandle, request);
}

rrNcclResult_t NetPlugin::Irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                                void** phandles, void** request) {
  return v10_ ? v10_->irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request)
              : v11_->irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request);
}

rrNcclResult_t NetPlugin::Iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                                 void** request) {
  return v10_ ? v10_->iflush(recvComm, n, data, sizes, mhandles, request)
              : v11_->iflush(recvComm, n, data, sizes, mhandles, request);
}

rrNcclResult_t NetPlugin::Test(void* request, int* done, int* sizes) {
  return v10_ ? v10_->test(request, done, sizes) : v11_->test(request, done, sizes);
}

rrNcclResult_t NetPlugin::CloseSend(void* c) { return v10_ ? v10_->closeSend(c) : v11_->closeSend(c); }
rrNcclResult_t NetPlugin::CloseRecv(void* c) { return v10_ ? v10_->closeRecv(c) : v11_->closeRecv(c); }
rrNcclResult_t NetPlugin::CloseListen(void* c) { return v10_ ? v10_->closeListen(c) : v11_->closeListen(c); }

rrNcclResult_t NetPlugin::SetNetAttr(void* ctx, rrNcclNetAttr_t* attr) {
  if (v10_ || v11_->setNetAttr == nullptr) return rrNcclSuccess;
  return v11_->setNetAttr(ctx, attr);
}

}  // namespace rr::netdrv
