// Launch API of librerail-kernels.so: the CUDA kernels of the host-staged path.
//
// This header includes no CUDA header: streams are passed as `void*` (a cudaStream_t / CUstream,
// nullptr = the legacy default stream) so net_plugin/staging/ and the benchmark can call it without
// the toolkit's headers. Every call only enqueues work on the stream and returns at once; errors are
// launch errors (bad configuration, sticky context errors) reported as a non-zero CUDA error code,
// with Error() naming it.
//
// Memory: `host_slot` must be pinned host memory mapped into the device address space
// (cudaHostAlloc(..., cudaHostAllocMapped) or cuMemHostRegister with DEVICEMAP) and is passed as the
// *device* pointer of that mapping (identical to the host pointer under unified addressing).
// `ready_flag` is a uint64_t in the same kind of memory.
//
// Ordering: Pack copies, then every thread does a system-scope fence (__threadfence_system), then a
// one-thread kernel on the same stream fences again and stores `flag_value` into *ready_flag with a
// volatile store. A host thread that reads *ready_flag == flag_value (acquire load) therefore sees the
// whole slot, without synchronising the stream: this is what the progress path polls.
#pragma once
#include <cstddef>
#include <cstdint>

#define RERAIL_KERNELS_API __attribute__((visibility("default")))

namespace rerail::kernels {

struct LaunchShape {
  unsigned blocks = 0;    // 0: derived from the size (at most 4 per SM, at least 1)
  unsigned threads = 512; // per block
};

// Packs `bytes` of GPU memory at gpu_src into host_slot, then writes *ready_flag = flag_value.
// If checksum_out is non-null, also stores the chunk checksum (index_math.h) of the bytes (hashed on
// the GPU side, not over PCIe) there before the flag is written; seg_scratch must then hold ChecksumSegments(bytes) uint64_t of
// device-accessible memory. Returns 0 or a cudaError_t value.
RERAIL_KERNELS_API int Pack(const void* gpu_src, void* host_slot, std::size_t bytes, uint64_t* ready_flag, uint64_t flag_value,
         uint64_t* checksum_out, uint64_t* seg_scratch, uint64_t seed, void* stream, LaunchShape shape = {});

// Unpacks `bytes` from host_slot into GPU memory at gpu_dst; if done_flag is non-null, writes
// *done_flag = flag_value after the copy (same fence order as Pack) so the host knows the slot is free.
RERAIL_KERNELS_API int Unpack(const void* host_slot, void* gpu_dst, std::size_t bytes, uint64_t* done_flag, uint64_t flag_value,
           void* stream, LaunchShape shape = {});

// Chunk checksum of device-accessible memory (GPU or mapped host), result stored to *out.
RERAIL_KERNELS_API int Checksum(const void* data, std::size_t bytes, uint64_t seed, uint64_t* out, uint64_t* seg_scratch,
             void* stream, LaunchShape shape = {});

// The name of an error code returned above (cudaGetErrorString).
RERAIL_KERNELS_API const char* Error(int code);

// The SM architectures compiled into the library, e.g. "80,90,100" (for logs and tests).
RERAIL_KERNELS_API const char* Architectures();

}  // namespace rerail::kernels
