// pipesim's public C++ API: the one header a program needs (installed as
// <pipesim/api/pipesim.h>, linked as pipesim::pipesim). It includes the standard library
// only: no other pipesim header and no third-party type.
//
//   namespace ps = pipesim::api;
//   const ps::LoadedScenario s({.cluster = {.gpu = "h100-80gb", .nodes = 2, .gpus_per_node = 8,
//                                     .intra_node = "nvswitch", .inter_node = "ib-ndr",
//                                     .nics = 8},
//                         .model = {.include = "llama3-8b"},
//                         .training = {.global_batch = 64, .micro_batch = 1},
//                         .strategy = {.schedule = "1f1b", .pipeline = 4, .tensor = 2}});
//   const ps::RunResult r = ps::run(s);              // r.iteration_time_s, r.mfu, r.json
//   const ps::PlanResult p = ps::plan(s, {.top = 3});
//   const ps::RunResult best = ps::run(s.with(p.candidates.front().settings()));
//   const ps::SweepResult w = ps::sweep(s, {ps::Axis::parse("training.micro_batch=1..4*2")});
//   const ps::ValidateResult v = ps::validate(s);   // run for real on CPU threads
//
// A LoadedScenario is a value, checked when it is made: a bad key or value throws Error then,
// with the same message the command line prints. run, plan and sweep return plain structs
// with the main figures, and `json`: exactly what `pipesim run|plan|sweep|validate --json`
// writes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace pipesim::api {

// pipesim's version, "0.1.0".
std::string version();

// Bad input: a scenario file, key or value, a setting, an option. what() is the line the
// command line prints after "pipesim: error: ":
// "<file>:<line>:<column>: <key>: <problem> (<allowed>)", leaving out what is unknown.
class Error : public std::runtime_error {
 public:
  Error(const std::string& problem, const std::string& allowed = {}, std::string key = {},
        std::string file = {}, int line = 0, int column = 0);
  // The scenario file, "<default>", "<code>" for a scenario built in code, or the call.
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }  // 1-based; 0 when unknown
  int column() const noexcept { return column_; }
  const std::string& key() const noexcept { return key_; }  // the dotted key, when known
  const std::string& problem() const noexcept { return problem_; }
  const std::string& allowed() const noexcept { return allowed_; }  // what would do

 private:
  std::string problem_, allowed_, key_, file_;
  int line_ = 0, column_ = 0;
};

