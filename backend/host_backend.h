// The host backend: CPU threads as virtual devices.
//
// Each device with compute ops gets a thread that runs its stream in order; an op waits for
// its deps through per-op atomic counters and the device's condition variable. A compute op
// is real work: blocked fp32 GEMM tiles, as many as the kernel's calibrated rate does in
// the op's time x the time scale (time-calibrated work: the count is fixed before the op
// starts, so a thread that shares its core with others takes longer, and that is measured).
// Transfers run on LinkEmulator (backend/host_links.h). Times are measured with the steady
// clock and divided by the time scale.
//
// Not timing-faithful: virtual devices share the host's cores, caches and memory bandwidth,
// and more devices than cores share them in time.
#pragma once

#include <memory>

#include "backend/executor.h"
#include "topology/cluster.h"

namespace pipesim {

struct HostOptions {
  double time_scale = 1.0;  // wall seconds per scenario second
};

// The time scale `--time-scale auto` picks: the median compute op lasts 5 ms of wall time
// (so thread wake-ups, a fraction of a millisecond on an idle machine, stay small beside
// it), unless that makes the simulated makespan longer than 1 s of wall time, in which case
// the makespan takes 1 s. Other backends name their own two targets.
double auto_time_scale(const TaskGraph& g, Time simulated_makespan, double op_wall_s = 5e-3,
                       double makespan_wall_s = 1.0);

class HostExecutor : public Executor {
 public:
  // Calibrates the GEMM tile rate (about 20 ms). `cluster` must outlive the executor.
  HostExecutor(const Cluster& cluster, HostOptions options);
  std::string name() const override { return "host"; }
  std::string description() const override;
  bool timing_faithful() const override { return false; }
  double time_scale() const override { return options_.time_scale; }
  Measurement run(const TaskGraph& graph, const std::vector<ExecWork>& work) override;
  Time time_op(const Op& op, const ExecWork& work) override;

  // GEMM tiles per wall second on one thread, as calibrated.
  double tile_rate() const { return tile_rate_; }
  static double tile_flops();

 private:
  int64_t tiles_for(Time duration) const;
  const Cluster& cluster_;
  HostOptions options_;
  double tile_rate_ = 0;
};

}  // namespace pipesim
