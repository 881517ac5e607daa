#include "transports/ib/ib_device.h"

#include <cerrno>
#include <cstring>

namespace rr::ib {
namespace {

Status VerbError(const std::string& verb, const std::string& dev, int err) {
  return Status(Code::kSystemError, verb + "(" + dev + "): " + (err ? strerror(err) : "failed"));
}

vx::ContextOps& Ops(vx::Context* ctx) { return reinterpret_cast<vx::ContextHead*>(ctx)->ops; }

}  // namespace

std::string WcStatusName(const VerbsLib& lib, int status) {
  const char* s = lib.loaded() && lib.wc_status_str ? lib.wc_status_str(status) : nullptr;
  return (s ? std::string(s) : std::string("status")) + " (" + std::to_string(status) + ")";
}

// ---- IbDevice -------------------------------------------------------------------------------------

Status IbDevice::Open(const VerbsLib& lib, const IbPort& port, std::unique_ptr<IbDevice>* out) {
  if (!lib.loaded()) return Status(Code::kSystemError, "libibverbs " + lib.Describe());
  std::unique_ptr<IbDevice> d(new IbDevice(lib, port));
  int n = 0;
  vx::Device** list = lib.get_device_list(&n);
  if (list == nullptr) return VerbError("ibv_get_device_list", port.dev, errno);
  for (int i = 0; i < n && d->ctx_ == nullptr; ++i) {
    const char* name = lib.get_device_name(list[i]);
    if (name && port.dev == name) {
      d->ctx_ = lib.open_device(list[i]);
      if (d->ctx_ == nullptr) {
        int e = errno;
        lib.free_device_list(list);
        return VerbError("ibv_open_device", port.dev, e);
      }
    }
  }
  lib.free_device_list(list);
  if (d->ctx_ == nullptr) return Status(Code::kSystemError, "IB device " + port.dev + " is gone");
  vx::PortAttr pa{};
  if (lib.query_port(d->ctx_, static_cast<uint8_t>(port.port), &pa) != 0) return VerbError("ibv_query_port", port.dev, errno);
  d->mtu_enum_ = pa.active_mtu;
  d->pd_ = lib.alloc_pd(d->ctx_);
  if (d->pd_ == nullptr) return VerbError("ibv_alloc_pd", port.dev, errno);
  *out = std::move(d);
  return Status::Ok();
}

IbDevice::~IbDevice() {
  if (pd_) lib_.dealloc_pd(pd_);
  if (ctx_) lib_.close_device(ctx_);
}

// ---- IbCq -----------------------------------------------------------------------------------------

Status IbCq::Create(IbDevice& dev, int entries, std::unique_ptr<IbCq>* out) {
  std::unique_ptr<IbCq> c(new IbCq(dev));
  c->cq_ = dev.lib().create_cq(dev.context(), entries, nullptr, nullptr, 0);
  if (c->cq_ == nullptr) return VerbError("ibv_create_cq", dev.port().name, errno);
  c->entries_ = reinterpret_cast<vx::CqHead*>(c->cq_)->cqe;  // the provider may round up
  *out = std::move(c);
  return Status::Ok();
}

IbCq::~IbCq() {
  if (cq_) dev_.lib().destroy_cq(cq_);
}

Status IbCq::Poll(int max, vx::Wc* wc, int* n) {
  int got = Ops(dev_.context()).poll_cq(cq_, max, wc);
  if (got < 0) return VerbError("ibv_poll_cq", dev_.port().name, EIO);
  *n = got;
  return Status::Ok();
}

// ---- IbMr -----------------------------------------------------------------------------------------

Status IbMr::Register(IbDevice& dev, void* addr, size_t len, int access, std::unique_ptr<IbMr>* out) {
  std::unique_ptr<IbMr> m(new IbMr(dev));
  m->mr_ = dev.lib().reg_mr(dev.pd(), addr, len, access);
  if (m->mr_ == nullptr) return VerbError("ibv_reg_mr", dev.port().name + ", " + std::to_string(len) + " B", errno);
  *out = std::move(m);
  return Status::Ok();
}

IbMr::~IbMr() {
  if (mr_) dev_.lib().dereg_mr(mr_);
}

}  // namespace rr::ib
