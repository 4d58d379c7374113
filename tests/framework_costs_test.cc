// What the frameworks pay beyond the ops (SPEC section 9): pipeline transfers that block
// the compute stream (strategy.p2p_overlap: false) and a fixed time per compute step
// (cluster.gpu.launch_overhead).
#include <gtest/gtest.h>

#include "tests/support.h"

namespace pipesim {
namespace {

// Two GPUs, four one-layer chunks (interleaved, v = 2, two micro-batches): F 1 ms, B 2 ms,
// each transfer 1 ms (latency only, nothing sent).
std::string two_stage_interleaved(bool p2p_overlap) {
  return fmt::format(R"(
cluster: {{gpu: a100-80gb, nodes: 1, gpus_per_node: 2,
          intra_node: {{kind: nvswitch, bandwidth: 1 TB/s, latency: 1 ms}}}}
model:
  layers:
    - {{name: l, repeat: 4, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 0 B}}
training: {{global_batch: 2, micro_batch: 1}}
strategy: {{schedule: interleaved, virtual_stages: 2, pipeline: 2, p2p_overlap: {}}}
)",
                     p2p_overlap);
}

Time end_of(const test::SimRun& r, int device, OpKind kind, int stage, int micro_batch) {
  for (OpId id = 0; id < r.graph.size(); ++id) {
    const Op& op = r.graph.op(id);
    if (op.device == device && op.kind == kind && op.stage == stage &&
        op.micro_batch == micro_batch)
      return r.timeline.end[id];
  }
  ADD_FAILURE() << "no such op";
  return Time::zero();
}

TEST(P2pOverlap, TwoStageInterleavedByHand) {
  // Orders (pipesim order): dev0 F0.c0 F1.c0 F0.c1 F1.c1 B0.c1 B1.c1 B0.c0 B1.c0,
  //                         dev1 F0.c0 F1.c0 F0.c1 B0.c1 F1.c1 B1.c1 B0.c0 B1.c0.
  // Stages 0 and 2 run on dev0, 1 and 3 on dev1 (ms):
  // - Overlapped (the default): the transfers run beside the compute; the critical path
  //   is F0.c0 [0,1] hop F0.c0' [2,3] hop F0.c1 [4,5] hop F0.c1' [6,7] B0.c1' [7,9] hop
  //   B0.c1 [10,12], then dev0 B1.c1 [13,15] (its gradient from dev1 at 13), B0.c0 [16,18]
  //   (dev1's B0.c0 [13,15] + hop), B1.c0 [19,21]: 21.
  // - Blocking: every send holds its device until it has arrived:
  //   dev0 F0.c0 [0,1] send to 2, F1.c0 [2,3] send to 4, F0.c1 [4,5] send to 6,
  //        F1.c1 [6,7] send to 8, B0.c1 waits for dev1's gradient (10): [10,12] send to
  //        13, B1.c1 waits for dev1's gradient (14): [14,16] send to 17, B0.c0 [17,19],
  //        B1.c0 waits for dev1's gradient (20): [20,22].
  //   dev1 F0.c0 [2,3] send to 4, F1.c0 [4,5] send to 6, F0.c1 [6,7], B0.c1 [7,9] send to
  //        10, F1.c1 [10,11], B1.c1 [11,13] send to 14, B0.c0 [14,16] send to 17, B1.c0
  //        waits for dev0's gradient (17): [17,19] send to 20.
  //   Makespan 22: 1 ms more. (dev1's F0.c1 B0.c1 is a steady-state pair, but the last
  //   stage sends no output; dev0 runs every forward in its warm-up and pairs none.)
  const test::SimRun overlapped = test::run_yaml(two_stage_interleaved(true));
  EXPECT_EQ(overlapped.timeline.makespan, Time::ms(21));
  const test::SimRun blocking = test::run_yaml(two_stage_interleaved(false));
  EXPECT_EQ(blocking.timeline.makespan, Time::ms(22));
  EXPECT_EQ(end_of(blocking, 0, OpKind::kBackward, 2, 0), Time::ms(12));
  EXPECT_EQ(end_of(blocking, 1, OpKind::kForward, 3, 1), Time::ms(11));
  EXPECT_EQ(end_of(blocking, 0, OpKind::kBackward, 2, 1), Time::ms(16));
  EXPECT_EQ(end_of(blocking, 1, OpKind::kBackward, 1, 1), Time::ms(19));
  // Blocking only adds waiting: the busy time is the same.
  for (size_t d = 0; d < 2; ++d)
    EXPECT_EQ(blocking.report.devices[d].busy, overlapped.report.devices[d].busy);
}

TEST(P2pOverlap, SteadyStatePairsSendAfterTheirBackward) {
  // Four micro-batches: dev0 runs F0.c0 F1.c0 F0.c1 F1.c1 (warm-up), then pairs
  // F2.c0 B0.c1, F3.c0 B1.c1, F2.c1 B0.c0, F3.c1 B1.c0. Each paired forward's output
  // leaves when the pair's backward ends (Megatron-LM's one transfer call per step);
  // the warm-up forwards' outputs leave at once.
  std::string yaml = two_stage_interleaved(false);
  yaml.replace(yaml.find("global_batch: 2"), 15, "global_batch: 4");
  const test::SimRun r = test::run_yaml(yaml);
  int paired = 0, warmup = 0;
  for (OpId id = 0; id < r.graph.size(); ++id) {
    const Op& t = r.graph.op(id);
    if (t.kind != OpKind::kTransfer || t.comm != CommKind::kActivation || t.device != 0) continue;
    // The forward that produced it: stage t.stage on dev0, micro-batch t.micro_batch.
    const Time produced = end_of(r, 0, OpKind::kForward, t.stage, t.micro_batch);
    const bool pair = t.micro_batch >= 2;
    if (pair) {
      // Its pair's backward: B(m - 2) of the other chunk.
      const int b_stage = t.stage == 0 ? 2 : 0;
      EXPECT_EQ(r.timeline.start[id], end_of(r, 0, OpKind::kBackward, b_stage, t.micro_batch - 2))
          << "stage " << t.stage << " micro-batch " << t.micro_batch;
      EXPECT_GT(r.timeline.start[id], produced);
      ++paired;
    } else {
      EXPECT_EQ(r.timeline.start[id], produced);
      ++warmup;
    }
  }
  EXPECT_EQ(paired, 4);
  EXPECT_EQ(warmup, 4);
}

TEST(P2pOverlap, OneSteadyStepIsPaired) {
  // S = 3, v = 2, M = 3: stage 1 warms up with min((3 - 1 - 1) 2 + 3, 6) = 5 forwards, so
  // its order is all forwards then all backwards, yet its sixth forward (F2.c1) is the one
  // steady-state step: it sends after B0.c1, the backward it is paired with.
  const std::string yaml = R"(
cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 3,
          intra_node: {kind: nvswitch, bandwidth: 1 TB/s, latency: 1 ms}}
model:
  layers:
    - {name: l, repeat: 6, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 0 B}
training: {global_batch: 3, micro_batch: 1}
strategy: {schedule: interleaved, virtual_stages: 2, pipeline: 3, p2p_overlap: false}
)";
  const test::SimRun r = test::run_yaml(yaml);
  int checked = 0;
  for (OpId id = 0; id < r.graph.size(); ++id) {
    const Op& t = r.graph.op(id);
    if (t.kind != OpKind::kTransfer || t.comm != CommKind::kActivation || t.device != 1) continue;
    const Time produced = end_of(r, 1, OpKind::kForward, t.stage, t.micro_batch);
    if (t.stage == 4 && t.micro_batch == 2) {  // F2.c1 on device 1 is global stage 3 + 1
      EXPECT_EQ(r.timeline.start[id], end_of(r, 1, OpKind::kBackward, 4, 0));
      EXPECT_GT(r.timeline.start[id], produced);
    } else {
      EXPECT_EQ(r.timeline.start[id], produced);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 6);  // stages 1 and 4 send three micro-batches each
}

