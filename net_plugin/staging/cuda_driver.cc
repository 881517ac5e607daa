#include "staging/cuda_driver.h"

#include <dlfcn.h>

#include <unordered_map>

namespace rr::staging {
namespace {
// cuda.h values (driver ABI; stable since CUDA 4)
constexpr int kAttrMemoryType = 2;      // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttrDeviceOrdinal = 9;   // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kMemoryTypeDevice = 2;  // CU_MEMORYTYPE_DEVICE

template <typename F>
bool Sym(void* h, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(h, name));
  return *out != nullptr;
}
}  // namespace

CudaDriver& CudaDriver::Get() {
  static CudaDriver d;   // magic static: loaded once, thread-safe
  return d;
}

CudaDriver::CudaDriver() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    why_ = e != nullptr ? e : "dlopen(libcuda.so.1) failed";
    return;
  }
  if (!Sym(h, "cuInit", &init_) || !Sym(h, "cuDeviceGetCount", &device_count_) ||
      !Sym(h, "cuCtxGetCurrent", &ctx_get_current_) || !Sym(h, "cuCtxSetCurrent", &ctx_set_current_) ||
      !Sym(h, "cuDevicePrimaryCtxRetain", &primary_ctx_retain_) ||
      !Sym(h, "cuPointerGetAttribute", &pointer_get_attribute_) || !Sym(h, "cuMemcpyAsync", &memcpy_async_) ||
      !Sym(h, "cuStreamCreate", &stream_create_) || !Sym(h, "cuStreamSynchronize", &stream_synchronize_) ||
      !(Sym(h, "cuStreamDestroy_v2", &stream_destroy_) || Sym(h, "cuStreamDestroy", &stream_destroy_)) ||
      !(Sym(h, "cuMemHostRegister_v2", &host_register_) || Sym(h, "cuMemHostRegister", &host_register_))) {
    why_ = "libcuda.so.1 lacks a driver entry point the staging path needs";
    return;
  }
  Sym(h, "cuGetErrorString", &get_error_string_);   // optional: only for messages
  int n = 0;
  if (CUresult e = init_(0)) {
    why_ = Error("cuInit", e);
  } else if (CUresult e2 = device_count_(&n)) {
    why_ = Error("cuDeviceGetCount", e2);
  } else if (n == 0) {
    why_ = "no CUDA device";
  } else {
    available_ = true;
  }
}

std::string CudaDriver::Error(const char* call, int code) const {
  const char* s = nullptr;
  if (get_error_string_ != nullptr) get_error_string_(code, &s);
  return std::string(call) + ": error " + std::to_string(code) + (s != nullptr ? std::string(" (") + s + ")" : "");
}

bool CudaDriver::IsDevicePointer(const void* ptr) const {
  if (!available_ || ptr == nullptr) return false;
  unsigned type = 0;
  if (pointer_get_attribute_(&type, kAttrMemoryType, reinterpret_cast<CUdeviceptr>(ptr)) != 0) return false;
  return type == kMemoryTypeDevice;
}

Status CudaDriver::ContextFor(const void* ptr, void** ctx) const {
  *ctx = nullptr;
  if (!available_) return Status(Code::kUnhandledCuda, "CUDA unavailable: " + why_);
  if (ctx_get_current_(ctx) == 0 && *ctx != nullptr) return Status::Ok();
  int dev = 0;   // no pointer: device 0
  if (ptr != nullptr) {
    if (CUresult e = pointer_get_attribute_(&dev, kAttrDeviceOrdinal, reinterpret_cast<CUdeviceptr>(ptr)))
      return Status(Code::kUnhandledCuda, Error("cuPointerGetAttribute(DEVICE_ORDINAL)", e));
  }
  if (CUresult e = primary_ctx_retain_(ctx, dev))
    return Status(Code::kUnhandledCuda, Error("cuDevicePrimaryCtxRetain", e));
  return Status::Ok();
}

namespace {
// Makes `ctx` current on this thread for the scope and puts the previous context back.
class CurrentContext {
 public:
  CurrentContext(void* ctx, int (*get)(void**), int (*set)(void*)) : set_(set) {
    if (get(&prev_) != 0) prev_ = nullptr;
    switched_ = prev_ != ctx;
    if (switched_) err_ = set(ctx);
  }
  ~CurrentContext() {
    if (switched_ && err_ == 0) set_(prev_);
  }
  int error() const { return err_; }

 private:
  int (*set_)(void*);
  void* prev_ = nullptr;
  bool switched_ = false;
  int err_ = 0;
};
}  // namespace

Status CudaDriver::Copy(void* ctx, void** stream, void* dst, const void* src, std::size_t bytes) const {
  if (!available_) return Status(Code::kUnhandledCuda, "CUDA unavailable: " + why_);
  if (bytes == 0) return Status::Ok();
  CurrentContext cur(ctx, ctx_get_current_, ctx_set_current_);
  if (cur.error() != 0) return Status(Code::kUnhandledCuda, Error("cuCtxSetCurrent", cur.error()));
  if (*stream == nullptr) {
    constexpr unsigned kNonBlocking = 1;   // CU_STREAM_NON_BLOCKING: no implicit sync with stream 0
    if (CUresult e = stream_create_(stream, kNonBlocking)) {
      *stream = nullptr;
      return Status(Code::kUnhandledCuda, Error("cuStreamCreate", e));
    }
  }
  if (CUresult e = memcpy_async_(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes, *stream))
    return Status(Code::kUnhandledCuda, Error("cuMemcpyAsync", e));
  if (CUresult e = stream_synchronize_(*stream)) return Status(Code::kUnhandledCuda, Error("cuStreamSynchronize", e));
  return Status::Ok();
}

void CudaDriver::DestroyStream(void* ctx, void* stream) const {
  if (!available_ || stream == nullptr) return;
  CurrentContext cur(ctx, ctx_get_current_, ctx_set_current_);
  if (cur.error() == 0) stream_destroy_(stream);
}

Status CudaDriver::PinHost(void* ctx, void* p, std::size_t bytes) const {
  if (!available_) return Status(Code::kUnhandledCuda, "CUDA unavailable: " + why_);
  CurrentContext cur(ctx, ctx_get_current_, ctx_set_current_);
  if (cur.error() != 0) return Status(Code::kUnhandledCuda, Error("cuCtxSetCurrent", cur.error()));
  constexpr unsigned kPortable = 1;   // CU_MEMHOSTREGISTER_PORTABLE: pinned for every context
  if (CUresult e = host_register_(p, bytes, kPortable)) return Status(Code::kUnhandledCuda, Error("cuMemHostRegister", e));
  return Status::Ok();
}

}  // namespace rr::staging