// A file that does not exist: a scenario file or one it includes (path()).
class FileNotFound : public Error {
 public:
  FileNotFound(const Error& error, std::string path) : Error(error), path_(std::move(path)) {}
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

// A time with its unit ("30s", "2 min", "500 ms") in seconds, as the command line reads one.
double parse_seconds(const std::string& text);

// A key and its value as YAML text, as `--set KEY=VALUE`: {"strategy.pipeline", "4"},
// {"cluster.inter_node", "{preset: ib-ndr, nics: 8}"}.
struct Setting {
  std::string key{}, value{};
};

// The sections of a scenario file in its shorthand form (SPEC section 3). An empty string or
// an unset number is not written, so the file format's default holds; any other key goes in
// ScenarioSpec::settings.
struct ClusterSpec {
  std::string gpu{};  // a preset: v100-16gb, a100-80gb, h100-80gb, h200, b200, gb200, b300, gb300,
                      // mi300x, ...
  std::optional<int> nodes{}, gpus_per_node{};
  std::string intra_node{};   // a preset: nvlink3, nvlink4, nvswitch, nvlink5, pcie4, ...
  std::string inter_node{};   // a preset (per port): ib-hdr, ib-ndr, eth100, eth400, ...
  std::optional<int> nics{};  // network ports per node, each of inter_node's bandwidth
  // Watts each GPU is capped at (below its rated board power its compute clock drops).
  std::optional<double> power_limit_w{};
};

struct ModelSpec {
  std::string include{};  // a built-in model (gpt3-175b, llama3-8b, mixtral-8x7b, ...) or a file
  // The transformer generator's shape; beside `include`, they change the included model's.
  std::optional<int64_t> layers{}, hidden{}, heads{}, ffn{}, sequence{}, vocab{};
  std::optional<int> mtp_layers{};  // multi-token prediction's depths (DeepSeek-V3: 1)
};

struct TrainingSpec {
  std::optional<int64_t> global_batch{}, micro_batch{};
  std::string precision{};           // fp32 | mixed | bf16 | fp8 | nvfp4
  std::optional<bool> fp8_params{};  // quantized weights alone, gathered so (fp8 or nvfp4)
  std::string optimizer{};  // sgd | momentum | adam
  std::string optimizer_state{};  // fp32 | bf16 | fp16 | fp8: each state element
  std::string master_weights{};   // fp32 | remainders | none: beside 16-bit weights
  std::optional<int64_t> iterations{};
};

struct StrategySpec {
  std::string schedule{};  // gpipe, dapple, 1f1b, interleaved, zb-2p, ... (SPEC section 4)
  std::optional<int> pipeline{}, tensor{}, context{}, expert{}, data{}, virtual_stages{}, zero{};
  std::optional<bool> sequence_parallel{};
  std::string recompute{};  // none | full | selective
  // What `selective` re-runs (core_attn, layernorm, mlp, moe_act, mla_up_proj,
  // shared_experts, moe, or PyTorch's per-op policy alternate_gemms; empty: the default), how
  // many layers of each stage `full` checkpoints, and how many of each stage's layers
  // offload their activations to the host instead.
  std::vector<std::string> recompute_modules{};
  std::optional<int> recompute_layers{}, offload_layers{};
  std::string placement{};  // fresh-first | append-first | scatter-first
};

struct ScenarioSpec {
  std::string name{};
  ClusterSpec cluster{};
  ModelSpec model{};
  TrainingSpec training{};
  StrategySpec strategy{};
  std::vector<Setting> settings{};  // any other key, applied after the fields above
};

struct LoadedScenarioState;  // what a LoadedScenario holds (internal)

// A loaded, checked scenario. Copies are cheap and share what they hold.
class LoadedScenario {
 public:
  // The embedded default scenario (`pipesim run` with no file).
  LoadedScenario();
  // Built in code; its errors name the key and "<code>".
  explicit LoadedScenario(const ScenarioSpec& spec);
  // A YAML scenario file (FileNotFound when there is none; the embedded default when
  // `file` is empty) with `settings` applied before it is checked, as `--set` does.
  static LoadedScenario load(const std::filesystem::path& file,
                             const std::vector<Setting>& settings = {});
  // YAML text; `source` stands for the file in errors and reports.
  static LoadedScenario parse(const std::string& yaml, const std::string& source = "<text>",
                              const std::vector<Setting>& settings = {});

  // This scenario with more settings applied after its own, checked as `--set` is.
  LoadedScenario with(const std::vector<Setting>& settings) const;
  LoadedScenario with(const std::string& key, const std::string& value) const;

  const std::string& name() const;               // the scenario's `name`
  const std::string& source() const;             // the file, "<default>", "<code>" or parse's name
  const std::vector<Setting>& settings() const;  // every setting applied, in order
  int cluster_gpus() const;                      // GPUs in the cluster (a strategy may use fewer)
  // The scenario as simulated: settings applied, shorthands expanded (`run --resolved`).
  std::string resolved_yaml() const;

  // A moved-from scenario is still the scenario: moving copies the shared pointer.
  LoadedScenario(const LoadedScenario&) = default;
  LoadedScenario& operator=(const LoadedScenario&) = default;

  using Impl = LoadedScenarioState;

