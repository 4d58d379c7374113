// `pipesim validate`: run a scenario's TaskGraph on a backend and compare it with the
// simulation, with the scenario's costs (prediction) and with the measured op times
// (replay).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/executor.h"
#include "scenario/scenario.h"

namespace pipesim {

struct ValidateOptions {
  int warmup = 1;       // untimed executions first
  int iterations = 10;  // timed executions, twice (the noise floor compares the two sets)
  // Calibrated prediction: every distinct compute op (device, kind, work) also timed alone,
  // `calibrate_repeats` times, and the TaskGraph simulated with those medians.
  bool calibrate = false;
  int calibrate_repeats = 5;
};

struct DevicePeak {
  int64_t measured = 0;   // arena high-water mark
  int64_t simulated = 0;  // the simulator's peak
};

struct Validation {
  std::string scenario, schedule, backend, backend_description;
  bool timing_faithful = false;
  double time_scale = 1;
  int stages = 0;
  int64_t micro_batches = 0;
  int runs = 0;                // timed executions
  double measured_s = 0;       // median makespan over every timed execution
  double noise_floor = 0;      // |median(set 1) - median(set 2)| / measured
  double predicted_s = 0;      // simulated with the scenario's costs
  double predicted_error = 0;  // |predicted - measured| / measured
  // Calibrated prediction (ValidateOptions::calibrate): simulated with each compute op's
  // time measured alone, before any run of the whole graph could inform it.
  bool calibrated = false;
  double calibrated_s = 0, calibrated_error = 0;
  // Replay: each timed run simulated with its own measured op times; the median of those
  // makespans, and of their errors against the run's measured makespan, and the largest.
  double replay_s = 0, replay_error = 0, replay_error_max = 0;
  double replay_median_ops_s = 0;                // simulated with every op's median measured time
  double op_error_median = 0, op_error_p90 = 0;  // compute ops: |scenario - measured| / measured
  double measured_bubble = 0, predicted_bubble = 0, replay_bubble = 0;
  std::vector<DevicePeak> peaks;  // devices with compute ops
  // Same devices: the most bytes of real tensors held over the runs (the torch backend).
  std::vector<int64_t> tensor_peaks;
  bool peaks_equal = true;
};

// The TaskGraph with the compute ops' durations replaced (same ops, deps, streams, memory).
TaskGraph with_durations(const TaskGraph& g, const std::vector<Time>& durations);

// Idle share of (devices running pipeline stages x makespan), as the report computes it.
double bubble_fraction(const TaskGraph& g, const std::vector<Time>& start,
                       const std::vector<Time>& end);

Validation validate(const Scenario& s, Executor& e, const ValidateOptions& options);

nlohmann::ordered_json to_json(const Validation& v);
std::string validation_table(const Validation& v);

}  // namespace pipesim
