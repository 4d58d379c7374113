// The CUDA backend: a scenario's TaskGraph on one physical GPU split into virtual GPUs.
//
// Each virtual GPU is a green context holding a partition of the SMs (8-SM groups, CUDA 13
// driver API fetched at run time with cudaGetDriverEntryPointByVersion: the driver stub
// library is never linked); one more partition of 8 SMs runs the links. Compute ops are
// cuBLAS bf16 GEMMs with the op's FLOPs (cublasSetSmCountTarget set to the partition) plus
// an element-wise kernel; a backward is two GEMMs (input and weight gradient); the optimizer
// is a memory-bound kernel. A transfer is a paced copy kernel on the link partition, on one
// stream per (sender, receiver). Dependencies are events; op times come from the GPU's
// global timer stamped on each op's stream. Where green contexts cannot be made, plain
// streams with the same SM count targets are used and the backend says it is not
// timing-faithful.
#pragma once

#include <memory>

#include "backend/executor.h"
#include "scenario/scenario.h"

namespace pipesim {

// Throws InputError (key --backend) when no CUDA device can be used.
std::unique_ptr<Executor> make_cuda_executor(const Scenario& s);

// Whether a CUDA device can be used here.
bool cuda_device_present();

}  // namespace pipesim