 private:
  explicit LoadedScenario(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
  friend const Impl& impl(const LoadedScenario& s);
};

// The main figures of one simulated iteration (SPEC section 5).
struct RunSummary {
  std::string scenario{}, schedule{};
  double makespan_s = 0, iteration_time_s = 0, throughput_samples_per_s = 0;
  int64_t peak_memory_bytes = 0;  // most over the GPUs
  bool oom = false;
  std::string oom_message{};  // empty unless oom
  double bubble_fraction = 0;
  // Unset where the model's FLOPs or sequence are unknown.
  std::optional<double> mfu{}, model_tflops_per_gpu{}, hardware_tflops_per_gpu{}, tokens_per_s{};
  std::optional<double> goodput{};  // with training.failures
  int gpus = 0;
  uint64_t events = 0;
};

struct RunConfig {
  bool reproducible = false;   // report wall_s as 0 (`--reproducible`)
  bool exact_sharing = false;  // `--exact-sharing`
  bool fold = true;  // false: `--no-fold` (every collective step by step, every copy simulated)
};

struct RunResult : RunSummary {
  std::vector<std::string> warnings{};
  std::string json{};  // `pipesim run --json -`
};

RunResult run(const LoadedScenario& scenario, const RunConfig& options = {});

struct PlanConfig {
  int top = 10;                          // candidates kept
  int threads = 0;                       // 0: every core
  std::optional<double> time_limit_s{};  // seconds, more than 0; unset: none
  bool exhaustive = false;               // the optimum of the whole space (branch and bound)
  std::optional<double> tolerance{};     // with exhaustive: how much faster a plan left out may be
  double headroom = 0;                   // rank only plans leaving this share of GPU memory free
  std::vector<std::string> compare{};    // strategies of your own (YAML mappings), ranked too
  std::vector<std::string> fix{};        // keys kept at the scenario's value ("strategy.schedule")
  bool reproducible = false;         // report wall_s and analytic_s as 0 (not with a time limit)
  std::ostream* progress = nullptr;  // progress lines
};

struct PlanCandidate {
  std::string strategy{};                // a strategy section as a JSON mapping (valid YAML)
  std::optional<int64_t> micro_batch{};  // when it differs from the scenario's
  double iteration_time_s = 0, throughput_samples_per_s = 0;
  int64_t peak_memory_bytes = 0;
  bool oom = false;
  bool simulated = true;            // false: the time limit left it at the estimate
  bool tight = false;               // fits, but leaves less than PlanConfig::headroom free
  std::optional<double> goodput{};  // with training.failures: ranked by throughput x goodput
  // What makes the scenario this plan: LoadedScenario::with(candidate.settings()).
  std::vector<Setting> settings() const;
};

struct PlanResult {
  std::vector<PlanCandidate> candidates{};  // best first
  std::vector<PlanCandidate> pareto{};      // no other is both faster and smaller
  // What the command line exits 1 for, empty when the best plan fits: no strategy could be
  // simulated (no candidates), every one runs out of memory, or none leaves the headroom.
  std::string problem{};
  double lower_bound_s = 0;  // no plan of the space that fits is faster
  std::vector<std::string> warnings{};
  std::string json{};  // `pipesim plan --json -`
};

PlanResult plan(const LoadedScenario& scenario, const PlanConfig& options = {});

// One swept key and its values, each as a Setting's value.
struct Axis {
  std::string key{};
  std::vector<std::string> values{};
  // "KEY=1..64*2", "KEY=a,b,c" (as `--grid` takes).
  static Axis parse(const std::string& text);
};

struct SweepConfig {
  bool zip = false;  // pair the axes' lists instead of their product
  int threads = 0;   // 0: every core
  std::ostream* progress = nullptr;
};

struct SweepRow {
  std::vector<std::string> values{};   // one per axis
  std::optional<RunSummary> report{};  // when it was simulated
  std::string error{};                 // when it was not
};

struct SweepResult {
  std::vector<std::string> keys{};
  std::vector<SweepRow> points{};  // in grid order
  size_t failed = 0, out_of_memory = 0;
  std::string json{};  // `pipesim sweep --json -`
  std::string csv{};   // `pipesim sweep --csv -`
};

// The scenario at every point of the grid (its own settings first).
SweepResult sweep(const LoadedScenario& scenario, const std::vector<Axis>& axes,
                  const SweepConfig& options = {});

struct ValidateConfig {
  // host (CPU threads), torch (PyTorch processes over gloo) or cuda (SM partitions of one
  // NVIDIA GPU: the plugin libpipesim-cuda.so, where pipesim was built with nvcc).
  std::string backend = "host";
  std::string time_scale = "auto";  // wall seconds per scenario second, or auto
  int warmup = 1;                   // untimed runs first, 0 to 1000
  int iterations = 10;              // timed runs in each of two sets, 1 to 1000
  bool calibrate = false;           // also predict from each compute op timed alone
};

// The scenario's TaskGraph run for real and compared with its simulation (SPEC section 8).
struct ValidateResult {
  std::string backend{};
  double measured_makespan_s = 0;  // median makespan of the timed runs
  double noise_floor = 0;          // how far the two sets' medians differ, over measured_makespan_s
  double predicted_makespan_s = 0;  // simulated with the scenario's costs
  double predicted_error = 0;       // |predicted - measured| / measured
  double replay_makespan_s = 0;     // simulated with each run's measured op times
  double replay_error = 0;
  // With calibrate: simulated with each compute op timed alone, and its error.
  std::optional<double> calibrated_makespan_s{}, calibrated_error{};
  bool peaks_equal = true;  // every device's measured peak memory is the simulated one
  std::string json{};       // `pipesim validate --json -`
};

ValidateResult validate(const LoadedScenario& scenario, const ValidateConfig& options = {});

}  // namespace pipesim::api
