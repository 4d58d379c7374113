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
// A link: copies `bytes` from src to dst, then spins until `ns` nanoseconds after its start
// (its modelled time), by the GPU's global timer.
cudaError_t launch_paced_copy(void* dst, const void* src, size_t bytes, uint64_t ns,
                              cudaStream_t s);
// Writes the GPU's global timer (nanoseconds) to *slot when the stream reaches it.
cudaError_t launch_stamp(uint64_t* slot, cudaStream_t s);

}  // namespace pipesim::cuda
