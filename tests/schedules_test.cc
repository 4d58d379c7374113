// Schedule orders, even partitions, the TaskGraph validator and lowering.
#include <gtest/gtest.h>

#include <bit>
#include <numeric>
#include <random>

#include "core/error.h"
#include "schedules/lower.h"
#include "schedules/order.h"
#include "schedules/partition.h"

namespace pipesim {
namespace {

std::vector<std::string> format_order(const ScheduleOrder& o) {
  std::vector<std::string> lines;
  for (const auto& steps : o) lines.push_back(format_steps(steps, false));
  return lines;
}

TEST(Orders, OneFOneBMatchesMegatronForS4M8) {
  // shared/reference/schedules.md; Megatron-LM schedules.py
  // forward_backward_pipelining_without_interleaving (warm-up S - s - 1).
  EXPECT_EQ(format_order(one_f_one_b_order(4, 8)),
            (std::vector<std::string>{"F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
                                      "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
                                      "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
                                      "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"}));
}

TEST(Orders, OneFOneBCapsWarmupAtM) {
  // S = 4, M = 2: warm-up min(S - s - 1, M) = 2, 2, 1, 0. Stages 0 and 1 run both
  // forwards then drain; stage 2 warms up with F0, then F1 B0 (one 1F1B pair), then B1.
  EXPECT_EQ(format_order(one_f_one_b_order(4, 2)),
            (std::vector<std::string>{"F0 F1 B0 B1", "F0 F1 B0 B1", "F0 F1 B0 B1", "F0 B0 F1 B1"}));
}

TEST(Orders, GpipeIsAllForwardsThenAllBackwards) {
  EXPECT_EQ(format_order(gpipe_order(2, 3)),
            (std::vector<std::string>{"F0 F1 F2 B0 B1 B2", "F0 F1 F2 B0 B1 B2"}));
}

class OrderShape : public ::testing::TestWithParam<std::tuple<ScheduleKind, int, int>> {};

TEST_P(OrderShape, EveryMicroBatchOnceForwardBeforeBackward) {
  const auto [kind, S, M] = GetParam();
  const ScheduleOrder o =
      kind == ScheduleKind::kGpipe ? gpipe_order(S, M) : one_f_one_b_order(S, M);
  ASSERT_EQ(static_cast<int>(o.size()), S);
  for (int s = 0; s < S; ++s) {
    std::vector<int> f_pos(static_cast<size_t>(M), -1), b_pos(static_cast<size_t>(M), -1);
    int live = 0, peak = 0;
    const auto& steps = o[static_cast<size_t>(s)];
    for (size_t i = 0; i < steps.size(); ++i) {
      auto& pos = steps[i].kind == OpKind::kForward ? f_pos : b_pos;
      ASSERT_EQ(pos[static_cast<size_t>(steps[i].micro_batch)], -1) << "duplicate step";
      pos[static_cast<size_t>(steps[i].micro_batch)] = static_cast<int>(i);
      live += steps[i].kind == OpKind::kForward ? 1 : -1;
      peak = std::max(peak, live);
    }
    for (int m = 0; m < M; ++m) {
      ASSERT_GE(f_pos[static_cast<size_t>(m)], 0);
      ASSERT_GT(b_pos[static_cast<size_t>(m)], f_pos[static_cast<size_t>(m)]);
    }
    // Live micro-batches: GPipe holds all M; 1F1B holds min(S - s, M).
    EXPECT_EQ(peak, kind == ScheduleKind::kGpipe ? M : std::min(S - s, M)) << "stage " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, OrderShape,
    ::testing::Combine(::testing::Values(ScheduleKind::kGpipe, ScheduleKind::kDapple),
                       ::testing::Values(1, 2, 3, 4, 8), ::testing::Values(1, 2, 5, 8, 16)),
    // Names from the values (gpipe_S4_M8), the same in every build.
    [](const ::testing::TestParamInfo<OrderShape::ParamType>& info) {
      return std::string(to_string(std::get<0>(info.param))) + "_S" +
             std::to_string(std::get<1>(info.param)) + "_M" +
             std::to_string(std::get<2>(info.param));
    });

Model model_of(const std::vector<int>& fwd_ms) {
  Model m;
  for (int t : fwd_ms) {
    Layer l;
    l.forward = Time::ms(t);
    l.backward_input = Time::ms(2 * t);
    m.layers.push_back(l);
  }
  return m;
}

TEST(Partition, MinimisesTheSlowestStageThenBalances) {
  // Layer costs (F + B) 3,3,3,3,3,3 ms into 3 stages: two layers each.
  auto p = even_partition(model_of({1, 1, 1, 1, 1, 1}), 3);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].first_layer, 0);
  EXPECT_EQ(p[0].last_layer, 1);
  EXPECT_EQ(p[2].last_layer, 5);
  // Costs 3,3,3,3,30: the big layer sets the bound (30 ms) on its own; the other four
  // split 2 + 2 (6, 6) rather than 3 + 1 (9, 3) because that is more even.
  p = even_partition(model_of({1, 1, 1, 1, 10}), 3);
  EXPECT_EQ(p[0].last_layer, 1);
  EXPECT_EQ(p[1].last_layer, 3);
  EXPECT_EQ(p[2].first_layer, 4);
  // One stage per layer when stages == layers.
  p = even_partition(model_of({5, 1, 7}), 3);
  EXPECT_EQ(p[1].first_layer, 1);
  EXPECT_EQ(p[1].last_layer, 1);
}

TEST(Partition, BoundIsOptimalOnRandomModels) {
  // Property: no split into S consecutive groups has a smaller slowest group. Checked
  // against brute force over all cut positions for small models.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 7);
    const int S = 1 + static_cast<int>(rng() % n);
    std::vector<int> t;
    for (int i = 0; i < n; ++i) t.push_back(1 + static_cast<int>(rng() % 9));
    const auto p = even_partition(model_of(t), S);
    auto worst = [&](const std::vector<int>& cuts) {  // cuts: first layer of stages 1..S-1
      int best = 0, start = 0;
      for (size_t k = 0; k <= cuts.size(); ++k) {
        const int end = k < cuts.size() ? cuts[k] : n;
        best = std::max(best, 3 * std::accumulate(t.begin() + start, t.begin() + end, 0));
        start = end;
      }
      return best;
    };
    std::vector<int> got;
    for (size_t s = 1; s < p.size(); ++s) got.push_back(p[s].first_layer);
    int optimum = INT32_MAX;
    for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
      if (std::popcount(mask) != S - 1) continue;
      std::vector<int> cuts;
      for (int i = 0; i < n - 1; ++i)
        if (mask & (1u << i)) cuts.push_back(i + 1);
      optimum = std::min(optimum, worst(cuts));
    }
    EXPECT_EQ(worst(got), optimum);
  }
}

