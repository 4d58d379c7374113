// `pipesim validate --sweep`: validation over a grid of configurations of one scenario, and
// how well the simulation ranks them.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/validate.h"

namespace pipesim {

// The most op executions (ops x runs, summed over the points) one validation sweep may ask
// of a backend: each op really runs, about a millisecond of wall time on the host backend.
inline constexpr double kMaxValidationOps = 5e6;

struct ValidationGrid {
  std::vector<std::string> schedules{"gpipe", "dapple", "pipedream"};
  std::vector<int> stages{2, 4, 8};
  std::vector<int> micro_batches{4, 8, 16};
  // Two link speeds: values of `link_key` (a scenario key, set as with --set).
  std::string link_key = "cluster.intra_node.bandwidth";
  std::vector<std::string> links{"64 GB/s", "8 GB/s"};
};

struct ValidationPoint {
  std::string schedule, link;
  int stages = 0, micro_batches = 0;
  Validation v;
};

struct ValidationSweep {
  std::vector<ValidationPoint> points;
  double predicted_mape = 0, predicted_max_error = 0;
  double replay_mape = 0, replay_max_error = 0;
  double kendall_tau = 0;   // ranking of the configurations: predicted vs measured makespan
  bool calibrated = false;  // ValidateOptions::calibrate: the calibrated prediction's figures
  double calibrated_mape = 0, calibrated_max_error = 0, calibrated_kendall_tau = 0;
  double replay_kendall_tau = 0;
};

// Loads the scenario once per point with `overrides` plus strategy.schedule,
// strategy.pipeline, training.global_batch (micro-batches x micro_batch x data) and the
// link key. `make` gives the executor for a loaded scenario. `progress` gets one line per
// point when set.
using ExecutorFactory = std::function<std::unique_ptr<Executor>(const Scenario&)>;
ValidationSweep validation_sweep(const std::string& file, const std::vector<Override>& overrides,
                                 const ValidationGrid& grid, const ExecutorFactory& make,
                                 const ValidateOptions& options, std::ostream* progress);

nlohmann::ordered_json to_json(const ValidationSweep& r);
std::string validation_sweep_table(const ValidationSweep& r);

}  // namespace pipesim
