#include "cuda/kernels.h"

namespace pipesim::cuda {
namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void elementwise(float* x, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    x[i] = v / (1.0f + __expf(-1.702f * v));
  }
}

__global__ void optimizer(float* w, const float* g, size_t n, size_t cap) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t j = i % cap;
    w[j] -= 1e-3f * g[j];
  }
}

// One block: a link is modelled by its time (its share of each hop), not by SM throughput.
__global__ void shared_copy(uint4* dst, const uint4* src, size_t words, double bytes,
                            SharedRoute route, unsigned* active) {
  // Thread 0 keeps the time; the others copy meanwhile, so the copy adds nothing to it.
  const uint64_t start = global_ns();
  if (threadIdx.x != 0) {
    for (size_t i = threadIdx.x - 1; i < words; i += blockDim.x - 1) dst[i] = src[i];
    return;
  }
  while (global_ns() - start < route.latency_ns) {
  }
  for (int h = 0; h < route.hops; ++h) atomicAdd(&active[route.link[h]], 1u);
  __threadfence();
  double left = bytes;
  uint64_t last = start + route.latency_ns;
  while (left > 0) {
    const uint64_t now = global_ns();
    double rate = 1e300;
    for (int h = 0; h < route.hops; ++h) {
      const unsigned n = *static_cast<volatile unsigned*>(&active[route.link[h]]);
      rate = fmin(rate, route.bytes_per_ns[h] / (n > 0 ? n : 1));
    }
    left -= rate * static_cast<double>(now - last);
    last = now;
  }
  for (int h = 0; h < route.hops; ++h) atomicSub(&active[route.link[h]], 1u);
}

__global__ void stamp(uint64_t* slot) {
  *slot = global_ns();
}

unsigned blocks_for(size_t n) {
  const size_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 4096 ? 4096 : b));
}

}  // namespace

cudaError_t launch_elementwise(float* x, size_t n, cudaStream_t s) {
  elementwise<<<blocks_for(n), 256, 0, s>>>(x, n);
  return cudaGetLastError();
}

cudaError_t launch_optimizer(float* w, const float* g, size_t n, size_t cap, cudaStream_t s) {
  optimizer<<<blocks_for(n), 256, 0, s>>>(w, g, n, cap);
  return cudaGetLastError();
}

cudaError_t launch_shared_copy(void* dst, const void* src, size_t copy_bytes, double bytes,
                               const SharedRoute& route, unsigned* active, cudaStream_t s) {
  shared_copy<<<1, 256, 0, s>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src),
                                copy_bytes / sizeof(uint4), bytes, route, active);
  return cudaGetLastError();
}

cudaError_t launch_stamp(uint64_t* slot, cudaStream_t s) {
  stamp<<<1, 1, 0, s>>>(slot);
  return cudaGetLastError();
}

}  // namespace pipesim::cuda