TEST(TaskGraph, ValidatorNamesTheDeadlockCycle) {
  // dev0 runs F1 before F0; dev1 runs F0 then F1. dev1:F0 needs dev0:F0, which its stream
  // puts after dev0:F1; dev0:F1 needs dev1:F1, which its stream puts after dev1:F0. The
  // cycle dev0:F1 -> dev1:F1 -> dev1:F0 -> dev0:F0 -> dev0:F1 never starts.
  TaskGraphBuilder b(2);
  Op f;
  f.kind = OpKind::kForward;
  f.device = 0;
  f.micro_batch = 1;
  const OpId d0f1 = b.add(f);
  f.micro_batch = 0;
  const OpId d0f0 = b.add(f);
  f.device = 1;
  f.micro_batch = 0;
  const OpId d1f0 = b.add(f);
  f.micro_batch = 1;
  const OpId d1f1 = b.add(f);
  b.add_dep(d1f0, d0f0);
  b.add_dep(d0f1, d1f1);
  const TaskGraph g = std::move(b).build();
  const auto problem = g.validate();
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("deadlock"), std::string::npos) << *problem;
  for (const char* op : {"dev0:F1", "dev0:F0", "dev1:F0", "dev1:F1"}) {
    EXPECT_NE(problem->find(op), std::string::npos) << *problem;
  }
}

TEST(TaskGraph, ValidatorAcceptsGeneratedGraphsAndRejectsBadOnes) {
  TaskGraphBuilder b(2);
  Op t;
  t.kind = OpKind::kTransfer;
  t.device = 0;
  t.peer = 0;  // a transfer to itself
  b.add(t);
  EXPECT_TRUE(std::move(b).build().validate().has_value());
}