TEST(P2pOverlap, TheOpAfterASendWaitsForIt) {
  // Any schedule: with p2p_overlap false, the compute op after one that sends starts only
  // once its transfers have arrived.
  for (const char* schedule : {"gpipe", "dapple", "zb-h1", "zb-2p"}) {
    test::PipeSpec p;
    p.schedule = schedule;
    p.stages = 3;
    p.micro_batches = 6;
    p.tw_ms = {0.5};
    p.output = "4 MB";
    p.bandwidth = "2 GB/s";
    p.strategy_extra = "  p2p_overlap: false\n";
    const test::SimRun r = test::run_pipe(p);
    int checked = 0;
    for (int d = 0; d < 3; ++d) {
      const auto s = r.graph.stream(d);
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        for (OpId next : r.graph.successors(s[i])) {
          const Op& t = r.graph.op(next);
          if (t.kind != OpKind::kTransfer || is_collective(t.comm)) continue;
          EXPECT_GE(r.timeline.start[s[i + 1]], r.timeline.end[next]) << schedule;
          ++checked;
        }
      }
    }
    EXPECT_GT(checked, 0) << schedule;
    // And never faster than with the transfers overlapped.
    p.strategy_extra.clear();
    EXPECT_GE(r.timeline.makespan, test::run_pipe(p).timeline.makespan) << schedule;
  }
}

