// The whole schedule family end to end: reference orders and closed forms
// (shared/reference/schedules.md), memory facts, replication and all-reduce against
// hand-derived timelines, and one body of invariants run over every schedule.
#include <gtest/gtest.h>

#include <map>

#include "tests/support.h"

namespace pipesim {
namespace {

using test::PipeSpec;
using test::SimRun;

using test::ms;

std::string order_of(const PipeSpec& p) {
  const auto r = test::cli({"order", test::write_temp("family-order.yaml", test::to_yaml(p))});
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

// Most activation-holding micro-batches (chunks) a device had alive at once, with one
// micro-batch's activation worth `unit` bytes.
int64_t peak_live(const SimRun& r, int device, int64_t unit) {
  return test::peak_activation_bytes(r, device) / unit;
}

constexpr int64_t kMiB = 1024 * 1024;

TEST(Interleaved, MegatronOrderS4V2M8) {
  PipeSpec p;
  p.schedule = "interleaved";
  p.virtual_stages = 2;
  EXPECT_EQ(order_of(p),
            "dev0: F0.c0 F1.c0 F2.c0 F3.c0 F0.c1 F1.c1 F2.c1 F3.c1 F4.c0 F5.c0 F6.c0 B0.c1 F7.c0 "
            "B1.c1 F4.c1 "
            "B2.c1 F5.c1 B3.c1 F6.c1 B0.c0 F7.c1 B1.c0 B2.c0 B3.c0 B4.c1 B5.c1 B6.c1 B7.c1 B4.c0 "
            "B5.c0 B6.c0 "
            "B7.c0\n"
            "dev1: F0.c0 F1.c0 F2.c0 F3.c0 F0.c1 F1.c1 F2.c1 F3.c1 F4.c0 B0.c1 F5.c0 B1.c1 F6.c0 "
            "B2.c1 F7.c0 "
            "B3.c1 F4.c1 B0.c0 F5.c1 B1.c0 F6.c1 B2.c0 F7.c1 B3.c0 B4.c1 B5.c1 B6.c1 B7.c1 B4.c0 "
            "B5.c0 B6.c0 "
            "B7.c0\n"
            "dev2: F0.c0 F1.c0 F2.c0 F3.c0 F0.c1 F1.c1 F2.c1 B0.c1 F3.c1 B1.c1 F4.c0 B2.c1 F5.c0 "
            "B3.c1 F6.c0 "
            "B0.c0 F7.c0 B1.c0 F4.c1 B2.c0 F5.c1 B3.c0 F6.c1 B4.c1 F7.c1 B5.c1 B6.c1 B7.c1 B4.c0 "
            "B5.c0 B6.c0 "
            "B7.c0\n"
            "dev3: F0.c0 F1.c0 F2.c0 F3.c0 F0.c1 B0.c1 F1.c1 B1.c1 F2.c1 B2.c1 F3.c1 B3.c1 F4.c0 "
            "B0.c0 F5.c0 "
            "B1.c0 F6.c0 B2.c0 F7.c0 B3.c0 F4.c1 B4.c1 F5.c1 B5.c1 F6.c1 B6.c1 F7.c1 B7.c1 B4.c0 "
            "B5.c0 B6.c0 "
            "B7.c0\n");
}

TEST(Interleaved, AsManyMicroBatchesAsStagesStartOneFOneBOnTheLaterStages) {
  // S = 2, v = 2, M = 2: 4 chunk-forwards per device. Warm-up (S - s - 1) x 2 + (v - 1) x S,
  // at most 4: device 0 runs all 4 forwards first, device 1 only 2, then F/B pairs, as
  // Megatron-LM since its micro-batch groups (and PyTorch's ScheduleInterleaved1F1B) do.
  // (Megatron-LM before that ran every forward first on every stage when M = S.)
  PipeSpec p;
  p.schedule = "interleaved";
  p.stages = 2;
  p.micro_batches = 2;
  p.virtual_stages = 2;
  EXPECT_EQ(order_of(p),
            "dev0: F0.c0 F1.c0 F0.c1 F1.c1 B0.c1 B1.c1 B0.c0 B1.c0\n"
            "dev1: F0.c0 F1.c0 F0.c1 B0.c1 F1.c1 B1.c1 B0.c0 B1.c0\n");
}

TEST(Interleaved, ClosedFormsAndPeaks) {
  // Reference: per-chunk t_f = t_b = 0.5 gives 19; t_b = 1.0 gives 28.5. Bubble
  // (S - 1) / (vM + S - 1) = 3 / 19 for the first. Peak live chunk-activations 11, 9, 7, 5.
  PipeSpec p;
  p.schedule = "interleaved";
  p.virtual_stages = 2;
  p.tf_ms = {0.5};
  p.tb_ms = {0.5};
  const SimRun r = test::run_pipe(p);
  EXPECT_EQ(r.timeline.makespan, ms(19));
  EXPECT_NEAR(r.report.bubble_fraction, 3.0 / 19.0, 1e-12);
  const int64_t peaks[] = {11, 9, 7, 5};
  for (int d = 0; d < 4; ++d) EXPECT_EQ(peak_live(r, d, kMiB), peaks[d]) << "dev" << d;
  p.tb_ms = {1.0};
  EXPECT_EQ(test::run_pipe(p).timeline.makespan, ms(28.5));
}

TEST(ZeroBubble, ReferenceOrders) {
  PipeSpec p;
  p.schedule = "zb-h1";
  p.tw_ms = {1.0};
  EXPECT_EQ(order_of(p),
            "dev0: F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7\n"
            "dev1: F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 B6 W5 B7 W6 W7\n"
            "dev2: F0 F1 B0 F2 B1 F3 B2 W0 F4 B3 W1 F5 B4 W2 F6 B5 W3 F7 B6 W4 B7 W5 W6 W7\n"
            "dev3: F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7\n");
  p.schedule = "zb-h2";
  EXPECT_EQ(order_of(p),
            "dev0: F0 F1 F2 F3 F4 F5 F6 B0 W0 F7 B1 W1 B2 W2 B3 W3 B4 W4 B5 W5 B6 W6 B7 W7\n"
            "dev1: F0 F1 F2 F3 F4 B0 F5 B1 F6 B2 W0 F7 B3 W1 B4 W2 B5 W3 B6 W4 B7 W5 W6 W7\n"
            "dev2: F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 W0 F7 B5 W1 B6 W2 B7 W3 W4 W5 W6 W7\n"
            "dev3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 W0 F7 B7 W1 W2 W3 W4 W5 W6 W7\n");
}

TEST(ZeroBubble, MakespansBubblesAndLiveActivations) {
  // t_f = t_b = t_w = 1, p = 4, M = 8. Every device works 3 x 8 = 24.
  // ZB-H1: makespan 27 = 24 + (p-1)(T_F + T_B - T_W) = 24 + 3; at most 4 live.
  // ZB-H2: devices end at 24, 25, 26, 27 (bubble (p-1)(T_F + T_B - 2 T_W) = 0 on the first);
  // at most 2p - 1 = 7 live. 1F1B with B and W back to back: (M + p - 1) x 3 = 33, its
  // bubble (p-1)(T_F + T_B + T_W) = 9.
  PipeSpec p;
  p.tw_ms = {1.0};
  p.schedule = "zb-h1";
  SimRun r = test::run_pipe(p);
  EXPECT_EQ(r.timeline.makespan, Time::ms(27));
  for (int d = 0; d < 4; ++d) EXPECT_LE(peak_live(r, d, kMiB), 4);
  EXPECT_EQ(peak_live(r, 0, kMiB), 4);
  p.schedule = "zb-h2";
  r = test::run_pipe(p);
  for (int d = 0; d < 4; ++d) EXPECT_EQ(test::device_finish(r, d), Time::ms(24 + d));
  EXPECT_EQ(peak_live(r, 0, kMiB), 7);
  for (int d = 0; d < 4; ++d) EXPECT_LE(peak_live(r, d, kMiB), 7);
  p.schedule = "dapple";
  p.tw_ms.clear();
  p.tb_ms = {2.0};  // B and W fused into one backward
  r = test::run_pipe(p);
  EXPECT_EQ(r.timeline.makespan, Time::ms(33));
  EXPECT_EQ(r.timeline.makespan - r.report.devices[0].busy, Time::ms(9));
  // With a split profile, 1F1B runs B then W back to back and, as one autograd call, sends
  // the input gradient after W: exactly the fused 33 (SPEC section 3).
  p.tb_ms = {1.0};
  p.tw_ms = {1.0};
  EXPECT_NE(order_of(p).find("dev0: F0 F1 F2 F3 B0 W0 F4 B1 W1"), std::string::npos);
  r = test::run_pipe(p);
  EXPECT_EQ(r.timeline.makespan, Time::ms(33));
}

// Split backward under every schedule that does not place W itself: the input gradient
// leaves after B and W, so uniform stages give (M + S - 1)(t_f + t_b + t_w), exactly as a
// fused backward of t_b + t_w. S = 4, M = 8, t_f = t_b = t_w = 1 ms: 11 x 3 = 33 ms.
TEST(SplitBackward, SentAfterWeightGradientOutsideZeroBubble) {
  for (const char* schedule : {"gpipe", "dapple", "1f1b", "pipedream-flush"}) {
    PipeSpec p;
    p.schedule = schedule;
    p.tw_ms = {1.0};
    EXPECT_EQ(test::run_pipe(p).timeline.makespan, Time::ms(33)) << schedule;
  }
  // Recompute: (M + S - 1)(2 t_f + t_b + t_w) = 11 x 4 = 44 ms.
  PipeSpec p;
  p.schedule = "gpipe-recompute";
  p.tw_ms = {1.0};
  EXPECT_EQ(test::run_pipe(p).timeline.makespan, Time::ms(44));
  // Interleaved, per-chunk t_f = 0.5, t_b + t_w = 0.5 + 0.5: the fused reference 28.5.
  p.schedule = "interleaved";
  p.virtual_stages = 2;
  p.tf_ms = {0.5};
  p.tb_ms = {0.5};
  p.tw_ms = {0.5};
  EXPECT_EQ(test::run_pipe(p).timeline.makespan, ms(28.5));
  // With transfers on the links (1 MiB per hop), the split backward still runs exactly as
  // a fused backward of t_b + t_w = 2 ms: the same timeline end to end.
  PipeSpec q;
  q.output = "1 MiB";
  q.tb_ms = {2.0};
  const Time fused = test::run_pipe(q).timeline.makespan;
  q.tb_ms = {1.0};
  q.tw_ms = {1.0};
  EXPECT_EQ(test::run_pipe(q).timeline.makespan, fused);
  EXPECT_GT(fused, Time::ms(33));
  // ZB-H1 keeps the early send: 27 (reference table).
  q.schedule = "zb-h1";
  q.output = "0 B";
  EXPECT_EQ(test::run_pipe(q).timeline.makespan, Time::ms(27));
}

TEST(GpipeRecompute, ClosedFormAndMemory) {
  // Makespan (M + S - 1)(2 t_f + t_b) + 2 (S - 1) c: each backward is preceded by a re-run
  // forward, and each of the 2 (S - 1) hops of the first micro-batch's round trip costs
  // c = 1 MiB / 1 TB/s = 1.048576 us (as for GPipe with communication).
  // Memory: stage inputs (the previous stage's 1 MiB output; 0 on stage 0) for every
  // micro-batch, plus one micro-batch's full activations (10 MiB) while it recomputes:
  // stage s > 0 peaks at M x 1 MiB + (10 - 1) MiB.
  PipeSpec p;
  p.schedule = "gpipe-recompute";
  p.tb_ms = {2.0};
  p.activation = "10 MiB";
  p.output = "1 MiB";
  const SimRun r = test::run_pipe(p);
  EXPECT_EQ(r.timeline.makespan, Time::ms(4) * (8 + 4 - 1) + Time::ps(1'048'576) * 6);
  EXPECT_EQ(test::peak_activation_bytes(r, 0), 10 * kMiB);  // nothing kept: no model.input
  for (int d = 1; d < 4; ++d)
    EXPECT_EQ(test::peak_activation_bytes(r, d), 8 * kMiB + 9 * kMiB) << d;
  EXPECT_NE(order_of(p).find("dev0: F0 F1 F2 F3 F4 F5 F6 F7 R0 B0 R1 B1"), std::string::npos);
}

TEST(PipeDream, StashedVersionsAndSteadyState) {
  // S = 4, M = 2 micro-batches per mini-batch, 6 mini-batches, t_f = t_b = 1, 10 M params
  // (fp32 weights: 40 MB). Stage s stashes S - s - 1 extra versions: 120, 80, 40, 0 MB.
  // Without flushes the pipeline stays full: one mini-batch per M (t_f + t_b) = 4 ms.
  PipeSpec p;
  p.schedule = "pipedream";
  p.micro_batches = 2;
  p.iterations = 6;
  p.params = "10M";
  const SimRun r = test::run_pipe(p);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(r.report.devices[static_cast<size_t>(s)]
                  .at_peak[static_cast<size_t>(MemCategory::kStashedWeights)],
              (3 - s) * 40'000'000);
  }
  EXPECT_EQ(r.report.iteration_time, Time::ms(4));
  EXPECT_NEAR(r.report.throughput, 2 / 4e-3, 1e-6);
  // One long 1F1B: the first device warms up once, then alternates, with an optimizer step
  // after each mini-batch's last backward.
  EXPECT_EQ(order_of(p).substr(0, 40), "dev0: F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F");
  // Asynchronous: 12 micro-batches take (12 + 3) x 2 = 30 ms, not 6 flushed iterations.
  EXPECT_EQ(r.timeline.makespan, Time::ms(30));
  p.schedule = "pipedream-2bw";
  const SimRun two = test::run_pipe(p);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(two.report.devices[static_cast<size_t>(s)]
                  .at_peak[static_cast<size_t>(MemCategory::kStashedWeights)],
              40'000'000);
  }
  EXPECT_EQ(two.timeline.makespan, Time::ms(30));
}

TEST(PipeDream, RoundRobinReplicasUseTheRuntimeWarmup) {
  // Stage 0 on two GPUs, stage 1 on one: 3 ranks. PipeDream's runtime warm-up is
  // (ranks - 1 - ranks before) / ranks here: stage 0: (3 - 1 - 0) / 2 = 1, stage 1: 0.
  // Replica j of stage 0 takes micro-batches m with m % 2 == j, whole.
  PipeSpec p;
  p.schedule = "pipedream";
  p.stages = 2;
  p.micro_batches = 4;
  p.replicas = {2, 1};
  EXPECT_EQ(order_of(p),
            "dev0: F0 F2 B0 B2\n"
            "dev1: F1 F3 B1 B3\n"
            "dev2: F0 B0 F1 B1 F2 B2 F3 B3\n");
  const SimRun r = test::run_pipe(p);
  // Whole micro-batches: every F on stage 0 takes the full 1 ms.
  for (OpId id : r.graph.stream(0)) {
    if (r.graph.op(id).kind == OpKind::kForward) {
      EXPECT_EQ(r.graph.op(id).duration, Time::ms(1));
    }
  }
}

TEST(Replication, TwoStagePipelineWithStageZeroOnTwoGpus) {
  // Stage 0 (t_f 2, t_b 4 per micro-batch) on dev0 and dev1, each computing half of every
  // micro-batch (1 and 2 ms); stage 1 (t_f 1, t_b 2) on dev2. 1F1B, M = 2, no comm time.
  //   dev0, dev1: F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9]
  //   dev2:       F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7]
  // dev2's F0 needs both halves (1); dev0's B0 needs dev2's B0 (4). Then the two
  // replicas all-reduce 1 M params x 4 B = 4 MB: a ring of 2 is 2 steps of 2 MB at
  // 1 TB/s = 2 us each: optimizer at 9 ms + 4 us.
  PipeSpec p;
  p.stages = 2;
  p.micro_batches = 2;
  p.replicas = {2, 1};
  p.tf_ms = {2, 1};
  p.tb_ms = {4, 2};
  p.params = "1M";
  p.strategy_extra = "  allreduce: ring\n";
  const SimRun r = test::run_pipe(p);
  auto times = [&](int d) {
    std::vector<std::pair<Time, Time>> out;
    for (OpId id : r.graph.stream(d)) {
      if (r.graph.op(id).kind != OpKind::kOptimizer)
        out.emplace_back(r.timeline.start[id], r.timeline.end[id]);
    }
    return out;
  };
  using V = std::vector<std::pair<Time, Time>>;
  const V stage0{{ms(0), ms(1)}, {ms(1), ms(2)}, {ms(4), ms(6)}, {ms(7), ms(9)}};
  EXPECT_EQ(times(0), stage0);
  EXPECT_EQ(times(1), stage0);
  EXPECT_EQ(times(2), (V{{ms(1), ms(2)}, {ms(2), ms(4)}, {ms(4), ms(5)}, {ms(5), ms(7)}}));
  EXPECT_EQ(r.timeline.makespan, ms(9) + Time::us(4));
  // Activations are split too: each replica holds half of stage 0's 1 MiB per micro-batch.
  EXPECT_EQ(test::peak_activation_bytes(r, 0), 2 * kMiB / 2);
}

TEST(Replication, DataParallelRingAllReduceCost) {
  // One stage, data: 4: four copies each running M = 2 micro-batches (t_f 1, t_b 2), then
  // a ring all-reduce of 10 M fp32 gradients (S = 40 MB) over links of alpha = 5 us and
  // beta = 10 GB/s: 2(n-1)(alpha + S/(n beta)) = 6 x (5 us + 1 ms) = 6.03 ms.
  PipeSpec p;
  p.stages = 1;
  p.micro_batches = 2;
  p.data = 4;
  p.tb_ms = {2.0};
  p.params = "10M";
  p.latency = "5 us";
  p.bandwidth = "10 GB/s";
  p.strategy_extra = "  allreduce: ring\n";
  const SimRun r = test::run_pipe(p);
  EXPECT_EQ(r.timeline.makespan, Time::ms(6) + Time::us(6030));
  // The optimizer waited the whole all-reduce: 6.03 ms exposed on every copy.
  for (const DeviceReport& d : r.report.devices) EXPECT_EQ(d.exposed_allreduce, Time::us(6030));
  // Bytes sent = bytes received: 4 ranks x 6 steps x 10 MB over single-hop links.
  int64_t sent = 0;
  for (const Op& op : r.graph.ops()) sent += op.comm == CommKind::kAllReduce ? op.bytes : 0;
  EXPECT_EQ(sent, 4 * 6 * 10'000'000);
  int64_t carried = 0;
  for (const LinkStats& l : r.timeline.links) carried += l.bytes;
  EXPECT_EQ(carried, sent);
}

TEST(HandWritten, OrdersRunAsWritten) {
  // GPipe written by hand under another schedule's name gives GPipe's closed form,
  // (M + S - 1)(t_f + t_b) = 3 x 2 ms; with a re-run forward before each backward it gives
  // gpipe-recompute's (M + S - 1)(2 t_f + t_b) = 3 x 3 ms.
  PipeSpec p;
  p.stages = 2;
  p.micro_batches = 2;
  p.schedule = "dapple";
  p.strategy_extra = "  order: ['F0 F1 B0 B1', 'F0 F1 B0 B1']\n";
  EXPECT_EQ(test::run_pipe(p).timeline.makespan, Time::ms(2) * (2 + 2 - 1));
  EXPECT_EQ(order_of(p), "dev0: F0 F1 B0 B1\ndev1: F0 F1 B0 B1\n");
  p.strategy_extra = "  order: ['F0 F1 R0 B0 R1 B1', 'F0 F1 R0 B0 R1 B1']\n";
  EXPECT_EQ(test::run_pipe(p).timeline.makespan, Time::ms(3) * (2 + 2 - 1));
}

// One body of invariants over every schedule (STYLE.md 12).
class EverySchedule : public ::testing::TestWithParam<std::string> {};

TEST_P(EverySchedule, Invariants) {
  const std::string schedule = GetParam();
  for (int S : {1, 2, 4}) {
    for (int M : {4, 8}) {
      PipeSpec p;
      // "dapple/warmup=deep": a schedule with one more strategy key.
      const auto slash = schedule.find('/'), eq = schedule.find('=');
      p.schedule = schedule.substr(0, slash);
      if (slash != std::string::npos) {
        p.strategy_extra = "  " + schedule.substr(slash + 1, eq - slash - 1) + ": " +
                           schedule.substr(eq + 1) + "\n";
      }
      p.stages = S;
      p.micro_batches = M;
      p.tf_ms = {1.0};
      p.tb_ms = {1.5};
      p.output = "2 MB";
      p.latency = "20 us";
      p.bandwidth = "20 GB/s";
      p.params = "2M";
      p.iterations = 2;
      if (p.schedule == "interleaved" || p.schedule == "zb-v") p.virtual_stages = 2;
      if (p.schedule.starts_with("zb")) p.tw_ms = {0.5};
      const SimRun r = test::run_pipe(p);
      const TaskGraph& g = r.graph;
      // Structure and no deadlock (release builds do not check generated graphs).
      ASSERT_FALSE(g.validate().has_value()) << *g.validate();
      // Deps respected and per-stream order preserved.
      for (OpId id = 0; id < g.size(); ++id) {
        for (OpId dep : g.deps(id)) ASSERT_LE(r.timeline.end[dep], r.timeline.start[id]);
      }
      for (int d = 0; d < g.num_devices(); ++d) {
        const auto s = g.stream(d);
        for (size_t i = 1; i < s.size(); ++i)
          ASSERT_LE(r.timeline.end[s[i - 1]], r.timeline.start[s[i]]);
      }
      // Each micro-batch's F before its B before its W, per stage and replica.
      std::map<std::tuple<int, int, int>, std::array<Time, 3>> seen;
      for (OpId id = 0; id < g.size(); ++id) {
        const Op& op = g.op(id);
        const int k = op.kind == OpKind::kForward      ? 0
                      : op.kind == OpKind::kBackward   ? 1
                      : op.kind == OpKind::kWeightGrad ? 2
                                                       : -1;
        if (k >= 0)
          seen[{op.device, op.stage, op.micro_batch}][static_cast<size_t>(k)] = r.timeline.end[id];
      }
      for (const auto& [key, t] : seen) {
        EXPECT_LT(t[0], t[1]);
        if (t[2] != Time::zero()) {
          EXPECT_LT(t[1], t[2]);
        }
      }
      // Memory returns to the static level at the end; activations never negative.
      for (int d = 0; d < g.num_devices(); ++d) {
        int64_t act = 0;
        for (const MemoryChange& c : r.timeline.memory_changes) {
          const Op& op = g.op(c.op);
          if (op.device != d) continue;
          act += c.at_end ? op.mem_at_end : op.mem_at_start;
          ASSERT_GE(act, 0);
        }
        EXPECT_EQ(act, 0);
      }
      // Busy time is the sum of op durations; the bubble is what is left.
      for (int d = 0; d < S; ++d) {
        EXPECT_LE(r.report.devices[static_cast<size_t>(d)].busy, r.timeline.makespan);
      }
      EXPECT_GE(r.report.bubble_fraction, 0.0);
      EXPECT_LT(r.report.bubble_fraction, 1.0);
      // Deterministic.
      EXPECT_EQ(to_json(r.report), to_json(test::run_pipe(p).report));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, EverySchedule,
    ::testing::Values("gpipe", "gpipe-recompute", "dapple", "dapple/warmup=deep",
                      "dapple/warmup=auto", "dapple/recompute=full", "dapple/recompute=selective",
                      "interleaved/recompute=full", "zb-h1/recompute=full", "pipedream",
                      "pipedream-2bw", "interleaved", "zb-h1", "zb-h2", "zb-1p", "zb-2p", "zb-v",
                      "zb-2p/recompute=full", "gpipe/p2p_overlap=false", "dapple/p2p_overlap=false",
                      "pipedream/p2p_overlap=false", "interleaved/p2p_overlap=false",
                      "zb-h2/p2p_overlap=false", "zb-2p/p2p_overlap=false",
                      "zb-v/p2p_overlap=false"),
    [](const auto& info) {
      std::string n = info.param;
      std::replace(n.begin(), n.end(), '-', '_');
      std::replace(n.begin(), n.end(), '/', '_');
      std::replace(n.begin(), n.end(), '=', '_');
      return n;
    });

}  // namespace
}  // namespace pipesim
