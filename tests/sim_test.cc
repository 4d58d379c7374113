// The engine end to end: closed forms, reference tables, memory, and invariants on
// random pipelines. Expected numbers are derived in the comments.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <sstream>

#include "core/units.h"
#include "sim/trace.h"
#include "tests/support.h"

namespace pipesim {
namespace {

using test::PipeSpec;
using test::SimRun;

using test::ms;

TEST(ClosedForm, OneFOneBReferenceS4M8) {
  // shared/reference/schedules.md: 22 with t_f = t_b = 1, 33 with t_b = 2.
  PipeSpec p;
  EXPECT_EQ(test::run_pipe(p).timeline.makespan, Time::ms(22));
  p.tb_ms = {2.0};
  EXPECT_EQ(test::run_pipe(p).timeline.makespan, Time::ms(33));
}

class UniformPipeline : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(UniformPipeline, MakespanBubbleAndActivations) {
  const auto& [schedule, S, M] = GetParam();
  PipeSpec p;
  p.schedule = schedule;
  p.stages = S;
  p.micro_batches = M;
  p.tf_ms = {1.0};
  p.tb_ms = {2.0};
  const SimRun r = test::run_pipe(p);
  // (M + S - 1)(t_f + t_b), bubble (S - 1)/(M + S - 1), for GPipe and 1F1B alike.
  EXPECT_EQ(r.timeline.makespan, Time::ms(3) * (M + S - 1));
  EXPECT_NEAR(r.report.bubble_fraction, static_cast<double>(S - 1) / (M + S - 1), 1e-12);
  // Peak live activations: GPipe M on every stage; 1F1B min(S - s, M) on stage s.
  for (int s = 0; s < S; ++s) {
    const int live = schedule == "gpipe" ? M : std::min(S - s, M);
    EXPECT_EQ(test::peak_activation_bytes(r, s), int64_t{live} * 1024 * 1024) << "stage " << s;
    EXPECT_EQ(r.report.devices[static_cast<size_t>(s)]
                  .at_peak[static_cast<size_t>(MemCategory::kActivations)],
              int64_t{live} * 1024 * 1024);
  }
  // Throughput: M samples (micro_batch 1) per makespan.
  EXPECT_NEAR(r.report.throughput, M / r.timeline.makespan.seconds(), 1e-9 * r.report.throughput);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, UniformPipeline,
    ::testing::Combine(::testing::Values("gpipe", "dapple", "1f1b", "pipedream-flush"),
                       ::testing::Values(1, 2, 4, 8), ::testing::Values(1, 3, 8, 16)));

TEST(ClosedForm, GpipeWithLinkLatencyAndBandwidth) {
  // Each stage boundary costs c = latency + bytes / bandwidth = 100 us + 4 MB / 10 GB/s
  // = 0.5 ms, both ways. Forwards: stage s starts micro-batch 0 at s (t_f + c), so the
  // last forward ends at (S-1)(t_f + c) + M t_f. Backwards mirror it with t_b + c per
  // stage: makespan = (M + S - 1)(t_f + t_b) + 2 (S - 1) c.
  for (int S : {2, 3, 4}) {
    for (int M : {1, 4, 8}) {
      PipeSpec p;
      p.schedule = "gpipe";
      p.stages = S;
      p.micro_batches = M;
      p.tb_ms = {2.0};
      p.output = "4 MB";
      p.bandwidth = "10 GB/s";
      p.latency = "100 us";
      const SimRun r = test::run_pipe(p);
      EXPECT_EQ(r.timeline.makespan, Time::ms(3) * (M + S - 1) + ms(0.5) * (2 * (S - 1)))
          << S << " " << M;
    }
  }
}

// S = 2, M = 3, t_f = t_b = 1 ms, c = 100 us + 4 MB / 10 GB/s = 0.5 ms per transfer.
PipeSpec two_stages_with_transfers() {
  PipeSpec p;
  p.stages = 2;
  p.micro_batches = 3;
  p.output = "4 MB";
  p.bandwidth = "10 GB/s";
  p.latency = "100 us";
  return p;
}

TEST(HandWorked, OneFOneBWithCommunication) {
  // S = 2, M = 3, t_f = t_b = 1 ms, c = 0.5 ms per transfer.
  //   dev0: F0 [0,1] F1 [1,2] B0 [4,5] F2 [5,6] B1 [6,7] B2 [9,10]
  //   dev1: F0 [1.5,2.5] B0 [2.5,3.5] F1 [3.5,4.5] B1 [4.5,5.5] F2 [6.5,7.5] B2 [7.5,8.5]
  // dev0's B0 waits for dev1's B0 (3.5) + c = 4; dev1's F2 for dev0's F2 (6) + c = 6.5.
  const SimRun r = test::run_pipe(two_stages_with_transfers());
  EXPECT_EQ(r.timeline.makespan, Time::ms(10));
  EXPECT_EQ(test::device_finish(r, 1), ms(8.5));
  std::vector<std::pair<double, double>> dev0;
  for (OpId id : r.graph.stream(0)) {
    if (r.graph.op(id).kind == OpKind::kOptimizer) continue;
    dev0.emplace_back(r.timeline.start[id].seconds() * 1e3, r.timeline.end[id].seconds() * 1e3);
  }
  // Exposed communication: the waits that were transfers in flight. dev0's B0 waits from
  // 3.5 (dev1's B0 done, transfer starts) to 4, and B2 from 8.5 to 9 (its stream was free
  // at 7, dev1's B2 ends at 8.5): 1 ms. dev1's F0 waits 1 -> 1.5 and F2 6 -> 6.5: 1 ms;
  // its B0 waits for nothing but its own F0.
  EXPECT_EQ(r.report.devices[0].exposed_pipeline_comm, Time::ms(1));
  EXPECT_EQ(r.report.devices[1].exposed_pipeline_comm, Time::ms(1));
  EXPECT_EQ(r.report.devices[0].exposed_allreduce, Time::zero());
  const std::vector<std::pair<double, double>> want{{0, 1}, {1, 2}, {4, 5},
                                                    {5, 6}, {6, 7}, {9, 10}};
  ASSERT_EQ(dev0.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(dev0[i].first, want[i].first, 1e-9);
    EXPECT_NEAR(dev0[i].second, want[i].second, 1e-9);
  }
}

TEST(HandWorked, CommunicationSlowsTheComputeItOverlaps) {
  // The run above with comm_interference 0.5: a GPU computes at half speed while a
  // transfer it sends is in flight (its 0.5 ms, latency included).
  //   dev0: F0 [0,1]; T(F0) [1,1.5] halves F1's first 0.5 ms (0.25 ms of work), so F1
  //         [1,2.25]; B0 [4,5] (dev1's gradient, sent 3.5, arrives 4); F2 [5,6];
  //         T(F2) [6,6.5] halves B1 [6.25,7.375] for 0.25 ms (0.125 of work); B2 [9,10].
  //   dev1: F0 [1.5,2.5] B0 [2.5,3.5]; T(B0) [3.5,4] halves F1 [3.5,4.75]; B1 [4.75,5.75];
  //         F2 [6.5,7.5] (T(F2) arrives 6.5) B2 [7.5,8.5]; T(B2) [8.5,9].
  // The makespan stays 10 ms; busy time grows by the slowed stretches: dev0 6 + 0.25 +
  // 0.125 = 6.375 ms, dev1 6 + 0.25 = 6.25 ms.
  PipeSpec p = two_stages_with_transfers();
  p.gpu = "{preset: a100-80gb, comm_interference: 0.5}";
  const SimRun r = test::run_pipe(p);
  EXPECT_EQ(r.timeline.makespan, Time::ms(10));
  const auto spans = [&](int d) {
    std::vector<std::pair<Time, Time>> out;
    for (OpId id : r.graph.stream(d)) {
      if (r.graph.op(id).kind != OpKind::kOptimizer)
        out.emplace_back(r.timeline.start[id], r.timeline.end[id]);
    }
    return out;
  };
  const auto us = [](int64_t v) { return Time::us(v); };
  const std::vector<std::pair<Time, Time>> dev0{{us(0), us(1000)},    {us(1000), us(2250)},
                                                {us(4000), us(5000)}, {us(5000), us(6000)},
                                                {us(6250), us(7375)}, {us(9000), us(10000)}};
  const std::vector<std::pair<Time, Time>> dev1{{us(1500), us(2500)}, {us(2500), us(3500)},
                                                {us(3500), us(4750)}, {us(4750), us(5750)},
                                                {us(6500), us(7500)}, {us(7500), us(8500)}};
  EXPECT_EQ(spans(0), dev0);
  EXPECT_EQ(spans(1), dev1);
  EXPECT_EQ(r.timeline.devices[0].busy, us(6375));
  EXPECT_EQ(r.timeline.devices[1].busy, us(6250));
}

// The same two stages on two servers, the transfers through their network ports: a
// transfer leaving its server goes through the NIC and slows nothing, so the run is the
// one without interference (OneFOneBWithCommunication: busy 6 ms on each GPU).
TEST(HandWorked, TransfersLeavingTheServerDoNotSlowCompute) {
  PipeSpec p = two_stages_with_transfers();
  p.gpu = "{preset: a100-80gb, comm_interference: 0.5}";
  std::string yaml = test::to_yaml(p);
  const std::string one = "nodes: 1\n  gpus_per_node: 2\n";
  ASSERT_NE(yaml.find(one), std::string::npos);
  yaml.replace(yaml.find(one), one.size(),
               "nodes: 2\n  gpus_per_node: 1\n"
               "  inter_node: {kind: infiniband, bandwidth: 10 GB/s, latency: 100 us}\n");
  const SimRun r = test::run_yaml(yaml);
  EXPECT_EQ(r.timeline.makespan, Time::ms(10));
  EXPECT_EQ(r.timeline.devices[0].busy, Time::ms(6));
  EXPECT_EQ(r.timeline.devices[1].busy, Time::ms(6));
}

TEST(HandWorked, CommunicationInterferenceIsAShareOfTheSpeed) {
  PipeSpec p;
  p.gpu = "{preset: a100-80gb, comm_interference: 0.95}";
  const test::CliResult r =
      test::cli({"run", test::write_temp("interference.yaml", test::to_yaml(p))});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cluster.gpu.comm_interference"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[0, 0.9]"), std::string::npos) << r.err;
}

