// strategy.warmup (SPEC section 3.1): how many micro-batches each 1F1B stage has in flight
// before its first backward, and the `auto` rule that hides cross-stage transfers.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "tests/support.h"

namespace pipesim {
namespace {

// 4 single-GPU nodes on 1 GB/s links with 10 us latency; 4 layers of F = 1 ms, B = 2 ms,
// 1 MiB of activations, 1 MB outputs (c = 1 MB / 1 GB/s + 10 us = 1.01 ms a hop); M = 16.
std::string scenario(const std::string& strategy_extra, const std::string& output = "1 MB") {
  return fmt::format(R"(name: warmup
cluster:
  gpu: v100-16gb
  nodes: 4
  gpus_per_node: 1
  inter_node: {{kind: ethernet, bandwidth: 1 GB/s, latency: 10 us}}
model:
  layers:
    - {{name: l, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: {}, repeat: 4}}
training:
  global_batch: 16
  micro_batch: 1
strategy:
  schedule: dapple
  pipeline: 4
{})",
                     output, strategy_extra);
}

test::SimRun run(const std::string& yaml) {
  return test::run_yaml(yaml, /*record_memory=*/true);
}

std::string order(const std::string& yaml) {
  const auto r = test::cli({"order", test::write_temp("warmup-order.yaml", yaml)});
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

constexpr int64_t kMiB = 1024 * 1024;

TEST(Warmup, DeepMatchesGpipeWithLessMemory) {
  // GPipe: stage 0 emits a forward every 1 ms; F(m) reaches stage 3 after 3 (F + c), so
  // stage 3's forwards end at 3 (1 + 1.01) + 16 = 22.03 ms, its 16 backwards at 54.03 ms;
  // the last gradient then crosses 3 hops and 3 backwards: 54.03 + 3 (1.01 + 2) = 63.06 ms.
  std::string gpipe_yaml = scenario("");
  gpipe_yaml.replace(gpipe_yaml.find("schedule: dapple"), 16, "schedule: gpipe");
  const test::SimRun gp = run(gpipe_yaml);
  EXPECT_EQ(gp.timeline.makespan, test::ms(63.06));
  const test::SimRun deep = run(scenario("  warmup: deep\n"));
  const test::SimRun shallow = run(scenario("  warmup: schedule\n"));
  EXPECT_EQ(deep.timeline.makespan, gp.timeline.makespan);
  // 1F1B's min(S - s, M) round trips are exposed (85.28 ms in this simulator).
  EXPECT_GT(shallow.timeline.makespan, deep.timeline.makespan + Time::ms(20));
  // In flight: deep min(2(S - s) - 1, M) = 7, 5, 3, 1; schedule 4, 3, 2, 1; GPipe 16.
  const int64_t deep_peaks[] = {7, 5, 3, 1}, shallow_peaks[] = {4, 3, 2, 1};
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(test::peak_activation_bytes(deep, d), deep_peaks[d] * kMiB) << d;
    EXPECT_EQ(test::peak_activation_bytes(shallow, d), shallow_peaks[d] * kMiB) << d;
    EXPECT_EQ(test::peak_activation_bytes(gp, d), 16 * kMiB) << d;
  }
}

TEST(Warmup, AutoFollowsTheTransferToComputeRatio) {
  // No bytes between stages (a hop is the 10 us latency twice, under 2 % of the 3 ms
  // cycle): auto keeps the 1F1B order of the reference table.
  EXPECT_EQ(order(scenario("  warmup: auto\n", "0 B")), order(scenario("", "0 B")));
  // Transfers far longer than compute (1 GB: 1 s a hop against a 3 ms cycle): auto reaches
  // deep, k = min(k' + 1 + ceil(hop / cycle), 2(S - s) - 1).
  EXPECT_EQ(order(scenario("  warmup: auto\n", "1 GB")),
            order(scenario("  warmup: deep\n", "1 GB")));
  // Comparable (hop 2.02 ms, cycle 3 ms): k_3 = 1, k_2 = 1 + 1 + 1 = 3, k_1 = 5, k_0 = 7,
  // the deep depths, and GPipe's 63.06 ms.
  const std::string a = scenario("  warmup: auto\n");
  EXPECT_EQ(order(a), order(scenario("  warmup: deep\n")));
  EXPECT_EQ(run(a).timeline.makespan, test::ms(63.06));
  const auto r = test::cli({"run", test::write_temp("warmup-run.yaml", a)});
  EXPECT_NE(r.out.find("(layers 0-0, warm-up 7 in flight)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(layers 3-3, warm-up 1 in flight)"), std::string::npos) << r.out;
}

TEST(Warmup, PerStageOverride) {
  // Only stage 0 deep: 7 in flight there (6 warm-up forwards), S - s elsewhere.
  std::string staged = scenario("");
  staged.replace(staged.find("  pipeline: 4\n"), 14,
                 "  stages:\n    - {layers: 0-0, warmup: deep}\n    - {layers: 1-1}\n"
                 "    - {layers: 2-2}\n    - {layers: 3-3}\n");
  const std::string o = order(staged);
  EXPECT_NE(o.find("dev0: F0 F1 F2 F3 F4 F5 F6 B0 F7"), std::string::npos) << o;
  EXPECT_NE(o.find("dev1: F0 F1 F2 B0 F3"), std::string::npos) << o;
}

// Random pipelines whose transfers are comparable to compute: `auto` stays within the cost
// of 1F1B's drain of GPipe's makespan (one backward per stage plus each hop back), and never
// holds more activations than GPipe (which keeps all M).
TEST(Warmup, AutoKeepsGpipeSpeedAtLessMemory) {
  std::mt19937 rng(20261123);
  std::uniform_real_distribution<double> f_ms(0.5, 2.0), ratio(0.3, 1.0);
  for (int trial = 0; trial < 12; ++trial) {
    const int S = 2 + trial % 4, M = 2 * S + trial % 5;
    std::string layers;
    double drain = 0;
    for (int s = 0; s < S; ++s) {
      const double f = f_ms(rng), b = 2 * f;
      // A hop of `out` MB at 1 GB/s takes out ms: a share of the stage's F + B.
      const double out = ratio(rng) * (f + b);
      drain += b + out;
      layers += fmt::format(
          "    - {{name: l{}, forward: {:.3f} ms, backward: {:.3f} ms, activation: 1 MiB, "
          "output: {:.0f} KB}}\n",
          s, f, b, out * 1000);
    }
    auto yaml = [&](const std::string& schedule) {
      return fmt::format(R"(cluster:
  gpu: v100-16gb
  nodes: {}
  gpus_per_node: 1
  inter_node: {{kind: ethernet, bandwidth: 1 GB/s, latency: 10 us}}
model:
  layers:
{}training:
  global_batch: {}
  micro_batch: 1
strategy:
  pipeline: {}
{})",
                         S, layers, M, S, schedule);
    };
    const test::SimRun gp = run(yaml("  schedule: gpipe\n"));
    const test::SimRun au = run(yaml("  schedule: dapple\n  warmup: auto\n"));
    EXPECT_LE(au.timeline.makespan, gp.timeline.makespan + test::ms(drain))
        << "S " << S << " M " << M << "\n"
        << layers;
    for (int d = 0; d < S; ++d) {
      EXPECT_LE(test::peak_activation_bytes(au, d), test::peak_activation_bytes(gp, d));
    }
    EXPECT_LT(test::peak_activation_bytes(au, S - 1), test::peak_activation_bytes(gp, S - 1));
  }
}

}  // namespace
}  // namespace pipesim
