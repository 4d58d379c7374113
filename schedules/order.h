// Schedule orders: for each pipeline position (a device slot; its replicas run the same
// order), the sequence of compute steps for one iteration. A schedule is nothing more
// than this function; lower.h turns an order into a TaskGraph.
#pragma once

#include <string>
#include <vector>

#include "schedules/model.h"
#include "schedules/task_graph.h"

namespace pipesim {

struct Step {
  OpKind kind = OpKind::kForward;  // kForward, kBackward, kWeightGrad or kRecompute
  int micro_batch = 0;             // 0 .. M-1 within the iteration
  int chunk = 0;
  friend bool operator==(const Step&, const Step&) = default;
};

using ScheduleOrder = std::vector<std::vector<Step>>;  // [position][k]

// GPipe (Huang et al. 2019): all M forwards, then all M backwards, micro-batches in order
// (PyTorch ScheduleGPipe).
ScheduleOrder gpipe_order(int stages, int micro_batches);

// 1F1B with early backward (DAPPLE; Megatron-LM's PipeDream-Flush): stage s runs
// min(S - s - 1, M) warm-up forwards, then one forward one backward, then drains.
ScheduleOrder one_f_one_b_order(int stages, int micro_batches);

ScheduleOrder schedule_order(ScheduleKind kind, int stages, int micro_batches);

// "F0 F1 B0 ..." in `pipesim order` notation; chunk suffixes when `show_chunks`.
std::string format_steps(const std::vector<Step>& steps, bool show_chunks);

}  // namespace pipesim
