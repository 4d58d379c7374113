// Schedule orders: the sequence of compute steps each device runs. A schedule is nothing
// more than this function; lower.h turns orders into a TaskGraph.
//
// The generators below produce one list per pipeline position for one iteration of M
// micro-batches. build_orders() then adds what every schedule shares: weight-gradient
// steps for split profiles, optimizer steps (once per iteration for synchronous
// schedules, after every mini-batch for asynchronous ones), and per-replica lists.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/model.h"
#include "schedules/stage_costs.h"
#include "schedules/task_graph.h"

namespace pipesim {

struct Step {
  OpKind kind = OpKind::kForward;  // kForward, kBackward, kWeightGrad, kRecompute, kOptimizer
  int micro_batch = 0;             // within the block; for kOptimizer the mini-batch index
  int chunk = 0;
  friend bool operator==(const Step&, const Step&) = default;
};

using StepList = std::vector<Step>;
using ScheduleOrder = std::vector<StepList>;  // [position]

// GPipe (Huang et al. 2019): all M forwards, then all M backwards, micro-batches in order
// (PyTorch ScheduleGPipe).
ScheduleOrder gpipe_order(int stages, int micro_batches);

// GPipe with re-materialisation: the same, but each backward is preceded by a re-run of
// the stage's forward (R), so only stage inputs stay alive between the two phases.
ScheduleOrder gpipe_recompute_order(int stages, int micro_batches);

// 1F1B with early backward (DAPPLE; Megatron-LM's PipeDream-Flush): stage s runs
// min(S - s - 1, M) warm-up forwards, then one forward one backward, then drains.
// `in_flight[s]`, when given, replaces S - s as the micro-batches stage s has in flight
// when it starts its first backward (strategy.warmup), capped at M.
ScheduleOrder one_f_one_b_order(int stages, int micro_batches,
                                const std::vector<int>& in_flight = {});

// Megatron-LM interleaved 1F1B (forward_backward_pipelining_with_interleaving): v model
// chunks per device, micro-batches in groups of S; warm-up (S - s - 1) * 2 + (v - 1) * S,
// or every forward first when M == S. Requires M % S == 0.
ScheduleOrder interleaved_order(int stages, int virtual_stages, int micro_batches);
// Its warm-up forwards on stage s: min((S - s - 1) * 2 + (v - 1) * S, v M).
int interleaved_warmup(int stages, int virtual_stages, int micro_batches, int s);

// Zero Bubble (Qi et al. 2024) handcrafted schedules: 1F1B with warm-up
// min((S - s - 1) * c, M) and the weight gradient W(j) deferred to just after
// B(j + c * s) (or to the end). c = 1 gives ZB-H1, c = 2 gives ZB-H2.
ScheduleOrder zero_bubble_order(int stages, int micro_batches, int c);

// PipeDream's runtime loop for one rank over its micro-batches (in arrival order):
// `warmup` forwards, then forward/backward pairs, then the remaining backwards.
StepList pipedream_rank_order(const std::vector<int>& micro_batches, int warmup);

// "F0 F1 B0 ..." in `pipesim order` notation; chunk suffixes (".c1") when `show_chunks`.
std::string format_steps(const StepList& steps, bool show_chunks);
// Parses one line of that notation (F, B, W, R steps); returns the problem, if any.
std::optional<std::string> parse_steps(std::string_view line, StepList& out);

struct SlotOrders {
  std::vector<std::vector<StepList>> steps;  // [position][replica]
  int blocks = 1;            // how often the lists repeat (synchronous: once per iteration)
  int micro_batches = 1;     // micro-batches one block covers
  bool round_robin = false;  // replicas take whole micro-batches in turn (PipeDream 1F1B-RR)
  // With a split backward, a stage's input gradient leaves right after B (the zero-bubble
  // schedules and hand-written orders, which place W themselves). Otherwise it leaves after
  // B and W, as one autograd call computes the whole backward in PyTorch and Megatron-LM.
  bool early_input_grad = false;
  // Megatron-LM's interleaved schedule, when it does not overlap point-to-point transfers
  // with compute (Strategy::p2p_overlap), communicates once per steady-state step: a
  // forward followed directly by a backward sends its output with that backward's input
  // gradient, after the backward (send_forward_backward_recv_forward_backward).
  // [position]: the forwards of an iteration from this one on (counted from 0) are the
  // steady state's, each paired with the backward after it. Empty: no pairs.
  std::vector<int> pair_from;
  // Built by a schedule (not hand-written): each micro-batch's F, R, B and W follow one
  // another in their device's list, so the stream order alone keeps them in turn.
  bool generated = true;
};

struct OrderSpec {
  ScheduleKind kind = ScheduleKind::kDapple;
  int positions = 1;
  int virtual_stages = 1;
  int micro_batches = 1;  // per iteration (mini-batch)
  int iterations = 1;
  bool split_backward = false;
  std::vector<int> replicas;            // [position]
  std::vector<int> in_flight;           // [position] 1F1B warm-up depth; empty: S - s
  std::vector<char> recompute;          // [global stage] R before each B; empty: none
  const ScheduleOrder* user = nullptr;  // hand-written lists replace the generator
  const StageCosts* costs = nullptr;    // for the schedules that need_stage_costs()
};

SlotOrders build_orders(const OrderSpec& spec);

}  // namespace pipesim
