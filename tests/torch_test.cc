// The torch backend end to end: a 2-process PyTorch pipeline (gloo over loopback) of two
// schedules, against the simulation. Skipped (exit 77) where python3 cannot import torch;
// CI installs python3-torch (scripts/bootstrap.sh). Run alone (RUN_SERIAL): the two worker
// processes need the machine's two cores.
//
// What must hold on a noisy 2-core machine, and why:
//  - GPipe with recomputation re-runs every forward before its backward: the simulation
//    puts it 32 % above plain GPipe (4 layers of 2 ms forward / 4 ms backward, 2 stages,
//    4 micro-batches); the measured makespans must rank the same way.
//  - Recomputation keeps only each stage's input until the backward: the simulated peak
//    memory and the real tensors each process holds must order the same way on both
//    devices.
//  - Replay (each run simulated with its own measured op times) within 25 % of the
//    measured makespan (measured here: 0.5-3 %; the bound leaves room for a loaded machine),
//    and the arena peaks equal to the simulator's.
// The timing checks get three tries; a machine that fails all three is not noisy but wrong.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backend/torch_backend.h"
#include "backend/validate.h"
#include "core/error.h"
#include "scenario/setup.h"
#include "sim/engine.h"
#include "support.h"

namespace pipesim {
namespace {

const char* kPipe = R"(name: torch-pipe
cluster:
  gpu: h100-80gb
  nodes: 1
  gpus_per_node: 2
  intra_node: {kind: pcie, bandwidth: 16 GB/s, latency: 5 us}
model:
  layers:
    - {name: block, repeat: 4, forward: 2 ms, backward: 4 ms, activation: 64 MiB, output: 16 MiB, params: 50M}
training:
  global_batch: 4
  micro_batch: 1
  precision: mixed
  optimizer: adam
  iterations: 1
strategy:
  pipeline: 2
  schedule: )";

bool torch_importable() {
  const char* p = std::getenv("PIPESIM_PYTHON");
  const std::string python = p != nullptr && *p != '\0' ? p : "/usr/bin/python3";
  return std::system((python + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
}

Validation validate_schedule(const std::string& schedule) {
  const Scenario s = load_scenario_text(kPipe + schedule + "\n", "<torch test>");
  // A fixed scale for both schedules, so that the same op is the same work in both.
  const auto e = make_torch_executor(s, TorchOptions{4.0});
  return validate(s, *e, ValidateOptions{1, 2});
}

TEST(TorchBackend, TwoSchedulesRankAndHoldMemoryAsSimulated) {
  if (!torch_importable()) GTEST_SKIP() << "python3 cannot import torch (python3-torch)";
  // The timings are measured: a burst of other work on the machine can upset one
  // measurement, so up to three tries (the memory checks below are exact every time).
  Validation plain, recompute;
  for (int attempt = 0; attempt < 3; ++attempt) {
    plain = validate_schedule("gpipe");
    recompute = validate_schedule("gpipe-recompute");
    if (plain.replay_error < 0.25 && recompute.replay_error < 0.25 &&
        recompute.measured_s > plain.measured_s)
      break;
  }
  for (const Validation* v : {&plain, &recompute}) {
    EXPECT_EQ(v->backend, "torch");
    EXPECT_TRUE(v->peaks_equal);
    EXPECT_LT(v->replay_error, 0.25) << v->schedule << ": " << validation_table(*v);
    ASSERT_EQ(v->tensor_peaks.size(), 2u);
  }
  ASSERT_GT(recompute.predicted_s, plain.predicted_s * 1.2);
  EXPECT_GT(recompute.measured_s, plain.measured_s)
      << validation_table(plain) << validation_table(recompute);
  for (size_t d = 0; d < 2; ++d) {
    ASSERT_GT(plain.peaks[d].simulated, recompute.peaks[d].simulated);
    EXPECT_GT(plain.tensor_peaks[d], recompute.tensor_peaks[d]) << "device " << d;
  }
}

TEST(TorchBackend, ACollectiveIsRefusedWithExitTwo) {
  if (!torch_importable()) GTEST_SKIP() << "python3 cannot import torch (python3-torch)";
  std::string text = kPipe + std::string("dapple\n  data: 2\n");
  const size_t at = text.find("gpus_per_node: 2");
  text.replace(at, 16, "gpus_per_node: 4");
  text.replace(text.find("global_batch: 4"), 15, "global_batch: 8");
  const Scenario s = load_scenario_text(text, "<torch test>");
  const auto e = make_torch_executor(s, TorchOptions{4.0});
  EXPECT_THROW(validate(s, *e, ValidateOptions{0, 1}), InputError);
}

}  // namespace
}  // namespace pipesim