TEST(LaunchOverhead, AddedToEveryStepByHand) {
  // dapple, 2 stages, M = 4, F 1 ms, B 2 ms, free transfers: (M + S - 1)(F + B) = 15 ms.
  // With 0.5 ms per step, F 1.5 and B 2.5: 5 x 4 = 20 ms, plus the optimizer step's
  // 0.5 ms on the first stage, which finishes last: 20.5 ms.
  test::PipeSpec p;
  p.stages = 2;
  p.micro_batches = 4;
  p.tf_ms = {1.0};
  p.tb_ms = {2.0};
  EXPECT_EQ(test::run_pipe(p).timeline.makespan, Time::ms(15));
  p.gpu = "{preset: a100-80gb, launch_overhead: 0.5 ms}";
  EXPECT_EQ(test::run_pipe(p).timeline.makespan, Time::us(20500));
  // A split backward under 1F1B is one autograd call: its W pays nothing more. Under
  // zb-h1 W is a step of its own and pays: 4 micro-batches x 0.5 ms on each stage.
  p.tb_ms = {1.5};
  p.tw_ms = {0.5};
  EXPECT_EQ(test::run_pipe(p).timeline.makespan, Time::us(20500));
  const auto busy = [&](const std::string& gpu) {
    test::PipeSpec z = p;
    z.schedule = "zb-h1";
    z.gpu = gpu;
    return test::run_pipe(z).report.devices[0].busy;
  };
  // F, B, W per micro-batch and the optimizer step: 3 x 4 + 1 steps on stage 0.
  EXPECT_EQ(busy("{preset: a100-80gb, launch_overhead: 0.5 ms}") - busy("a100-80gb"),
            Time::us(13 * 500));
}

TEST(LaunchOverhead, BadInputNamesTheKey) {
  test::PipeSpec p;
  p.gpu = "{preset: a100-80gb, launch_overhead: 5}";
  const auto r = test::cli({"run", test::write_temp("lo.yaml", test::to_yaml(p))});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cluster.gpu.launch_overhead"), std::string::npos) << r.err;
  p.gpu = "a100-80gb";
  p.strategy_extra = "  p2p_overlap: sometimes\n";
  const auto q = test::cli({"run", test::write_temp("p2p.yaml", test::to_yaml(p))});
  EXPECT_EQ(q.code, 2);
  EXPECT_NE(q.err.find("strategy.p2p_overlap"), std::string::npos) << q.err;
}

}  // namespace
}  // namespace pipesim
