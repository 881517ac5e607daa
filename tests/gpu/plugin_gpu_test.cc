// rerail-plugin-gpu-test: GPU buffers through libnccl-net-rerail.so, driven through its ABI table as
// NCCL's proxy drives it, with no NCCL in between (so it runs whether or not NCCL decides to use GDR):
// RERAIL_GPU_BUFFERS=1, ptrSupport must include NCCL_PTR_CUDA, regMr(NCCL_PTR_CUDA) of cudaMalloc'd
// buffers on both sides, messages of 0..64 MiB+3 bytes (GPU->GPU, host->GPU, GPU->host, 8 in flight)
// over loopback, every received byte checked on the host, then the GPU->GPU throughput against the
// same comm with host buffers (printed, not asserted).
// Usage: rerail-plugin-gpu-test <path to libnccl-net-rerail.so>. Exit 0 ok, 1 failure, 77 no GPU.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "nccl_net_abi.h"

namespace {
int g_fail = 0;
#define FAIL(...)                  \
  do {                             \
    std::printf("FAIL: ");         \
    std::printf(__VA_ARGS__);      \
    std::printf("\n");             \
    ++g_fail;                      \
  } while (0)
#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::printf("FAIL: %s: %s\n", #x, cudaGetErrorString(e_));                       \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void Logger(int level, unsigned long, const char* file, int line, const char* fmt, ...) {
  if (level > 2 && std::getenv("VERBOSE") == nullptr) return;   // NCCL_LOG_WARN = 2
  va_list ap;
  va_start(ap, fmt);
  std::printf("[plugin %s:%d] ", file, line);
  std::vprintf(fmt, ap);
  std::printf("\n");
  va_end(ap);
}

struct Pair {
  const rrNcclNet_v10_t* net;
  void* sc = nullptr;
  void* rc = nullptr;
};

