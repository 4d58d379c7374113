// Lowering: schedule order + stage profiles + placement -> TaskGraph.
//
// This is where the semantics of SPEC section 3 live, for every schedule alike:
//  - F(g, m) waits for F(g-1, m)'s output to arrive; B(g, m) waits for the gradient from
//    B(g+1, m) (on the last stage, for its own F(g, m)); W(g, m) waits for B(g, m).
//  - A stage with r replicas splits each micro-batch r ways: each replica computes and
//    stores 1/r of it, and an output is re-split across the next stage's replicas, each
//    (sender, receiver) pair moving the bytes of the samples they share.
//  - Activations are allocated when F starts and freed when the backward that consumes
//    them ends (W when the profile is split and the schedule runs W).
//  - Weights, gradients and optimizer state are resident from the start.
//  - Each device ends an iteration with its optimizer step; the next iteration's ops
//    follow it on the device's stream (the flush of synchronous schedules).
#pragma once

#include <vector>

#include "schedules/model.h"
#include "schedules/order.h"
#include "schedules/task_graph.h"

namespace pipesim {

// Costs of one global stage for one whole micro-batch (before any replica split).
struct StageProfile {
  Time forward, backward_input, backward_weight, optimizer;
  int64_t activation_bytes = 0;
  int64_t output_bytes = 0;
  int64_t params = 0;
};

std::vector<StageProfile> stage_profiles(const Model& model, const std::vector<StageSpec>& stages);

struct LoweringInput {
  ScheduleOrder order;               // [position] steps of one iteration
  std::vector<StageProfile> stages;  // [global stage]; stage g runs on position g % P
  std::vector<std::vector<std::vector<int>>> placement;  // [copy][position] -> device per replica
  int num_devices = 0;
  int micro_batches = 1;
  int iterations = 1;
  ParamBytes param_bytes;
  std::vector<int64_t> reserved_bytes;  // [device], counted as "other"; may be empty
};

// Asserts (InternalError) that the result passes TaskGraph::validate().
TaskGraph lower(const LoweringInput& in);

}  // namespace pipesim