TEST(Reference, HeterogeneousStagesOneFOneB) {
  // shared/reference/schedules.md, "why DAPPLE needs a pivot stage".
  struct Row {
    std::vector<double> tf, tb;
    int makespan;
    std::vector<int> finish;
  };
  for (const Row& row : {Row{{2, 1, 1, 1}, {4, 2, 2, 2}, 51, {51, 44, 42, 40}},
                         Row{{1, 1, 1, 3}, {2, 2, 2, 6}, 81, {81, 79, 77, 75}}}) {
    PipeSpec p;
    p.tf_ms = row.tf;
    p.tb_ms = row.tb;
    const SimRun r = test::run_pipe(p);
    EXPECT_EQ(r.timeline.makespan, Time::ms(row.makespan));
    for (int s = 0; s < 4; ++s)
      EXPECT_EQ(test::device_finish(r, s), Time::ms(row.finish[static_cast<size_t>(s)]));
  }
}

TEST(Memory, StaticMemoryFollowsBytesPerParameter) {
  // 10 M parameters per stage. fp32 SGD: 4 + 4 = 8 bytes each; mixed Adam:
  // 2 + 2 + (4 master + 8 moments) = 16; fp32 momentum: 4 + 4 + 4 = 12.
  struct Case {
    const char* precision;
    const char* optimizer;
    int64_t w, g, o;
  };
  for (const Case& c : {Case{"fp32", "sgd", 4, 4, 0}, Case{"mixed", "adam", 2, 2, 12},
                        Case{"fp32", "momentum", 4, 4, 4}, Case{"mixed", "sgd", 2, 2, 4},
                        Case{"fp32", "adam", 4, 4, 8}}) {
    PipeSpec p;
    p.params = "10M";
    p.precision = c.precision;
    p.optimizer = c.optimizer;
    p.activation = "0 B";
    const SimRun r = test::run_pipe(p);
    for (const DeviceReport& d : r.report.devices) {
      EXPECT_EQ(d.at_peak[0], 10'000'000 * c.w) << c.precision << " " << c.optimizer;
      EXPECT_EQ(d.at_peak[1], 10'000'000 * c.g);
      EXPECT_EQ(d.at_peak[2], 10'000'000 * c.o);
      EXPECT_EQ(d.peak_memory, 10'000'000 * (c.w + c.g + c.o));
    }
  }
}