// Sends `count` messages of `n` bytes from sbuf to rbuf (up to `window` in flight); true once all done.
bool Transfer(Pair& p, void* sbuf, void* smh, void* rbuf, void* rmh, size_t n, size_t cap, int count, int window) {
  std::vector<void*> sreq(count, nullptr), rreq(count, nullptr);
  std::vector<int> sdone(count, 0), rdone(count, 0), got(count, -1);
  int s_posted = 0, r_posted = 0, s_fin = 0, r_fin = 0;
  double deadline = Now() + 60;
  while ((s_fin < count || r_fin < count) && Now() < deadline) {
    while (r_posted < count && r_posted - r_fin < window) {
      void* data = rbuf;
      size_t sz = cap;
      int tag = 0;
      if (p.net->irecv(p.rc, 1, &data, &sz, &tag, &rmh, nullptr, &rreq[r_posted]) != 0) { FAIL("irecv"); return false; }
      if (rreq[r_posted] == nullptr) break;
      ++r_posted;
    }
    while (s_posted < count && s_posted - s_fin < window) {
      if (p.net->isend(p.sc, sbuf, n, 0, smh, nullptr, &sreq[s_posted]) != 0) { FAIL("isend"); return false; }
      if (sreq[s_posted] == nullptr) break;
      ++s_posted;
    }
    if (s_fin < s_posted) {   // NCCL tests the oldest request only
      if (p.net->test(sreq[s_fin], &sdone[s_fin], nullptr) != 0) { FAIL("test(send)"); return false; }
      if (sdone[s_fin]) ++s_fin;
    }
    if (r_fin < r_posted) {
      if (p.net->test(rreq[r_fin], &rdone[r_fin], &got[r_fin]) != 0) { FAIL("test(recv)"); return false; }
      if (rdone[r_fin]) {
        if (static_cast<size_t>(got[r_fin]) != n) FAIL("received %d bytes, want %zu", got[r_fin], n);
        ++r_fin;
      }
    }
  }
  if (s_fin < count || r_fin < count) FAIL("%d x %zu bytes: %d sent, %d received in 60 s", count, n, s_fin, r_fin);
  return s_fin == count && r_fin == count;
}
}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);   // lines reach a log file even if the process dies
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  if (argc < 2) {
    std::printf("usage: %s <libnccl-net-rerail.so>\n", argv[0]);
    return 1;
  }
  setenv("RERAIL_GPU_BUFFERS", "1", 0);
  if (std::getenv("RERAIL_TCP_IFNAME") == nullptr) setenv("RERAIL_TCP_IFNAME", "lo", 0);
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));   // the primary context, current on this thread as on NCCL's proxy thread
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) { std::printf("FAIL: dlopen: %s\n", dlerror()); return 1; }
  auto* net = static_cast<const rrNcclNet_v10_t*>(dlsym(h, "ncclNetPlugin_v10"));
  if (net == nullptr) { std::printf("FAIL: no ncclNetPlugin_v10\n"); return 1; }
  if (net->init(Logger, nullptr) != 0) { std::printf("FAIL: init\n"); return 1; }
  rrNcclNetProperties_v10_t props{};
  if (net->getProperties(0, &props) != 0) { std::printf("FAIL: getProperties\n"); return 1; }
  std::printf("device 0: %s ptrSupport 0x%x\n", props.name, props.ptrSupport);
  if (!(props.ptrSupport & RR_NCCL_PTR_CUDA)) { std::printf("FAIL: ptrSupport lacks NCCL_PTR_CUDA with RERAIL_GPU_BUFFERS=1\n"); return 1; }

  Pair p{net};
  char handle[RR_NCCL_NET_HANDLE_MAXSIZE] = {};
  void* lc = nullptr;
  if (net->listen(0, handle, &lc) != 0) { std::printf("FAIL: listen\n"); return 1; }
  double deadline = Now() + 20;
  while ((p.sc == nullptr || p.rc == nullptr) && Now() < deadline) {
    if (p.sc == nullptr && net->connect(0, nullptr, handle, &p.sc, nullptr) != 0) { std::printf("FAIL: connect\n"); return 1; }
    if (p.rc == nullptr && net->accept(lc, &p.rc, nullptr) != 0) { std::printf("FAIL: accept\n"); return 1; }
  }
  if (p.sc == nullptr || p.rc == nullptr) { std::printf("FAIL: connect/accept did not complete\n"); return 1; }
  net->closeListen(lc);

  const size_t kMax = (64u << 20) + 3, kCap = kMax + 4096;
  std::vector<unsigned char> host_src(kMax), host_dst(kCap), check(kCap);
  for (size_t i = 0; i < kMax; ++i) host_src[i] = static_cast<unsigned char>(i * 131 + (i >> 12));
  void *dsrc = nullptr, *ddst = nullptr;
  CK(cudaMalloc(&dsrc, kMax));
  CK(cudaMalloc(&ddst, kCap));
  CK(cudaMemcpy(dsrc, host_src.data(), kMax, cudaMemcpyHostToDevice));
  void *smh_gpu = nullptr, *rmh_gpu = nullptr, *smh_host = nullptr, *rmh_host = nullptr;
  if (net->regMr(p.sc, dsrc, kMax, RR_NCCL_PTR_CUDA, &smh_gpu) != 0 ||
      net->regMr(p.rc, ddst, kCap, RR_NCCL_PTR_CUDA, &rmh_gpu) != 0) { std::printf("FAIL: regMr(NCCL_PTR_CUDA)\n"); return 1; }
  if (net->regMr(p.sc, host_src.data(), kMax, RR_NCCL_PTR_HOST, &smh_host) != 0 ||
      net->regMr(p.rc, host_dst.data(), kCap, RR_NCCL_PTR_HOST, &rmh_host) != 0) { std::printf("FAIL: regMr(HOST)\n"); return 1; }

  struct Case { const char* name; bool sgpu, rgpu; };
  const Case cases[] = {{"gpu->gpu", true, true}, {"host->gpu", false, true}, {"gpu->host", true, false}};
  const size_t sizes[] = {0, 1, 4095, 65536, (1u << 20) + 1, (16u << 20) + 3, kMax};
  int checked = 0;
  for (const Case& c : cases) {
    for (size_t n : sizes) {
      void* sbuf = c.sgpu ? dsrc : host_src.data();
      void* rbuf = c.rgpu ? ddst : host_dst.data();
      CK(cudaMemset(ddst, 0xA5, kCap));
      std::memset(host_dst.data(), 0xA5, kCap);
      int count = n <= (1u << 20) + 1 ? 8 : 2;
      if (!Transfer(p, sbuf, c.sgpu ? smh_gpu : smh_host, rbuf, c.rgpu ? rmh_gpu : rmh_host, n, kCap, count, 8)) continue;
      if (c.rgpu) CK(cudaMemcpy(check.data(), ddst, kCap, cudaMemcpyDeviceToHost));
      else std::memcpy(check.data(), host_dst.data(), kCap);
      bool ok = std::memcmp(check.data(), host_src.data(), n) == 0;
      for (size_t i = n; i < n + 64 && i < kCap; ++i) ok &= check[i] == 0xA5;
      if (!ok) FAIL("%s %zu bytes: received bytes differ (or bytes past the message written)", c.name, n);
      else ++checked;
    }
  }
  std::printf("checked %d transfers (gpu->gpu, host->gpu, gpu->host; 0..%zu bytes, up to 8 in flight)\n", checked, kMax);

  // Throughput: 64 MiB messages, 8 in flight, GPU buffers (staged) vs host buffers (direct), same comm.
  const int kReps = 16;
  double t0 = Now();
  Transfer(p, dsrc, smh_gpu, ddst, rmh_gpu, kMax, kCap, kReps, 8);
  double tg = Now() - t0;
  t0 = Now();
  Transfer(p, host_src.data(), smh_host, host_dst.data(), rmh_host, kMax, kCap, kReps, 8);
  double th = Now() - t0;
  std::printf("loopback 64 MiB x %d: GPU buffers (staged) %.2f GB/s, host buffers %.2f GB/s, ratio %.2f\n", kReps,
              kReps * kMax / tg / 1e9, kReps * kMax / th / 1e9, th / tg);

  net->deregMr(p.sc, smh_gpu);
  net->deregMr(p.rc, rmh_gpu);
  net->deregMr(p.sc, smh_host);
  net->deregMr(p.rc, rmh_host);
  net->closeSend(p.sc);
  net->closeRecv(p.rc);
  cudaFree(dsrc);
  cudaFree(ddst);
  std::printf("%s: %d failures\n", g_fail ? "FAIL" : "PASS", g_fail);
  return g_fail ? 1 : 0;
}
