// The CUDA backend's own kernels (kernels.cu), launched from host code built by the C++
// compiler. Each returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace pipesim::cuda {

// x = x * sigmoid(1.702 x) over n floats: the element-wise part of a layer.
cudaError_t launch_elementwise(float* x, size_t n, cudaStream_t s);
// A memory-bound optimizer step: w[i % cap] -= lr * g[i % cap] for i < n.
cudaError_t launch_optimizer(float* w, const float* g, size_t n, size_t cap, cudaStream_t s);
// A transfer's route for launch_shared_copy: the link directions it crosses (indices into
// the `active` counters) and each one's bandwidth in bytes per nanosecond.
struct SharedRoute {
  static constexpr int kMaxHops = 8;
  int hops = 0;
  int link[kMaxHops] = {};
  double bytes_per_ns[kMaxHops] = {};
  uint64_t latency_ns = 0;
};
// A link transfer as the simulator's flow model runs it: copies up to `copy_bytes` from src
// to dst, waits the route's latency, then counts itself on every link direction of its
// route (`active`, device memory) and drains `bytes` at the least over its hops of that
// hop's bandwidth divided by the transfers on it, re-read as they come and go, by the GPU's
// global timer. Equal shares per link: max-min fairness where one hop is the bottleneck.
cudaError_t launch_shared_copy(void* dst, const void* src, size_t copy_bytes, double bytes,
                               const SharedRoute& route, unsigned* active, cudaStream_t s);
// Writes the GPU's global timer (nanoseconds) to *slot when the stream reaches it.
cudaError_t launch_stamp(uint64_t* slot, cudaStream_t s);

}  // namespace pipesim::cuda