LoweringInput straight(int S, int M, const std::vector<int>& replicas, int iterations = 1) {
  LoweringInput in;
  OrderSpec spec;
  spec.positions = S;
  spec.micro_batches = M;
  spec.iterations = iterations;
  spec.replicas = replicas;
  in.orders = build_orders(spec);
  int next = 0;
  Placement placement(1);
  for (int s = 0; s < S; ++s) {
    StageProfile p;
    p.forward = Time::ms(1);
    p.backward_input = Time::ms(2);
    p.activation_bytes = 1000;
    p.output_bytes = 600;
    p.params = 10;
    in.stages.push_back(p);
    std::vector<int> devs;
    for (int r = 0; r < replicas[static_cast<size_t>(s)]; ++r) devs.push_back(next++);
    placement[0].push_back(devs);
  }
  in.placement = std::make_shared<const Placement>(std::move(placement));
  in.num_devices = next;
  in.micro_batches_per_iteration = M;
  Training mixed_adam;
  mixed_adam.precision = Precision::kMixed;
  mixed_adam.optimizer = Optimizer::kAdam;
  in.param_bytes = bytes_per_param(mixed_adam);
  return in;
}

TEST(Lowering, ReplicasSplitWorkAndResplitOutputs) {
  // Stage 0 on 2 GPUs, stage 1 on 3 GPUs. Each replica of stage 0 holds half a
  // micro-batch, each of stage 1 a third. Replica i of stage 0 covers [i/2, (i+1)/2),
  // replica j of stage 1 covers [j/3, (j+1)/3): overlaps 1/3, 1/6 | 1/6, 1/3 of the
  // micro-batch, so 600 bytes move as 200, 100, 100, 200 (pairs 0-0, 0-1, 1-1, 1-2).
  const TaskGraph g = lower(straight(2, 1, {2, 3}));
  std::vector<int64_t> fwd_bytes, allreduce_stage0, allreduce_stage1;
  int64_t grad_total = 0;
  for (const Op& op : g.ops()) {
    if (op.kind == OpKind::kForward) {
      EXPECT_EQ(op.duration,
                op.stage == 0 ? Time::us(500) : Time::ps(333'333'334));  // 1 ms / r, rounded up
      EXPECT_EQ(op.mem_at_start, op.stage == 0 ? 500 : 334);
    }
    if (op.comm == CommKind::kActivation) fwd_bytes.push_back(op.bytes);
    if (op.comm == CommKind::kGradient) grad_total += op.bytes;
    if (op.comm == CommKind::kAllReduce)
      (op.stage == 0 ? allreduce_stage0 : allreduce_stage1).push_back(op.bytes);
  }
  EXPECT_EQ(fwd_bytes, (std::vector<int64_t>{200, 100, 100, 200}));
  EXPECT_EQ(grad_total, 600);  // the gradient comes back the same way
  // Ring all-reduce of 10 params x 4 bytes = 40 bytes among each stage's replicas:
  // 2 (n - 1) steps, each rank sending 40 / n bytes to its neighbour.
  // n = 2: 2 steps x 2 ranks of 20 bytes; n = 3: 4 steps x 3 ranks of ceil(40 / 3) = 14.
  EXPECT_EQ(allreduce_stage0, std::vector<int64_t>(4, 20));
  EXPECT_EQ(allreduce_stage1, std::vector<int64_t>(12, 14));
  // Static memory: 10 params x 16 bytes (mixed precision Adam: 2 + 2 + 4 + 8) per replica.
  for (int d = 0; d < 5; ++d) {
    const auto& m = g.static_memory(d);
    EXPECT_EQ(m[0] + m[1] + m[2], 160);
  }
}

TEST(Lowering, EveryIterationEndsWithAnOptimizerStepPerDevice) {
  LoweringInput in = straight(3, 4, {1, 1, 1}, 3);
  const TaskGraph g = lower(in);
  for (int d = 0; d < 3; ++d) {
    int optimizer_steps = 0;
    const auto s = g.stream(d);
    for (OpId id : s) optimizer_steps += g.op(id).kind == OpKind::kOptimizer;
    EXPECT_EQ(optimizer_steps, 3);
    EXPECT_EQ(g.op(s.back()).kind, OpKind::kOptimizer);
    EXPECT_EQ(s.size(), 3u * (2 * 4 + 1));
  }
}

}  // namespace
}  // namespace pipesim
