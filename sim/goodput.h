// Goodput under failures (SPEC section 10): the expected share of wall time that makes
// training progress when GPUs fail at random, the job checkpoints every tau and restarts
// from the last checkpoint after each failure.
//
// The model (Daly 2006, "A higher order estimate of the optimum checkpoint interval for
// restart dumps", Future Generation Computer Systems 22(3), eq. 13): failures arrive as a
// Poisson process of mean time between failures M (the cluster's: one GPU's MTBF over the
// GPUs the job uses); each segment computes tau, then writes a checkpoint for delta; a
// failure anywhere (also during a checkpoint or a restart) costs the restart time R and
// the work since the last checkpoint. The expected wall time per unit of solve time is
//     T_wall / T_solve = M e^{R/M} (e^{(tau + delta)/M} - 1) / tau,
// so goodput = tau / (M e^{R/M} (e^{(tau + delta)/M} - 1)). To first order in 1/M this is
// (tau / (tau + delta)) (1 - (R + (tau + delta)/2) / M), and its optimum Young's (1974)
// tau = sqrt(2 delta M); the optimum reported here maximises the exact expression.
#pragma once

#include <optional>

namespace pipesim {

struct FailureModel {
  double cluster_mtbf_s = 0;                 // M
  double checkpoint_s = 0;                   // delta: writing one checkpoint
  double restart_s = 0;                      // R: from a failure to computing again
  std::optional<double> checkpoint_every_s;  // tau; unset: the optimum
};

struct Goodput {
  double goodput = 0;             // share of wall time that makes progress
  double checkpoint_every_s = 0;  // tau used
  double checkpoint_every_optimal_s = 0;
  double goodput_at_optimal = 0;
  double failures_per_day = 0;
  double lost_hours_per_day = 0;  // 24 h x (1 - goodput)
  // Of the lost time per day: writing checkpoints, and failures (work redone and restarts).
  double checkpoint_hours_per_day = 0, failure_hours_per_day = 0;
};

// Daly's goodput for a checkpoint interval tau (seconds > 0).
double daly_goodput(double tau_s, double checkpoint_s, double restart_s, double mtbf_s);
// The interval that maximises it (golden-section search on [1 ms, 100 M]).
double optimal_checkpoint_interval(double checkpoint_s, double restart_s, double mtbf_s);
Goodput goodput(const FailureModel& f);

}  // namespace pipesim
