// A GPU under a power limit (cluster.gpu.power_limit): its compute clock, and so every
// compute peak, at (limit / TDP)^(1/3) of the datasheet's; HBM as it was; MFU still against
// the datasheet peak. Expected values worked by hand in the comments.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/units.h"
#include "costs/roofline.h"
#include "tests/support.h"
#include "topology/presets.h"

namespace pipesim {
namespace {

TEST(PowerLimit, ParsesWatts) {
  EXPECT_DOUBLE_EQ(parse_power("500 W"), 500);
  EXPECT_DOUBLE_EQ(parse_power("1.2 kW"), 1200);
  EXPECT_THROW((void)parse_power("500"), InputError);
  EXPECT_THROW((void)parse_power("0 W"), InputError);
  EXPECT_THROW((void)parse_power("-5 W"), InputError);
}

TEST(PowerLimit, ClockGoesAsTheCubeRootOfPower) {
  GpuSpec g = *find_gpu_preset("h100-80gb");
  EXPECT_DOUBLE_EQ(g.tdp_watts, 700);
  EXPECT_DOUBLE_EQ(g.clock_share(), 1);  // no limit
  g.power_limit_watts = 500;
  // (500 / 700)^(1/3) = 0.8939.
  EXPECT_NEAR(g.clock_share(), 0.8939, 1e-4);
  g.power_limit_watts = 800;  // above the rating: the datasheet's clock, no more
  EXPECT_DOUBLE_EQ(g.clock_share(), 1);
  // The law against the datasheets of one die at two ratings: the preset (H100 SXM, 989
  // TFLOPS at 700 W) capped at H100 NVL's 400 W runs at (400 / 700)^(1/3) = 0.830 of its
  // clock, where NVL's datasheet gives 835 / 989 = 0.844.
  g.power_limit_watts = 400;
  EXPECT_NEAR(g.clock_share(), 0.830, 5e-4);
  EXPECT_NEAR(g.clock_share() * g.peak_flops, 835e12, 0.02 * 835e12);
}

TEST(PowerLimit, SlowsComputeNotMemory) {
  GpuSpec full = *find_gpu_preset("h100-80gb");
  GpuSpec capped = full;
  capped.power_limit_watts = 500;
  // A large GEMM, compute-bound: its time over the clock share, to the picosecond.
  const OpWork gemm{1e12, 1e6};
  const Roofline a = roofline(gemm, true, 0, 1, full, Precision::kMixed);
  const Roofline b = roofline(gemm, true, 0, 1, capped, Precision::kMixed);
  ASSERT_FALSE(a.memory_bound);
  EXPECT_NEAR(b.time.seconds() / a.time.seconds(), 1 / capped.clock_share(), 1e-6);
  // The fp8 peak too.
  const Roofline a8 = roofline(gemm, true, 0, 1, full, Precision::kFp8, true);
  const Roofline b8 = roofline(gemm, true, 0, 1, capped, Precision::kFp8, true);
  EXPECT_NEAR(b8.time.seconds() / a8.time.seconds(), 1 / capped.clock_share(), 1e-6);
  // An element-wise op that moves 1 GB: HBM-bound, unchanged.
  const OpWork copy{1e6, 1e9};
  EXPECT_EQ(roofline(copy, false, 0, 1, capped, Precision::kMixed).time,
            roofline(copy, false, 0, 1, full, Precision::kMixed).time);
}

std::string scenario(const std::string& gpu) {
  return "cluster: {gpu: " + gpu +
         ", nodes: 1, gpus_per_node: 2, intra_node: nvswitch3}\n"
         "model: {generator: transformer, layers: 4, hidden: 1024, heads: 16, sequence: 2048, "
         "vocab: 1000}\n"
         "training: {global_batch: 8, micro_batch: 2, precision: bf16}\n"
         "strategy: {schedule: 1f1b, pipeline: 2}\n";
}

TEST(PowerLimit, AScenarioRunsSlowerAndKeepsItsMfuPeak) {
  const test::SimRun full = test::run_yaml(scenario("h100-80gb"));
  const test::SimRun capped = test::run_yaml(scenario("{preset: h100-80gb, power_limit: 500 W}"));
  EXPECT_GT(capped.report.makespan, full.report.makespan);
  // No faster than the clock allows: at most 1 / 0.894 slower (memory-bound ops keep their
  // time).
  EXPECT_LE(capped.report.makespan.seconds(), full.report.makespan.seconds() / 0.8939 + 1e-9);
  EXPECT_DOUBLE_EQ(capped.report.info.peak_flops_per_gpu, 989e12);  // MFU's denominator
  EXPECT_TRUE(capped.report.info.warnings.empty());
  // At or above the rating: no effect, said.
  const test::SimRun above = test::run_yaml(scenario("{preset: h100-80gb, power_limit: 700 W}"));
  EXPECT_EQ(above.report.makespan, full.report.makespan);
  ASSERT_EQ(above.report.info.warnings.size(), 1u);
  EXPECT_NE(above.report.info.warnings[0].find("power_limit: 700 W on h100-80gb is not below"),
            std::string::npos);
}

// Given times: on one kind of GPU a power limit cannot slow them, and says so; on a mixed
// cluster the capped GPUs take them at the ratio of the clocked peaks, (350 / 700)^(1/3)
// = 0.794 of the clock: 1 ms and 2 ms become 1.26 and 2.52 ms.
TEST(PowerLimit, GivenTimesOnOneKindAndOnSeveral) {
  const auto yaml = [](const std::string& cluster) {
    return "cluster:\n" + cluster +
           "model: {layers: [{name: block, repeat: 4, forward: 1 ms, backward: 2 ms, "
           "activation: 1 MiB, output: 1 MiB, params: 1M}]}\n"
           "training: {global_batch: 4, micro_batch: 1, precision: mixed, optimizer: sgd}\n"
           "strategy: {schedule: gpipe, stages: [{layers: 0-1}, {layers: 2-3}]}\n";
  };
  const test::SimRun one = test::run_yaml(
      yaml("  gpu: {preset: h100-80gb, power_limit: 500 W}\n  nodes: 1\n  gpus_per_node: 2\n"));
  bool said = false;
  for (const std::string& w : one.report.info.warnings)
    said = said || w.find("power_limit: 4 of 4 layers have given") != std::string::npos;
  EXPECT_TRUE(said);
  const auto mixed = [&](const std::string& second) {
    return test::run_yaml(
        yaml("  node_groups:\n    - {nodes: 1, gpu: h100-80gb, gpus_per_node: 1}\n"
             "    - {nodes: 1, gpu: " +
             second + ", gpus_per_node: 1}\n  inter_node: {preset: ib-ndr}\n"));
  };
  const test::SimRun same = mixed("{preset: h100-80gb, power_limit: 700 W}");
  const test::SimRun capped = mixed("{preset: h100-80gb, power_limit: 350 W}");
  EXPECT_GT(capped.report.makespan, same.report.makespan);
  const double share = std::cbrt(0.5);
  EXPECT_NEAR(capped.report.devices[1].busy.seconds(),
              same.report.devices[1].busy.seconds() / share, 1e-9);
}

TEST(PowerLimit, BadInputNamesTheKey) {
  const auto run = [](const std::string& gpu) {
    return test::cli({"run", test::write_temp("power.yaml", scenario(gpu))});
  };
  auto r = run("{preset: h100-80gb, power_limit: 500 watts}");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cluster.gpu.power_limit"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("units: W, kW"), std::string::npos) << r.err;
  // A GPU of its own needs its rating.
  r = run("{name: mine, memory: 80 GiB, peak: 900 TFLOPS, like: h100-80gb, power_limit: 500 W}");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("tdp"), std::string::npos) << r.err;
  r =
      run("{name: mine, memory: 80 GiB, peak: 900 TFLOPS, like: h100-80gb, tdp: 600 W, "
          "power_limit: 500 W}");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("tdp: no effect"), std::string::npos) << r.err;
  // A rating with no limit to scale the clock from: said.
  r = run("{name: mine, memory: 80 GiB, peak: 900 TFLOPS, like: h100-80gb, tdp: 600 W}");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("cluster.gpu.tdp: no effect without cluster.gpu.power_limit"),
            std::string::npos)
      << r.err;
  // Below a quarter of the rating (175 W for 700 W).
  r = run("{preset: h100-80gb, power_limit: 150 W}");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("at least 175 W"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pipesim
