// The optimizer's own precision: training.optimizer_state (the bytes of each Adam moment or
// momentum element) and training.master_weights (what 16-bit training keeps beside its
// weights: an fp32 copy, the 16-bit remainders, none), as Megatron-Core's precision-aware
// optimizer (--exp-avg-dtype, --exp-avg-sq-dtype, its fp32 master weights kept as
// remainders) and Transformer Engine's FusedAdam (store_param_remainders; no master weights
// on bf16 parameters) keep them. Bytes per parameter by
// hand, the memory they make on a device, the optimizer step's traffic, and the inputs refused.
#include <gtest/gtest.h>

#include "api/pipesim.h"
#include "schedules/model.h"
#include "tests/support.h"

namespace pipesim {
namespace {

Training adam(Precision p) {
  Training t;
  t.precision = p;
  t.optimizer = Optimizer::kAdam;
  return t;
}

// Weights + gradients + optimizer state (the master copy with it) per parameter.
int64_t total(Precision p, Optimizer o, int64_t state_bytes, int64_t master_bytes) {
  Training t = adam(p);
  t.optimizer = o;
  t.optimizer_state_bytes = state_bytes;
  t.master_weight_bytes = master_bytes;
  const ParamBytes b = bytes_per_param(t);
  return b.weights + b.gradients + b.optimizer;
}

TEST(OptimizerPrecision, BytesPerParameterByHand) {
  const auto mixed = Precision::kMixed;
  const auto adam_ = Optimizer::kAdam;
  // Mixed precision, Adam, as before: 2 (weights) + 2 (gradients) + 4 (fp32 master) + 2 x 4
  // (moments) = 16.
  EXPECT_EQ(total(mixed, adam_, 4, 4), 16);
  // bf16 weights, gradients and moments, no master copy: 2 + 2 + 2 x 2 = 8.
  EXPECT_EQ(total(mixed, adam_, 2, 0), 8);
  // The fp32 master weights as remainders beside the bf16 weights: 2 + 2 + 2 + 2 x 4 = 14.
  EXPECT_EQ(total(mixed, adam_, 4, 2), 14);
  // fp8 moments: 2 + 2 + 4 + 2 x 1 = 10; momentum keeps one state: 2 + 2 + 4 + 1 = 9.
  EXPECT_EQ(total(mixed, adam_, 1, 4), 10);
  EXPECT_EQ(total(mixed, Optimizer::kMomentum, 1, 4), 9);
  // fp32 training with bf16 moments: 4 + 4 + 2 x 2 = 12 (no master copy to count).
  EXPECT_EQ(total(Precision::kFp32, adam_, 2, 4), 12);
  // Megatron-Bridge's DeepSeek recipes (Megatron-Core's precision-aware optimizer): fp32
  // gradients, the fp32 master weights as remainders, bf16 moments: 2 + 4 + 2 + 2 x 2 = 12,
  // the remainders and moments under `optimizer`.
  Training t = adam(mixed);
  t.fp32_gradients = true;
  t.optimizer_state_bytes = 2;
  t.master_weight_bytes = 2;
  const ParamBytes b = bytes_per_param(t);
  EXPECT_EQ(b.weights, 2);
  EXPECT_EQ(b.gradients, 4);
  EXPECT_EQ(b.optimizer, 6);
}

TEST(OptimizerPrecision, StepTrafficByHand) {
  // Mixed, Adam, bf16 moments: gradient 2 + master read and write 8 + each moment read and
  // written 2 x 2 x 2 = 8 + the 16-bit weights written 2 = 20 (28 with fp32 moments).
  Training t = adam(Precision::kMixed);
  EXPECT_EQ(optimizer_bytes_per_param(t), 28);
  // Remainders: gradient 2 + the 16-bit weights and their remainders read and written 8 +
  // moments 16 = 26.
  t.master_weight_bytes = 2;
  EXPECT_EQ(optimizer_bytes_per_param(t), 26);
  t.master_weight_bytes = 4;
  t.optimizer_state_bytes = 2;
  EXPECT_EQ(optimizer_bytes_per_param(t), 20);
  // No master copy: gradient 2 + the 16-bit weights read and written 4 + moments 8 = 14.
  t.master_weight_bytes = 0;
  EXPECT_EQ(optimizer_bytes_per_param(t), 14);
  // fp8 without master weights: the fp8 copy written as well, 15.
  t.precision = Precision::kFp8;
  EXPECT_EQ(optimizer_bytes_per_param(t), 15);
}

// A 2-layer transformer on `data` GPUs, with `training`'s keys besides the batch sizes.
std::string scenario(const std::string& training, int data = 1, int zero = 0,
                     const std::string& gpu = "a100-80gb") {
  return "cluster: {gpu: " + gpu + ", nodes: 1, gpus_per_node: " + std::to_string(data) +
         "}\n"
         "model: {generator: transformer, layers: 2, hidden: 512, heads: 8, sequence: 128, "
         "vocab: 1000}\n"
         "training: {global_batch: " +
         std::to_string(2 * data) + ", micro_batch: 1, " + training +
         "}\n"
         "strategy: {schedule: dapple, pipeline: 1, data: " +
         std::to_string(data) + ", zero: " + std::to_string(zero) + "}\n";
}

int64_t peak(const std::string& yaml) {
  return test::run_yaml(yaml).report.devices.at(0).peak_memory;
}

// On one device the peak falls by the parameters times the bytes saved: 4 a parameter with
// bf16 moments, 8 with no master copy as well; ZeRO-1 over two ranks halves both, as it shards the
// master weights and the moments.
TEST(OptimizerPrecision, PeakMemoryFallsByWhatTheStatesSave) {
  const test::SimRun base = test::run_yaml(scenario("optimizer: adam, precision: bf16"));
  const int64_t params = test::total_params(base.scenario.model);
  const int64_t one = base.report.devices.at(0).peak_memory;
  EXPECT_EQ(one - peak(scenario("optimizer: adam, precision: bf16, optimizer_state: bf16")),
            4 * params);
  EXPECT_EQ(
      one - peak(scenario(
                "optimizer: adam, precision: bf16, optimizer_state: bf16, master_weights: none")),
      8 * params);
  const int64_t two = peak(scenario("optimizer: adam, precision: bf16", 2, 1));
  EXPECT_EQ(
      two - peak(scenario(
                "optimizer: adam, precision: bf16, optimizer_state: bf16, master_weights: none", 2,
                1)),
      4 * params);
}

TEST(OptimizerPrecision, RefusesWhatCannotBe) {
  const auto run = [](const std::string& training) {
    return test::cli({"run", test::write_temp("opt.yaml", scenario(training))});
  };
  EXPECT_EQ(
      run("optimizer: adam, precision: bf16, optimizer_state: fp16, master_weights: fp32").code, 0);
  // fp8 training without master weights updates the 16-bit weights; with fp8 parameters
  // there are none to update.
  const std::string fp8 =
      "optimizer: adam, precision: fp8, optimizer_state: fp8, master_weights: none";
  const auto on_h100 = [](const std::string& training) {
    return test::cli({"run", test::write_temp("opt.yaml", scenario(training, 1, 0, "h100-80gb"))});
  };
  EXPECT_EQ(on_h100(fp8).code, 0);
  const test::CliResult alone = on_h100(fp8 + ", fp8_params: true");
  EXPECT_EQ(alone.code, 2);
  EXPECT_NE(alone.err.find("training.master_weights: fp8 parameters need a whole fp32 master copy"),
            std::string::npos)
      << alone.err;
  const auto check = [&](const std::string& training, const std::string& key,
                         const std::string& says) {
    const test::CliResult r = run(training);
    EXPECT_EQ(r.code, 2) << training;
    EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  };
  check("optimizer: adam, precision: bf16, optimizer_state: int4", "training.optimizer_state",
        "fp32 | bf16 | fp16 | fp8");
  check("precision: bf16, optimizer: sgd, optimizer_state: bf16", "training.optimizer_state",
        "sgd keeps no optimizer state");
  check("optimizer: adam, precision: fp32, master_weights: none", "training.master_weights",
        "fp32 weights are their own master copy");
  check("optimizer: adam, precision: bf16, master_weights: maybe", "training.master_weights",
        "fp32 | remainders | none");
}

}  // namespace
}  // namespace pipesim