TEST(Memory, PeakIsStaticPlusLiveActivations) {
  // Mixed Adam, 1M params (16 MB static) and 100 MiB of activations per micro-batch,
  // S = 4, M = 8: 1F1B stage s peaks at 16 MB + min(4 - s, 8) x 100 MiB; GPipe at
  // 16 MB + 8 x 100 MiB on every stage.
  for (const char* schedule : {"dapple", "gpipe"}) {
    PipeSpec p;
    p.schedule = schedule;
    p.params = "1M";
    p.precision = "mixed";
    p.optimizer = "adam";
    p.activation = "100 MiB";
    const SimRun r = test::run_pipe(p);
    for (int s = 0; s < 4; ++s) {
      const int live = std::string(schedule) == "gpipe" ? 8 : 4 - s;
      // The peak is reached when the last live forward starts: F(live - 1) at (live - 1) t_f
      // on stage 0 (t_f = 1 ms) for both schedules.
      if (s == 0) {
        EXPECT_EQ(r.report.devices[0].peak_time, Time::ms(live - 1));
      }
      EXPECT_EQ(r.report.devices[static_cast<size_t>(s)].peak_memory,
                16'000'000 + live * 100LL * 1024 * 1024);
    }
    EXPECT_FALSE(r.report.oom.oom);
  }
}

