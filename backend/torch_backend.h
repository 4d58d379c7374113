// The PyTorch backend: a scenario's pipeline run for real, one process per pipeline device.
//
// Each device with compute ops is a Python process (backend/torch_worker.py, compiled into
// the binary) running PyTorch on the CPU, joined to the others by gloo over loopback. A
// run sends each process its device's ops in the TaskGraph's stream order (the order
// `pipesim order` prints); the process runs them with real tensors and autograd: a forward
// is k matmuls of [rows, 128] by [128, 128] with tanh between, kept for the backward (only
// its input where the schedule recomputes it, and the recompute runs it again); a
// backward is autograd through them (input and weight gradients, or each alone where the
// schedule splits them); activations go forward and gradients back as gloo sends and
// receives. k is the op's time x the time scale at the process's calibrated matmul rate;
// rows follow the scenario's transfers (their median, scaled to at most 128 KiB). A transfer
// is paced to its idle-path time (route latency + bytes / bottleneck bandwidth, scaled) by
// its receiver: gloo over loopback is far faster than any link it stands for.
//
// Measured: every op's start and end (one monotonic clock for the host's processes), the
// arena peak per device (the op's memory deltas in stream order, as every backend does) and
// the bytes of real tensors each process held at its peak (kept activations, gradients kept
// for the weight-gradient step, received tensors in use).
//
// Supported: pipelines of one copy (no data, tensor or context parallel collectives): every
// transfer goes from the device of its producing op to the device of its consumers.
// Needs python3 with torch (Debian: python3-torch): PIPESIM_PYTHON names the interpreter,
// else /usr/bin/python3 where it exists, else python3 on the PATH. Not timing-faithful:
// the processes share the host's cores.
#pragma once

#include <memory>
#include <string>

#include "backend/executor.h"
#include "scenario/scenario.h"

namespace pipesim {

struct TorchOptions {
  double time_scale = 1.0;  // wall seconds per scenario second
  int threads = 1;          // intra-op threads per process
};

// The time scale `--time-scale auto` picks for the torch backend: the median compute op
// lasts 20 ms of wall time (Python and gloo add about a millisecond around each op), unless
// the simulated makespan would then take more than 2 s of wall time.
double torch_auto_time_scale(const TaskGraph& g, Time simulated_makespan);

// Starts one process per device of the scenario's placement; throws InputError (exit 2)
// where python3 cannot import torch. `s` must outlive the executor.
std::unique_ptr<Executor> make_torch_executor(const Scenario& s, TorchOptions options);

}  // namespace pipesim
