// Reports (SPEC section 5): the numbers a user reads off one simulation, and the writers
// for JSON, CSV and the summary table. Chrome traces are in trace.h.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "sim/engine.h"
#include "sim/goodput.h"

namespace pipesim {

struct RunInfo {
  std::string scenario;
  std::string schedule;
  int64_t samples_per_iteration = 0;  // the global batch
  int iterations = 1;
  bool asynchronous = false;  // iteration time is then the steady-state period
  double wall_s = 0;          // how long the simulation took (0 for reproducible output)
  // Model FLOPs of one iteration (forward + backward = 3 x forward, recompute excluded) and
  // what the GPUs execute (recompute included); 0 when some layer's FLOPs are not known.
  double model_flops = 0, hardware_flops = 0;
  int gpus = 0;                   // GPUs the strategy uses
  double peak_flops_per_gpu = 0;  // in the training precision
  int64_t tokens_per_sample = 0;  // 0: the model has no sequence length
  // The parallel layout, e.g. "TP 8 x PP 16 x DP 8" (a range where stages differ), whether
  // sequence parallelism is on, the ZeRO stage asked for and whether any stage has
  // data-parallel ranks for it to shard over.
  std::string layout;
  // The same as degrees (SPEC section 9; the largest where stages differ): GPUs =
  // tensor x context x pipeline x data, expert ranks carved out of the data ranks.
  struct Parallelism {
    int tensor = 1, context = 1, expert = 1, pipeline = 1, data = 1;
  } parallelism;
  // What the user should know about the run that is neither an error nor in the numbers
  // (SPEC section 9), also printed on stderr.
  std::vector<std::string> warnings;
  bool sequence_parallel = false;
  int zero = 0;
  bool zero_applies = false;
  std::vector<std::pair<std::string, std::string>> overrides;  // the --set KEY=VALUE applied
  // Megatron-LM's closed-form bubble of a synchronous pipeline, (S - 1) / (v M) for S
  // devices per pipeline, v chunks each, M micro-batches (Narayanan et al. 2021, eq. 1 and
  // section 2.2.2): bubble time over ideal compute time, uniform stages, no communication.
  // Unset for asynchronous schedules, which do not flush.
  std::optional<double> megatron_bubble;
  int pipeline_devices = 1, virtual_stages = 1;  // S and v of that formula
  // training.failures (SPEC section 10): the job's failure model, for the report's goodput.
  std::optional<FailureModel> failures;
};

struct DeviceReport {
  std::string name;
  int stage = -1;           // first stage it runs; -1 when it runs none
  std::vector<int> stages;  // every stage it runs
  Time busy;
  Time exposed_pipeline_comm;  // idle, waiting for activations or gradients from a neighbour
  Time exposed_allreduce;      // idle, waiting for the gradient all-reduce (or another collective)
  Time exposed_all_to_all;     // idle, waiting for an all-to-all (expert or Ulysses exchanges)
  int64_t peak_memory = 0;
  Time peak_time;  // when the peak was first reached
  MemBreakdown at_peak{};
  int64_t capacity = 0;
};

struct LinkReport {
  std::string name;
  int64_t bytes = 0;
  Time busy;
  int peak_flows = 0;
};

struct Report {
  RunInfo info;
  // SPEC section 5 v2; unset (null in JSON) when the model's FLOPs or sequence are unknown.
  std::optional<double> model_tflops_per_gpu, hardware_tflops_per_gpu, mfu, tokens_per_s;
  Time makespan;
  Time iteration_time;
  double throughput = 0;       // samples per second
  double bubble_fraction = 0;  // idle share of (pipeline devices x makespan)
  OomInfo oom;
  std::string oom_message;  // empty unless oom
  std::string oom_op;       // label of the op that crossed capacity, or "static"
  std::vector<DeviceReport> devices;
  std::vector<LinkReport> links;  // link directions that carried bytes
  uint64_t events = 0;
  std::optional<Goodput> goodput;  // with RunInfo::failures
  // cluster.slowdown (SPEC section 10): each slowdown as given ("node0/gpu3 computes 1.25x
  // slower") and the iteration time of the same run without any.
  struct Slowdowns {
    std::vector<std::string> applied;
    Time iteration_time_without;
  };
  std::optional<Slowdowns> slowdown;
};

Report make_report(const TaskGraph& graph, const Cluster& cluster, const Timeline& timeline,
                   const RunInfo& info);

// What bounds the run, in one line: the busiest GPU's compute, an exposed collective or
// transfer (and the busiest link), the pipeline's fill and drain; memory near capacity.
std::string bound_line(const Report& report);

std::string to_json(const Report& report);  // pretty-printed, keys in SPEC order, '\n'-terminated
// The run's summary: one line per GPU, or past kGroupGpusAbove GPUs (unless
// `per_device`) one line per group of GPUs running the same stages.
inline constexpr int kGroupGpusAbove = 32;
bool groups_gpus(const Report& report, bool per_device);
std::string summary_table(const Report& report, bool per_device = false);
// One row per op: device, stream, op, micro_batch, start_s, end_s.
void write_csv(std::ostream& out, const TaskGraph& graph, const Cluster& cluster,
               const Timeline& timeline);

// One row per change of a device's memory: time_s, device, op, then every category and the
// total after the change. Starts with each device's static memory at time 0. The timeline
// must have been simulated with SimOptions::record_memory.
void write_memory_csv(std::ostream& out, const TaskGraph& graph, const Cluster& cluster,
                      const Timeline& timeline);

// "F3", "B0.c1", "optimizer", "send" - the op's name in reports.
std::string op_label(const Op& op);
// The same, appended to a buffer (no allocation per op when the buffer is reused).
void append_op_label(fmt::memory_buffer& out, const Op& op);

}  // namespace pipesim