TEST(Memory, BreakdownAtThePeakPerSchedule) {
  // S = 4, M = 8, one layer per stage (per chunk) of 1 M parameters, 100 MiB of
  // activations, 10 MiB of output. Bytes per parameter: mixed Adam 2 + 2 + 12 (fp32
  // master copy and two moments), fp32 SGD 4 + 4 + 0. At the peak of stage s:
  //   gpipe             8 live activations (all micro-batches before the first backward)
  //   dapple, pipedream, pipedream-2bw   4 - s live (1F1B's warm-up depth)
  //   gpipe-recompute   stage 0 keeps no input (no model.input): one full 100 MiB while it
  //                     recomputes; stage s > 0: 8 x 10 MiB inputs + the other 90 MiB
  //   interleaved v = 2 11, 9, 7, 5 live chunk activations, 2 M parameters per device
  //   zb-h1             4 on stage 0 (as 1F1B); zb-h2: 2S - 1 = 7 on stage 0
  // Stashed weight versions (of the weight bytes): pipedream S - s - 1, 2bw 1.
  constexpr int64_t MiB = 1024 * 1024, A = 100 * MiB, P = 1'000'000;
  struct Bytes {
    const char* precision;
    const char* optimizer;
    int64_t w, g, o;
  };
  struct Schedule {
    const char* name;
    std::vector<int64_t> activations;  // per stage; -1: not derived here
    std::vector<int> stashed;
    int chunks = 1;
    bool split = false;
  };
  const std::vector<Schedule> schedules{
      {"gpipe", {8 * A, 8 * A, 8 * A, 8 * A}, {0, 0, 0, 0}},
      {"dapple", {4 * A, 3 * A, 2 * A, 1 * A}, {0, 0, 0, 0}},
      {"pipedream", {4 * A, 3 * A, 2 * A, 1 * A}, {3, 2, 1, 0}},
      {"pipedream-2bw", {4 * A, 3 * A, 2 * A, 1 * A}, {1, 1, 1, 1}},
      {"gpipe-recompute",
       {A, 80 * MiB + 90 * MiB, 80 * MiB + 90 * MiB, 80 * MiB + 90 * MiB},
       {0, 0, 0, 0}},
      {"interleaved", {11 * A, 9 * A, 7 * A, 5 * A}, {0, 0, 0, 0}, 2},
      {"zb-h1", {4 * A, -1, -1, -1}, {0, 0, 0, 0}, 1, true},
      {"zb-h2", {7 * A, -1, -1, -1}, {0, 0, 0, 0}, 1, true}};
  for (const Bytes& c : {Bytes{"mixed", "adam", 2, 2, 12}, Bytes{"fp32", "sgd", 4, 4, 0}}) {
    for (const Schedule& sc : schedules) {
      PipeSpec p;
      p.schedule = sc.name;
      p.virtual_stages = sc.chunks;
      if (sc.chunks > 1) {
        p.tf_ms = {0.5};
        p.tb_ms = {0.5};
      }
      if (sc.split) p.tw_ms = {1.0};
      p.params = "1M";
      p.precision = c.precision;
      p.optimizer = c.optimizer;
      p.activation = "100 MiB";
      p.output = "10 MiB";
      const SimRun r = test::run_pipe(p);
      const int64_t params = sc.chunks * P;
      for (size_t s = 0; s < 4; ++s) {
        const DeviceReport& d = r.report.devices[s];
        const std::string what = fmt::format("{} {} stage {}", sc.name, c.precision, s);
        EXPECT_EQ(d.at_peak[0], params * c.w) << what;
        EXPECT_EQ(d.at_peak[1], params * c.g) << what;
        EXPECT_EQ(d.at_peak[2], params * c.o) << what;
        EXPECT_EQ(d.at_peak[4], sc.stashed[s] * params * c.w) << what;
        EXPECT_EQ(d.at_peak[5], 0) << what;
        if (sc.activations[s] < 0) continue;
        EXPECT_EQ(d.at_peak[3], sc.activations[s]) << what;
        EXPECT_EQ(d.peak_memory,
                  params * (c.w + c.g + c.o) + sc.stashed[s] * params * c.w + sc.activations[s])
            << what;
      }
    }
  }
}

