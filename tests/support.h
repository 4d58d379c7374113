// Helpers shared by the test suites: scenarios written in code, run in-process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scenario/scenario.h"
#include "scenario/setup.h"
#include "schedules/lower.h"
#include "sim/engine.h"
#include "sim/report.h"

#if defined(__SANITIZE_ADDRESS__)
#define PIPESIM_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PIPESIM_TEST_SANITIZED 1
#endif
#endif
#ifndef PIPESIM_TEST_SANITIZED
#define PIPESIM_TEST_SANITIZED 0
#endif

namespace pipesim::test {

// How many of `n` random cases a property test runs: all of them in the Release suite, a
// fifth under the sanitizers, whose instrumentation slows the inner loops of max-min
// filling 10-30x (the sanitizers look for memory and undefined-behaviour faults, which
// the same code paths on fewer cases still reach).
constexpr uint64_t random_cases(uint64_t n) { return PIPESIM_TEST_SANITIZED ? n / 5 : n; }

// A pipeline, one layer per stage (chunk), on one node of as many GPUs as it needs, joined
// by an NVLink mesh. Times are in milliseconds; equal times per stage unless lists are given.
struct PipeSpec {
  int stages = 4;
  int micro_batches = 8;
  std::string schedule = "dapple";
  std::vector<double> tf_ms{1.0};  // one value for every stage, or one per stage
  std::vector<double> tb_ms{1.0};
  std::vector<double>
      tw_ms;               // non-empty: split backward (backward_input = tb, backward_weight = tw)
  int virtual_stages = 1;  // layers = stages x virtual_stages, one per chunk
  std::vector<int> replicas;  // per stage; empty = one GPU each
  int data = 1;
  std::string strategy_extra;  // more strategy lines, e.g. "  vertical_sync: true\n"
  std::string activation = "1 MiB";
  std::string weight_activation;  // with tw_ms: what W keeps of `activation`; empty: all of it
  std::string output = "0 B";
  std::string latency = "0 us";
  std::string bandwidth = "1 TB/s";
  std::string params = "0";
  std::string gpu = "a100-80gb";
  std::string precision = "fp32";
  std::string optimizer = "sgd";
  int iterations = 1;
};

std::string to_yaml(const PipeSpec& p);

// Training in mixed precision at `micro_batch` samples (the generator's tests).
Training mixed(int64_t micro_batch);
// A GPU of round numbers: 100 TFLOPS 16-bit, 200 TFLOPS fp8, 400 TFLOPS NVFP4, 50 TFLOPS
// vector, 1 TB/s, 80 GiB.
GpuSpec round_gpu();
// The model's parameters, layer by layer.
int64_t total_params(const Model& m);

// Milliseconds with a fraction, to the nearest picosecond (1.5 -> 1.5 ms).
inline Time ms(double v) {
  return Time::ps(static_cast<int64_t>(v * 1e9 + 0.5));
}

struct SimRun {
  Scenario scenario;
  TaskGraph graph;
  Timeline timeline;
  Report report;
};
SimRun run_yaml(const std::string& yaml, bool record_memory = false);
SimRun run_pipe(const PipeSpec& p);
// A 2-layer MoE model (4 experts of 512, top 2) on 4 H100s, one stage under 1F1B, with
// `strategy`'s other keys ("data: 4, expert: 4").
std::string moe_scenario(const std::string& strategy);
// What moe_scenario(strategy) is refused with (the InputError's message), or "".
std::string moe_error(const std::string& strategy);

// Last end time of the compute ops of a device.
Time device_finish(const SimRun& r, int device);
// Most activation bytes a device held at once (replayed from the recorded memory changes).
int64_t peak_activation_bytes(const SimRun& r, int device);

// One stage under GPipe, one micro-batch, on two GPUs as two copies (a context or expert
// group of 2 once the caller sets its degree and stage): the lowering's input; and the two
// GPUs, joined by NVLink of `bytes_per_s` without latency.
LoweringInput two_copies_gpipe();
Cluster two_gpus(double bytes_per_s);

// The CLI in-process: exit code, stdout and stderr.
struct CliResult {
  int code = 0;
  std::string out, err;
};
CliResult cli(const std::vector<std::string>& args);

// A file in a fresh temporary directory (removed at process exit is not needed: /tmp).
std::string temp_path(const std::string& name);
std::string write_temp(const std::string& name, const std::string& text);
std::string read_file(const std::string& path);

}  // namespace pipesim::test

namespace pipesim {
// Readable Time values in GoogleTest failure messages.
inline void PrintTo(Time t, std::ostream* os) {
  *os << t.ps_count() << " ps (" << t.seconds() * 1e3 << " ms)";
}
}  // namespace pipesim
