// Activations offloaded to host memory (strategy.offload_layers, Megatron-Core's CPU
// offloading): what the GPU keeps, the buffers the copies pass through, and the stalls a
// copy slower than the next layer's compute costs. Expected numbers are worked from the
// model's own layer costs (costs/models.cc), as the comments say.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "costs/models.h"
#include "schedules/lower.h"
#include "tests/support.h"
#include "topology/presets.h"

namespace pipesim {
namespace {

// Layers 0 (embedding), 1-4 (transformer), 5 (head); micro-batch 2 of 1024 tokens, bf16.
Model four_layers() {
  TransformerShape t;
  t.layers = 4;
  t.hidden = 512;
  t.heads = 8;
  t.ffn = 1536;
  t.sequence = 1024;
  t.vocab = 1000;
  t.flash_attention = true;
  Training tr;
  tr.micro_batch = 2;
  tr.precision = Precision::kMixed;
  return transformer_model(t, tr, *find_gpu_preset("h100-80gb"));
}

TEST(Offload, StageKeepsAllButTheLayersMovedAndStallsOnSlowCopies) {
  const Model m = four_layers();
  const std::vector<StageSpec> one{{0, 5, 1}};
  const Layer& l = m.layers[1];
  // A host link that takes 2 forwards to copy one layer's activations out.
  const double bw = static_cast<double>(l.activation_bytes) / (2 * l.forward.seconds());
  const StageProfile none = stage_profiles(m, one, {Recompute::kNone})[0];
  const StageProfile off = stage_profiles(m, one, {Recompute::kNone}, {}, false, {},
                                          {kDefaultRecomputeModules, 0, 3, bw})[0];
  // Layers 1, 2 and 3 move out (4, the stage's last transformer layer, never does). The
  // copies' two layers of buffers fit, in part, in what layer 4 and the head have not yet
  // taken in the forward (and have given back in the backward): L - head beyond them.
  const int64_t head = m.layers[5].activation_bytes;
  EXPECT_EQ(off.offloaded_bytes, 3 * l.activation_bytes);
  EXPECT_EQ(off.offload_buffer_bytes, std::max<int64_t>(0, l.activation_bytes - head));
  EXPECT_EQ(off.activation_bytes, none.activation_bytes);
  // Each copy out runs beside the next layer's forward (another transformer layer): one
  // forward past it, three times (copy = 2 forwards, to the picosecond's rounding).
  const Time f = l.forward, b = l.backward_input + l.backward_weight;
  const Time copy = 2 * f;
  EXPECT_NEAR((off.forward - none.forward).seconds(), 3 * f.seconds(), 1e-11);
  // Each copy back runs beside the backward of the layer after it.
  const Time back = copy > b ? copy - b : Time::zero();
  EXPECT_NEAR((off.backward_input - none.backward_input).seconds(), 3 * back.seconds(), 1e-11);
  // A fast link: nothing stalls. Asking for more layers than the stage has moves all but
  // its last transformer layer.
  const StageProfile fast = stage_profiles(m, one, {Recompute::kNone}, {}, false, {},
                                           {kDefaultRecomputeModules, 0, 99, 1e15})[0];
  EXPECT_EQ(fast.forward, none.forward);
  EXPECT_EQ(fast.backward_input, none.backward_input);
  EXPECT_EQ(fast.offloaded_bytes, 3 * l.activation_bytes);
  // One layer moved: the three after it hold more than the buffers need.
  const StageProfile first = stage_profiles(m, one, {Recompute::kNone}, {}, false, {},
                                            {kDefaultRecomputeModules, 0, 1, bw})[0];
  EXPECT_EQ(first.offloaded_bytes, l.activation_bytes);
  EXPECT_EQ(first.offload_buffer_bytes, 0);
  // A stage that recomputes offloads nothing.
  const StageProfile full = stage_profiles(m, one, {Recompute::kFull}, {}, false, {},
                                           {kDefaultRecomputeModules, 0, 3, bw})[0];
  EXPECT_EQ(full.offloaded_bytes, 0);
}

std::string scenario(const std::string& strategy, const std::string& gpu = "h100-80gb",
                     const std::string& schedule = "1f1b") {
  return "cluster: {gpu: " + gpu +
         ", nodes: 1, gpus_per_node: 1, intra_node: nvswitch3}\n"
         "model: {generator: transformer, layers: 4, hidden: 512, heads: 8, sequence: 1024, "
         "vocab: 1000, flash_attention: true}\n"
         "training: {global_batch: 4, micro_batch: 2, precision: bf16, optimizer: adam}\n"
         "strategy: {pipeline: 1, schedule: " +
         schedule + ", " + strategy + "}\n";
}

TEST(Offload, TheGpuHoldsTheRestAndTwoLayersOfBuffers) {
  const test::SimRun none = test::run_yaml(scenario("recompute: none"), true);
  const test::SimRun off = test::run_yaml(
      scenario("offload_layers: 3", "{preset: h100-80gb, host_bandwidth: 1000 TB/s}"), true);
  const int64_t layer = off.scenario.model.layers[1].activation_bytes;
  const int64_t head = off.scenario.model.layers[5].activation_bytes;
  // One GPU, F then B for each micro-batch: at most one micro-batch's activations, less
  // the three layers moved out, plus what the buffers hold beyond layer 4's and the head's.
  EXPECT_EQ(test::peak_activation_bytes(off, 0),
            test::peak_activation_bytes(none, 0) - 3 * layer + std::max<int64_t>(0, layer - head));
  // One layer moved saves it whole.
  const test::SimRun one = test::run_yaml(
      scenario("offload_layers: 1", "{preset: h100-80gb, host_bandwidth: 1000 TB/s}"), true);
  EXPECT_EQ(test::peak_activation_bytes(one, 0), test::peak_activation_bytes(none, 0) - layer);
  // A host link that copies a layer faster than the next one computes: no stall. (The
  // H100's own 64 GB/s would stall: these small layers compute in 0.3 ms, copy in 0.5.)
  EXPECT_EQ(off.report.iteration_time, none.report.iteration_time);
  EXPECT_TRUE(off.report.info.warnings.empty());
}

TEST(Offload, ASlowHostLinkStallsEveryStep) {
  // 1 MB/s: every copy takes far longer than a layer's compute, so each of the three
  // copies out costs copy - f and each copy back copy - b, for both micro-batches (one GPU,
  // no communication: the iteration is the sum of its steps).
  const test::SimRun none = test::run_yaml(scenario("recompute: none"));
  const test::SimRun off =
      test::run_yaml(scenario("offload_layers: 3", "{preset: h100-80gb, host_bandwidth: 1 MB/s}"));
  const Layer& l = off.scenario.model.layers[1];
  const double copy = static_cast<double>(l.activation_bytes) / 1e6;
  const double f = l.forward.seconds(), b = (l.backward_input + l.backward_weight).seconds();
  const double stall = 2 * 3 * ((copy - f) + (copy - b));
  EXPECT_NEAR((off.report.iteration_time - none.report.iteration_time).seconds(), stall,
              1e-9 * stall);
}

TEST(Offload, SettingsThatCannotTakeEffect) {
  const auto run = [](const std::string& strategy, const std::string& gpu = "h100-80gb",
                      const std::string& schedule = "1f1b") {
    return test::cli(
        {"run", test::write_temp("offload-bad.yaml", scenario(strategy, gpu, schedule))});
  };
  auto r = run("offload_layers: 2, recompute: full");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("strategy.offload_layers"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("recompute: none"), std::string::npos) << r.err;
  r = run("offload_layers: 2", "h100-80gb", "zb-h1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("splits the backward"), std::string::npos) << r.err;
  r = run("offload_layers: 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("strategy.offload_layers"), std::string::npos) << r.err;
  r = run(
      "offload_layers: 2",
      "{name: x, memory: 80 GiB, peak: 900 TFLOPS, peak_fp32: 60 TFLOPS, hbm_bandwidth: 3 TB/s}");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cluster.gpu.host_bandwidth"), std::string::npos) << r.err;
  // A hand-written order's own W steps would read the moved activations again.
  r = run("offload_layers: 2, order: ['F0 F1 B0 W0 B1 W1']");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("strategy.order has W steps"), std::string::npos) << r.err;
  // Each layer on a stage of its own (the last of each stays): nothing moves, and it is said.
  const test::SimRun alone = test::run_yaml(
      "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 2, intra_node: nvswitch3}\n"
      "model: {generator: transformer, layers: 1, hidden: 512, heads: 8, sequence: 1024, "
      "vocab: 1000, flash_attention: true}\n"
      "training: {global_batch: 4, micro_batch: 2, optimizer: adam}\n"
      "strategy: {schedule: 1f1b, stages: [{layers: 0-1}, {layers: 2}], offload_layers: 1}\n");
  const auto warned = [](const test::SimRun& r, const std::string& what) {
    for (const std::string& w : r.report.info.warnings)
      if (w.find(what) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(warned(alone, "strategy.offload_layers: no effect"));
  // Under a pipeline (which Megatron-Core does not offload beside), and asking for every
  // layer: both said.
  EXPECT_TRUE(warned(alone, "runs without pipeline parallelism"));
  EXPECT_TRUE(warned(test::run_yaml(scenario("offload_layers: 4")), "is not below any stage's"));
}

}  // namespace
}  // namespace pipesim