TEST(Replicas, SplitAMicroBatchIntoWholeSamples) {
  // A micro-batch of 3 samples on 2 replicas: replica 0 takes 2 samples, replica 1 takes 1
  // (SPEC: floor(b / r) or ceil(b / r) whole samples each). Stage 0's F of 3 ms and its
  // 3 MiB of activations scale by 2/3 and 1/3: F 2 ms and 1 ms, 2 MiB and 1 MiB. The
  // 3 MB output goes to stage 1 (one GPU) as 2 MB from replica 0 and 1 MB from replica 1.
  const std::string yaml = R"(
cluster:
  gpu: {name: g, memory: 16 GiB, peak: 100 TFLOPS, hbm_bandwidth: 900 GB/s}
  nodes: 1
  gpus_per_node: 4
  intra_node: {kind: pcie, bandwidth: 1 GB/s, latency: 1 ms}
model:
  layers:
    - {name: a, forward: 3 ms, backward: 6 ms, activation: 3 MiB, output: 3 MB, params: 1M}
    - {name: b, forward: 3 ms, backward: 6 ms, activation: 3 MiB, output: 3 MB, params: 1M}
training: {global_batch: 3, micro_batch: 3}
strategy:
  schedule: gpipe
  stages: [{layers: 0, replicas: 2}, {layers: 1}]
)";
  const SimRun r = test::run_yaml(yaml, true);
  std::map<int, Time> forward;
  std::map<int, int64_t> activation;
  std::map<int, int64_t> sent;
  for (OpId id = 0; id < r.graph.size(); ++id) {
    const Op& op = r.graph.op(id);
    if (op.kind == OpKind::kForward && op.stage == 0) {
      forward[op.device] = op.duration;
      activation[op.device] = op.mem_at_start;
    }
    if (op.kind == OpKind::kTransfer && op.comm == CommKind::kActivation)
      sent[op.device] += op.bytes;
  }
  const int a = r.scenario.placement[0][0][0], b = r.scenario.placement[0][0][1];
  EXPECT_EQ(forward[a], Time::ms(2));
  EXPECT_EQ(forward[b], Time::ms(1));
  EXPECT_EQ(activation[a], 2 * (int64_t{1} << 20));
  EXPECT_EQ(activation[b], int64_t{1} << 20);
  EXPECT_EQ(sent[a], 2'000'000);
  EXPECT_EQ(sent[b], 1'000'000);
  // Stage 1 starts when replica 0's 2 MB arrive: 2 ms + 1 ms + 2 MB / (1 GB/s) = 5 ms.
  for (OpId id = 0; id < r.graph.size(); ++id) {
    const Op& op = r.graph.op(id);
    if (op.kind == OpKind::kForward && op.stage == 1) {
      EXPECT_EQ(r.timeline.start[id], Time::ms(5));
    }
  }
}

