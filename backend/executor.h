// The executor interface: a backend runs a TaskGraph for real, op for op, and measures it.
//
// Every backend runs the same TaskGraph the simulator replays: a compute op starts when the
// previous op of its device's stream and all its deps have ended; a transfer runs on the
// emulated links between its two devices as soon as its deps have ended. Each virtual
// device applies its ops' memory deltas to its own arena in stream order (backend/arena.h);
// the arena's high-water mark is the measured peak memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/time.h"
#include "schedules/task_graph.h"

namespace pipesim {

// The real work behind one op, derived from the scenario (backend/work.h).
struct ExecWork {
  double flops = 0;   // compute ops: floating-point operations to perform
  int64_t bytes = 0;  // optimizer: bytes of memory traffic; transfers: bytes sent
};

// One execution of a TaskGraph. Times are in the scenario's time: a backend that runs
// scaled (the host backend) divides its wall-clock times by its time scale.
struct Measurement {
  std::vector<Time> start, end;      // [op], from the start of the execution
  Time makespan;                     // end of the last op
  std::vector<int64_t> peak_memory;  // [device] arena high-water mark, resident bytes included
  // [device] bytes of real tensors held at the peak (the torch backend); empty elsewhere.
  std::vector<int64_t> tensor_peak;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string name() const = 0;         // "host", "cuda"
  virtual std::string description() const = 0;  // the hardware and the mode, one line
  // Whether the virtual devices are isolated enough that op times mean what they would on
  // separate devices (green contexts); false for the host backend and plain CUDA streams.
  virtual bool timing_faithful() const = 0;
  // Wall-clock seconds per scenario second (1 on a GPU).
  virtual double time_scale() const = 0;
  // Executes the whole graph once. `work` has one entry per op.
  virtual Measurement run(const TaskGraph& graph, const std::vector<ExecWork>& work) = 0;
  // Runs one compute op alone on the resources of its device (op.device) and returns its
  // time (for profiling layers).
  virtual Time time_op(const Op& op, const ExecWork& work) = 0;
};

// Seconds to Time, to the nearest picosecond.
inline Time time_from_seconds(double s) {
  return Time::ps(static_cast<int64_t>(s * 1e12 + 0.5));
}

}  // namespace pipesim
