// The training section, and the optimizer step it sets on the model's layers.
#include <yaml-cpp/yaml.h>

#include "core/checked.h"
#include "core/units.h"
#include "scenario/internal/reader.h"
#include "scenario/internal/sections.h"

namespace pipesim::internal {

namespace {

// training.failures: {mtbf_per_gpu, checkpoint_every, checkpoint_time | checkpoint_bandwidth,
// restart} (SPEC section 10).
Failures read_failures(const Reader& r, const YAML::Node& n) {
  const std::string p = "training.failures";
  r.expect_map(
      n, p,
      {"mtbf_per_gpu", "checkpoint_every", "checkpoint_time", "checkpoint_bandwidth", "restart"});
  Failures f;
  const auto positive = [&](const char* key) {
    const YAML::Node v = n[key];
    const double s = r.duration_s(v, child_path(p, key));
    if (!(s > 0))
      r.fail(v, child_path(p, key), "must be longer than 0", "a duration > 0, e.g. '30 min'");
    return s;
  };
  r.require(n, p, "mtbf_per_gpu");
  f.mtbf_per_gpu_s = positive("mtbf_per_gpu");
  if (n["checkpoint_every"].IsDefined()) f.checkpoint_every_s = positive("checkpoint_every");
  const bool time = n["checkpoint_time"].IsDefined();
  const bool rate = n["checkpoint_bandwidth"].IsDefined();
  if (time == rate)
    r.fail(time ? n["checkpoint_bandwidth"] : n, child_path(p, "checkpoint_time"),
           time ? "give checkpoint_time or checkpoint_bandwidth, not both" : "missing required key",
           "'checkpoint_time: 2 min' or 'checkpoint_bandwidth: 2 GB/s' (each writing GPU's)");
  if (time)
    f.checkpoint_s = r.duration_s(n["checkpoint_time"], child_path(p, "checkpoint_time"));
  else
    f.checkpoint_bytes_per_s =
        r.bandwidth(n["checkpoint_bandwidth"], child_path(p, "checkpoint_bandwidth"));
  if (n["restart"].IsDefined()) f.restart_s = r.duration_s(n["restart"], child_path(p, "restart"));
  return f;
}

// optimizer_state: the bytes of each optimizer-state element; master_weights: what 16-bit
// training keeps beside its weights for the optimizer (an fp32 copy, the remainders, none).
// Read after precision, fp8_params and optimizer, which they are checked against.
void read_optimizer_precision(const Reader& r, const YAML::Node& n, Training& t) {
  if (const auto v = n["optimizer_state"]; v.IsDefined()) {
    t.optimizer_state_bytes = r.choice<int64_t>(
        v, "training.optimizer_state", {{"fp32", 4}, {"bf16", 2}, {"fp16", 2}, {"fp8", 1}});
    if (t.optimizer == Optimizer::kSgd && t.optimizer_state_bytes != 4)
      r.fail(v, "training.optimizer_state",
             n["optimizer"].IsDefined()
                 ? "sgd keeps no optimizer state to store in it"
                 : "sgd (the default optimizer) keeps no optimizer state to store in it",
             "optimizer: momentum or adam, or leave optimizer_state out");
  }
  if (const auto v = n["master_weights"]; v.IsDefined()) {
    t.master_weight_bytes = r.choice<int64_t>(v, "training.master_weights",
                                              {{"fp32", 4}, {"remainders", 2}, {"none", 0}});
    if (t.master_weight_bytes != 4 && t.precision == Precision::kFp32)
      r.fail(v, "training.master_weights", "fp32 weights are their own master copy",
             "precision: mixed, bf16, fp8 or nvfp4, or master_weights: fp32");
    if (t.master_weight_bytes != 4 && t.fp8_params)
      r.fail(v, "training.master_weights",
             "fp8 parameters need a whole fp32 master copy to update (the quantized weights "
             "are all the GPU holds besides it)",
             "master_weights: fp32, or fp8_params: false");
  }
}

}  // namespace

Training read_training(const Reader& r, const YAML::Node& n) {
  r.expect_map(n, "training",
               {"global_batch", "micro_batch", "precision", "gradients", "fp8_params", "optimizer",
                "optimizer_state", "master_weights", "iterations", "optimizer_step", "failures"});
  Training t;
  constexpr int64_t kMax = int64_t{1} << 40;
  t.global_batch =
      r.integer(r.require(n, "training", "global_batch"), "training.global_batch", 1, kMax);
  t.micro_batch =
      r.integer(r.require(n, "training", "micro_batch"), "training.micro_batch", 1, kMax);
  if (n["precision"].IsDefined()) {
    t.precision = r.choice<Precision>(n["precision"], "training.precision",
                                      {{"fp32", Precision::kFp32},
                                       {"mixed", Precision::kMixed},
                                       {"bf16", Precision::kMixed},  // Megatron-LM's spelling
                                       {"fp8", Precision::kFp8},
                                       {"nvfp4", Precision::kNvfp4}});
  }
  // gradients: fp32 keeps (and all-reduces) fp32 gradients under mixed precision, as
  // Megatron-LM's main_grad buffers do; weights (the default) keeps them in the weights'.
  if (n["gradients"].IsDefined()) {
    t.fp32_gradients =
        r.choice<bool>(n["gradients"], "training.gradients", {{"weights", false}, {"fp32", true}});
  }
  if (n["fp8_params"].IsDefined()) {
    t.fp8_params = read_flag(r, n["fp8_params"], "training.fp8_params", false);
    if (t.fp8_params && !quantized(t.precision))
      r.fail(n["fp8_params"], "training.fp8_params",
             "fp8 parameters need fp8 or nvfp4 training (the weights' own low-precision copy)",
             "precision: fp8 or nvfp4, or fp8_params: false");
  }
  if (n["optimizer"].IsDefined()) {
    t.optimizer = r.choice<Optimizer>(
        n["optimizer"], "training.optimizer",
        {{"sgd", Optimizer::kSgd}, {"momentum", Optimizer::kMomentum}, {"adam", Optimizer::kAdam}});
  }
  read_optimizer_precision(r, n, t);
  if (n["optimizer_step"].IsDefined())
    t.optimizer_step = r.time(n["optimizer_step"], "training.optimizer_step");
  if (n["iterations"].IsDefined())
    t.iterations = static_cast<int>(r.integer(n["iterations"], "training.iterations", 1, 100'000));
  if (n["failures"].IsDefined()) t.failures = read_failures(r, n["failures"]);
  return t;
}

void set_optimizer_step(Model& m, const Training& t, const GpuSpec& gpu) {
  int64_t total = 0;
  for (const Layer& l : m.layers) total += l.params;
  for (Layer& l : m.layers) {
    if (t.optimizer_step) {
      if (total > 0) {
        l.optimizer = Time::ps(static_cast<int64_t>(
            static_cast<long double>(t.optimizer_step->ps_count()) * l.params / total));
      }
    } else if (!l.optimizer_given && gpu.hbm_bytes_per_s > 0) {
      l.optimizer = serialization_time(
          checked_mul(l.params, optimizer_bytes_per_param(t), "an optimizer step"),
          gpu.hbm_bytes_per_s);
    }
  }
}

}  // namespace pipesim::internal