TEST(Memory, SeparateBucketBuffersOnAllReducedDevices) {
  // Stage 0 on two replicas, stage 1 alone, 1 M parameters each, fp32: with
  // bucket_buffers, the replicas keep another 4 MB gradient copy as "other"; stage 1,
  // whose gradients are not all-reduced, does not.
  PipeSpec p;
  p.stages = 2;
  p.replicas = {2, 1};
  p.params = "1M";
  p.strategy_extra = "  bucket_buffers: true\n";
  const SimRun r = test::run_pipe(p);
  ASSERT_EQ(r.report.devices.size(), 3u);
  EXPECT_EQ(r.report.devices[0].at_peak[5], 4'000'000);
  EXPECT_EQ(r.report.devices[1].at_peak[5], 4'000'000);
  EXPECT_EQ(r.report.devices[2].at_peak[5], 0);
  p.strategy_extra.clear();
  EXPECT_EQ(test::run_pipe(p).report.devices[0].at_peak[5], 0);
}

TEST(Memory, OutOfMemoryJustOverAndJustUnder) {
  // A custom GPU of 1000 MiB; 1F1B stage 0 of S = 4 peaks at 4 activations. With 250 MiB
  // each it peaks at exactly 1000 MiB (fits: the peak may equal the capacity); with
  // 250 MiB + 1 byte it crosses on the fourth forward, F3.
  std::string yaml = test::to_yaml(PipeSpec{});
  yaml.replace(yaml.find("gpu: a100-80gb"), 14, "gpu: {memory: 1000 MiB}");
  auto with_activation = [&](const std::string& act) {
    std::string y = yaml;
    for (size_t pos; (pos = y.find("activation: 1 MiB")) != std::string::npos;)
      y.replace(pos, 17, "activation: " + act);
    return test::run_yaml(y);
  };
  const SimRun under = with_activation("250 MiB");
  EXPECT_FALSE(under.report.oom.oom);
  EXPECT_EQ(under.report.devices[0].peak_memory, 1000LL * 1024 * 1024);
  const SimRun over = with_activation("262144001 B");
  ASSERT_TRUE(over.report.oom.oom);
  EXPECT_EQ(over.report.oom.device, 0);
  EXPECT_EQ(over.report.oom_op, "F3");
  EXPECT_EQ(over.report.oom.bytes - over.report.oom.capacity, 4);
  EXPECT_NE(over.report.oom_message.find("node0/gpu0"), std::string::npos);
}

