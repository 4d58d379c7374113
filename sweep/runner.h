// Running a sweep: the scenario at every point of a grid, on every core (and every rank of
// an MPI job), each point loaded, validated and simulated as `pipesim run` would.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "scenario/scenario.h"
#include "sweep/grid.h"

namespace pipesim {

struct Report;

struct SweepOptions {
  std::vector<Override> sets;        // fixed overrides, applied before each point's own
  bool zip = false;                  // pair the axes' lists instead of their product
  int threads = 0;                   // per process; 0: every core (shared among MPI ranks)
  std::ostream* progress = nullptr;  // progress lines (points done, rate); rank 0 only
};

// The report fields of one simulated point (SPEC section 5's names, in the writers).
struct PointReport {
  std::string scenario, schedule;
  double makespan_s = 0, iteration_time_s = 0, throughput_samples_per_s = 0;
  int64_t peak_memory_bytes = 0;  // most over the GPUs
  bool oom = false;
  std::string oom_message;  // empty unless oom
  double bubble_fraction = 0;
  std::optional<double> mfu, model_tflops_per_gpu, hardware_tflops_per_gpu, tokens_per_s;
  // With training.failures (SPEC section 10): the goodput and the best checkpoint interval.
  std::optional<double> goodput, checkpoint_every_optimal_s;
  int gpus = 0;
  uint64_t events = 0;
};

struct SweepPoint {
  std::vector<std::string> values;    // one per axis, as given
  std::optional<PointReport> report;  // when the point was simulated
  std::string error;                  // when it was not: the one-line message
};

struct Sweep {
  std::string scenario_file;  // "<default>" for the embedded scenario
  std::vector<std::string> keys;
  bool zip = false;
  std::vector<Override> sets;
  std::vector<SweepPoint> points;  // in grid order
  size_t failed = 0, out_of_memory = 0;
};

// `scenario_path` empty: the embedded default scenario. Throws InputError for a malformed
// grid (see Grid); a point that fails validation is recorded in its `error` and the sweep
// goes on. The result is the same whatever the thread or rank count.
Sweep run_sweep(const std::string& scenario_path, const std::vector<GridAxis>& axes,
                const SweepOptions& options);
// The same over a scenario document already read (its source names it).
Sweep run_sweep(const ScenarioDocument& doc, const std::vector<GridAxis>& axes,
                const SweepOptions& options);

// A run's report as a sweep point's figures.
PointReport summarize(const Report& report);

}  // namespace pipesim