TEST(Iterations, SynchronousIterationsRepeatTheFlush) {
  // With a flush, iterations do not overlap: k iterations take k times one. Each
  // layer's optimizer step of 0.5 ms runs after the device's last backward; the next
  // iteration's F0 on device 0 waits for it, so one iteration of S = 4, M = 8 is
  // 22 ms of pipeline + 0.5 ms on the critical path (stage 0 ends last).
  std::string yaml = test::to_yaml(PipeSpec{});
  for (size_t pos = 0; (pos = yaml.find("params: 0}", pos)) != std::string::npos;) {
    yaml.replace(pos, 10, "params: 0, optimizer: 0.5 ms}");
  }
  const SimRun one = test::run_yaml(yaml);
  EXPECT_EQ(one.timeline.makespan, ms(22.5));
  yaml.replace(yaml.find("iterations: 1"), 13, "iterations: 3");
  const SimRun three = test::run_yaml(yaml);
  EXPECT_EQ(three.timeline.makespan, ms(22.5) * 3);
  EXPECT_EQ(three.report.iteration_time, ms(22.5));
  EXPECT_EQ(three.graph.op(three.graph.stream(0)[17]).micro_batch,
            8);  // second iteration's F0 is global 8
}

// Longest path through deps and stream order with every op's own duration (transfers:
// their idle-path link time). Without contention the engine is an as-soon-as-possible
// scheduler of exactly this graph, so the makespan must equal it.
Time critical_path(const SimRun& r, bool include_stream_order) {
  const TaskGraph& g = r.graph;
  std::vector<Time> finish(g.size());
  std::vector<uint32_t> indeg(g.size());
  std::vector<std::vector<OpId>> extra(g.size());
  for (OpId id = 0; id < g.size(); ++id) indeg[id] = static_cast<uint32_t>(g.deps(id).size());
  if (include_stream_order) {
    for (int d = 0; d < g.num_devices(); ++d) {
      const auto s = g.stream(d);
      for (size_t i = 1; i < s.size(); ++i) {
        extra[s[i - 1]].push_back(s[i]);
        ++indeg[s[i]];
      }
    }
  }
  std::vector<Time> ready(g.size());
  std::vector<OpId> stack;
  for (OpId id = 0; id < g.size(); ++id)
    if (indeg[id] == 0) stack.push_back(id);
  Time best;
  while (!stack.empty()) {
    const OpId id = stack.back();
    stack.pop_back();
    const Op& op = g.op(id);
    const Time dur = op.kind == OpKind::kTransfer
                         ? r.scenario.cluster.transfer_time(op.device, op.peer, op.bytes)
                         : op.duration;
    finish[id] = ready[id] + dur;
    best = max(best, finish[id]);
    auto relax = [&](OpId s) {
      ready[s] = max(ready[s], finish[id]);
      if (--indeg[s] == 0) stack.push_back(s);
    };
    for (OpId s : g.successors(id)) relax(s);
    for (OpId s : extra[id]) relax(s);
  }
  return best;
}

TEST(Properties, RandomPipelines) {
  std::mt19937 rng(2024);
  auto pick = [&](int lo, int hi) {
    return lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo + 1));
  };
  for (int trial = 0; trial < 60; ++trial) {
    PipeSpec p;
    p.schedule = trial % 2 == 0 ? "dapple" : "gpipe";
    p.stages = pick(1, 6);
    p.micro_batches = pick(1, 12);
    p.tf_ms.clear();
    p.tb_ms.clear();
    for (int s = 0; s < p.stages; ++s) {
      p.tf_ms.push_back(pick(1, 40) / 8.0);
      p.tb_ms.push_back(pick(1, 80) / 8.0);
    }
    p.output = fmt::format("{} KB", pick(0, 5000));
    p.activation = fmt::format("{} MiB", pick(0, 300));
    p.latency = fmt::format("{} us", pick(0, 50));
    p.bandwidth = fmt::format("{} GB/s", pick(1, 100));
    p.iterations = pick(1, 2);
    const SimRun r = test::run_pipe(p);
    const Time makespan = r.timeline.makespan;
    // makespan >= every device's busy time, and >= the critical path of deps alone;
    // == the longest path once stream order is included.
    for (const DeviceReport& d : r.report.devices) EXPECT_LE(d.busy, makespan);
    EXPECT_LE(critical_path(r, false), makespan);
    // Contention only slows transfers down: the makespan is at least the longest path
    // with idle-path transfer costs, and equal to it when no link ever carried two flows.
    bool contended = false;
    for (const LinkStats& l : r.timeline.links) contended = contended || l.peak_flows > 1;
    if (contended) {
      EXPECT_LE(critical_path(r, true), makespan);
    } else {
      EXPECT_EQ(critical_path(r, true), makespan);
    }
    // Memory returns to the static level after a synchronous run and never goes
    // negative on the way (the engine asserts the latter).
    for (int d = 0; d < p.stages; ++d) {
      int64_t act = 0;
      for (const MemoryChange& c : r.timeline.memory_changes) {
        const Op& op = r.graph.op(c.op);
        if (op.device != d) continue;
        act += c.at_end ? op.mem_at_end : op.mem_at_start;
        ASSERT_GE(act, 0);
      }
      EXPECT_EQ(act, 0);
    }
    // Bytes sent = bytes received: each link direction carried what crossed it, and
    // every transfer crossed every hop of its route.
    int64_t expected_link_bytes = 0;
    for (const Op& op : r.graph.ops()) {
      if (op.kind == OpKind::kTransfer) {
        expected_link_bytes +=
            op.bytes *
            static_cast<int64_t>(r.scenario.cluster.route(op.device, op.peer).hops.size());
      }
    }
    int64_t link_bytes = 0;
    for (const LinkStats& l : r.timeline.links) link_bytes += l.bytes;
    EXPECT_EQ(link_bytes, expected_link_bytes);
    // The same input gives byte-identical JSON.
    EXPECT_EQ(to_json(r.report), to_json(test::run_pipe(p).report));
  }
}

TEST(Trace, NumbersReadAsFmtWritesThem) {
  // The writer puts its events together by hand (sim/trace.cc); each link sample must read
  // as fmt's "{}.{:06}" of the picoseconds in microseconds and "{:.4f}" of the utilisation,
  // ties to even included (0.03125 is 0.0312, 0.09375 is 0.0938), at 1 to 19 digits.
  const Cluster c = ClusterBuilder::shorthand(1, 2, *find_gpu_preset("h100-80gb"),
                                              *find_link_preset("nvswitch"),
                                              *find_link_preset("ib-ndr"));
  const TaskGraph g = TaskGraphBuilder(2).build();
  Timeline tl;
  std::vector<float> u{0.03125f, 0.09375f, 0.15625f, 0.21875f, 0.0f, 1.0f, 0.99995f, 2.0f / 3};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> share(0, 1);
  while (u.size() < 4000) u.push_back(share(rng));
  const std::vector<int64_t> ps{0, 1, 999'999, 1'000'000, 123'456'789'012, 4'500'000'000'000'000};
  std::string expected;
  for (size_t i = 0; i < u.size(); ++i) {
    const int64_t t = ps[i % ps.size()] + static_cast<int64_t>(i) * 7'777;
    tl.link_samples.push_back({Time::ps(t), 0, u[i]});
    expected += fmt::format(R"("ts":{}.{:06},"args":{{"utilisation":{:.4f}}}}})", t / 1'000'000,
                            t % 1'000'000, u[i]);
  }
  std::ostringstream out;
  write_trace(out, g, c, tl);
  std::string got;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    if (line.find("utilisation") == std::string::npos) continue;
    if (line.back() == ',') line.pop_back();
    got += line.substr(line.find("\"ts\":"));
  }
  EXPECT_EQ(got, expected);
}

}  // namespace
}  // namespace pipesim
