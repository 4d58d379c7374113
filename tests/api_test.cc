// The public API (api/pipesim.h): a scenario built in code is the scenario file it spells,
// run, plan and sweep give what the command line writes, and errors carry their key.
#include <gtest/gtest.h>

#include <cstdlib>

#include <nlohmann/json.hpp>
#include <string>

#include "api/internal/simulation.h"
#include "api/pipesim.h"
#include "planner/planner.h"
#include "sweep/sweep.h"

namespace ps = pipesim::api;

namespace {

const std::string kToy = std::string(PIPESIM_SOURCE_DIR) + "/scenarios/examples/toy-gpipe.yaml";

// 8 A100s behind NVSwitch training a 8-layer transformer, pipeline 2 x data 4.
ps::ScenarioSpec small_spec() {
  return {.name = "api-small",
          .cluster = {.gpu = "a100-80gb", .nodes = 1, .gpus_per_node = 8, .intra_node = "nvswitch"},
          .model = {.layers = 8, .hidden = 1024, .heads = 16, .sequence = 1024, .vocab = 50257},
          .training = {.global_batch = 64, .micro_batch = 2, .precision = "bf16"},
          .strategy = {.schedule = "1f1b", .pipeline = 2, .data = 4}};
}

// The same scenario as a user writes it.
constexpr const char* kSmallYaml = R"(name: api-small
cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 8, intra_node: nvswitch}
model: {generator: transformer, layers: 8, hidden: 1024, heads: 16, sequence: 1024, vocab: 50257}
training: {global_batch: 64, micro_batch: 2, precision: bf16}
strategy: {schedule: 1f1b, pipeline: 2, data: 4}
)";

TEST(Api, ABuiltScenarioIsTheFileItSpells) {
  const ps::LoadedScenario built(small_spec());
  const ps::LoadedScenario written = ps::LoadedScenario::parse(kSmallYaml, "<code>");
  EXPECT_EQ(built.source(), "<code>");
  EXPECT_EQ(built.name(), "api-small");
  EXPECT_EQ(built.cluster_gpus(), 8);
  const ps::RunResult a = ps::run(built, {.reproducible = true});
  const ps::RunResult b = ps::run(written, {.reproducible = true});
  EXPECT_EQ(a.json, b.json);
  EXPECT_GT(a.throughput_samples_per_s, 0);
  ASSERT_TRUE(a.mfu.has_value());
  // The typed figures are the report's.
  const auto j = nlohmann::json::parse(a.json);
  EXPECT_EQ(a.iteration_time_s, j["iteration_time_s"].get<double>());
  EXPECT_EQ(a.throughput_samples_per_s, j["throughput_samples_per_s"].get<double>());
  EXPECT_EQ(*a.mfu, j["mfu"].get<double>());
  EXPECT_EQ(a.gpus, 8);
}

// The optimizer's precision has fields of its own: the same run as the file.
TEST(Api, OptimizerPrecisionAsFields) {
  ps::ScenarioSpec spec = small_spec();
  spec.training.optimizer = "adam";
  spec.training.optimizer_state = "bf16";
  spec.training.master_weights = "none";
  std::string yaml = std::string(kSmallYaml);
  yaml.replace(yaml.find("precision: bf16}"), 16,
               "precision: bf16, optimizer: adam, optimizer_state: bf16, master_weights: none}");
  const ps::RunResult built = ps::run(ps::LoadedScenario(spec), {.reproducible = true});
  EXPECT_EQ(built.json,
            ps::run(ps::LoadedScenario::parse(yaml, "<code>"), {.reproducible = true}).json);
  ps::ScenarioSpec defaults = small_spec();
  defaults.training.optimizer = "adam";
  EXPECT_NE(built.json, ps::run(ps::LoadedScenario(defaults), {.reproducible = true}).json);
}

// A power limit on the preset: the same run as the file's, slower than without it.
TEST(Api, PowerLimitAsAField) {
  ps::ScenarioSpec spec = small_spec();
  spec.cluster.power_limit_w = 250;
  std::string yaml = std::string(kSmallYaml);
  yaml.replace(yaml.find("gpu: a100-80gb"), 14, "gpu: {preset: a100-80gb, power_limit: 250 W}");
  const ps::RunResult built = ps::run(ps::LoadedScenario(spec), {.reproducible = true});
  EXPECT_EQ(built.json,
            ps::run(ps::LoadedScenario::parse(yaml, "<code>"), {.reproducible = true}).json);
  EXPECT_NE(built.json, ps::run(ps::LoadedScenario(small_spec()), {.reproducible = true}).json);
  spec.cluster.gpu.clear();
  try {
    const ps::LoadedScenario bad(spec);
    FAIL() << "accepted a power limit without its GPU";
  } catch (const ps::Error& e) {
    EXPECT_EQ(e.key(), "cluster.power_limit_w");
  }
}

// Megatron-Core's memory options have fields of their own: the same run as the file.
TEST(Api, RecomputeOffloadAndFp8ParametersAsFields) {
  ps::ScenarioSpec spec = small_spec();
  spec.cluster.gpu = "h100-80gb";
  spec.training.precision = "fp8";
  spec.training.fp8_params = true;
  spec.strategy.recompute = "selective";
  spec.strategy.recompute_modules = {"core_attn", "mlp"};
  ps::ScenarioSpec full = spec;
  full.strategy.recompute = "full";
  full.strategy.recompute_modules = {};
  full.strategy.recompute_layers = 2;
  ps::ScenarioSpec offload = spec;
  offload.strategy.recompute = "none";
  offload.strategy.recompute_modules = {};
  offload.strategy.offload_layers = 2;
  const std::string yaml = std::string(kSmallYaml);
  const auto written = [&](const std::string& training, const std::string& strategy) {
    std::string y = yaml;
    y.replace(y.find("a100-80gb"), 9, "h100-80gb");
    y.replace(y.find("precision: bf16}"), 16, training + "}");
    y.replace(y.find("data: 4}"), 8, "data: 4, " + strategy + "}");
    return ps::LoadedScenario::parse(y, "<code>");
  };
  const std::string fp8 = "precision: fp8, fp8_params: true";
  EXPECT_EQ(ps::run(ps::LoadedScenario(spec), {.reproducible = true}).json,
            ps::run(written(fp8, "recompute: selective, recompute_modules: [core_attn, mlp]"),
                    {.reproducible = true})
                .json);
  EXPECT_EQ(
      ps::run(ps::LoadedScenario(full), {.reproducible = true}).json,
      ps::run(written(fp8, "recompute: full, recompute_layers: 2"), {.reproducible = true}).json);
  EXPECT_EQ(
      ps::run(ps::LoadedScenario(offload), {.reproducible = true}).json,
      ps::run(written(fp8, "recompute: none, offload_layers: 2"), {.reproducible = true}).json);
  spec.strategy.recompute_modules = {"attention"};
  try {
    const ps::LoadedScenario bad(spec);
    FAIL() << "accepted an unknown module";
  } catch (const ps::Error& e) {
    EXPECT_EQ(e.key(), "strategy.recompute_modules.0") << e.what();
  }
}

TEST(Api, RunIsTheCommandLinesReport) {
  // `pipesim run toy-gpipe.yaml --set training.micro_batch=2 --reproducible --json -`
  const ps::LoadedScenario s = ps::LoadedScenario::load(kToy, {{"training.micro_batch", "2"}});
  const std::vector<pipesim::Override> sets{{"training.micro_batch", "2"}};
  pipesim::SimulateOptions o;
  o.reproducible = true;
  const pipesim::Simulation want =
      pipesim::simulate_scenario(pipesim::load_scenario(kToy, sets), sets, o);
  EXPECT_EQ(ps::run(s, {.reproducible = true}).json, pipesim::to_json(want.report));
  // with() adds settings after the scenario's own.
  const ps::LoadedScenario more = s.with("strategy.schedule", "dapple");
  ASSERT_EQ(more.settings().size(), 2u);
  EXPECT_EQ(ps::run(more).schedule, "dapple");
  EXPECT_EQ(ps::run(s).schedule, "gpipe");  // a value: `s` is unchanged
}

TEST(Api, ErrorsNameTheKeyAndTheSource) {
  ps::ScenarioSpec spec = small_spec();
  spec.strategy.schedule = "bogus";
  try {
    const ps::LoadedScenario s(spec);
    FAIL() << "accepted tensor 3";
  } catch (const ps::Error& e) {
    EXPECT_EQ(e.file(), "<code>");
    EXPECT_EQ(e.line(), 0);  // text pipesim wrote: the key says where
    EXPECT_EQ(e.key(), "strategy.schedule") << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("<code>: ", 0), 0u) << e.what();
  }
  try {
    (void)ps::LoadedScenario::load("no/such/scenario.yaml");
    FAIL() << "loaded a missing file";
  } catch (const ps::FileNotFound& e) {
    EXPECT_EQ(e.path(), "no/such/scenario.yaml");
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
  const ps::LoadedScenario s(small_spec());
  EXPECT_THROW((void)s.with("strategy.schedule", "bogus"), ps::Error);
  EXPECT_THROW((void)s.with("strategy.bogus_key", "1"), ps::Error);
  EXPECT_THROW((void)ps::plan(s, {.top = 0}), ps::Error);
  EXPECT_THROW((void)ps::plan(s, {.time_limit_s = -1.0}), ps::Error);
  EXPECT_THROW((void)ps::plan(s, {.tolerance = 1e-4}), ps::Error);  // not exhaustive
  // Text that is no UTF-8, ports without their preset, a moved-from scenario.
  spec = small_spec();
  spec.name = "caf\xe9";
  EXPECT_THROW(ps::LoadedScenario{spec}, ps::Error);
  spec = small_spec();
  spec.cluster.nics = 8;
  try {
    const ps::LoadedScenario bad(spec);
    FAIL() << "accepted nics without inter_node";
  } catch (const ps::Error& e) {
    EXPECT_EQ(e.key(), "cluster.nics");
  }
  ps::LoadedScenario moved(small_spec());
  const ps::LoadedScenario to = std::move(moved);
  EXPECT_EQ(moved.name(), to.name());  // NOLINT: a moved-from scenario stays valid
  EXPECT_THROW((void)ps::Axis::parse("training.micro_batch=8..1"), ps::Error);
  EXPECT_DOUBLE_EQ(ps::parse_seconds("250 ms"), 0.25);
  EXPECT_THROW((void)ps::parse_seconds("ten"), ps::Error);
}

TEST(Api, PlanIsTheCommandLinesPlanAndItsBestRuns) {
  const ps::LoadedScenario s = ps::LoadedScenario::load(kToy);
  const ps::PlanResult p = ps::plan(s, {.top = 3, .threads = 2, .reproducible = true});
  pipesim::PlanOptions o;
  o.top = 3;
  o.threads = 2;
  pipesim::Plan want = pipesim::plan(pipesim::load_scenario(kToy), o);
  want.wall_s = want.analytic_s = 0;
  nlohmann::ordered_json j = pipesim::to_json(want);
  j["version"] = ps::version();
  j["overrides"] = nlohmann::ordered_json::object();
  EXPECT_EQ(p.json, j.dump(2) + "\n");
  ASSERT_EQ(p.candidates.size(), 3u);
  EXPECT_LE(p.lower_bound_s, p.candidates.front().iteration_time_s);
  EXPECT_EQ(p.problem, "");  // the best plan fits
  // The best plan as a scenario runs at the time the planner simulated for it.
  const ps::PlanCandidate& best = p.candidates.front();
  const ps::RunResult r = ps::run(s.with(best.settings()));
  EXPECT_EQ(r.iteration_time_s, best.iteration_time_s);
  EXPECT_EQ(r.peak_memory_bytes, best.peak_memory_bytes);
}

TEST(Api, SweepIsTheCommandLinesSweep) {
  const ps::LoadedScenario s = ps::LoadedScenario::load(kToy, {{"training.iterations", "1"}});
  const ps::SweepResult got = ps::sweep(
      s,
      {ps::Axis::parse("training.micro_batch=1..16*2"), {"strategy.schedule", {"gpipe", "dapple"}}},
      {.threads = 2});
  pipesim::SweepOptions o;
  o.sets = {{"training.iterations", "1"}};
  o.threads = 2;
  const pipesim::Sweep want =
      pipesim::run_sweep(kToy,
                         {pipesim::parse_grid_axis("training.micro_batch=1..16*2"),
                          {"strategy.schedule", {"gpipe", "dapple"}}},
                         o);
  EXPECT_EQ(got.json, pipesim::to_json(want).dump(2) + "\n");
  ASSERT_EQ(got.points.size(), 10u);
  EXPECT_EQ(got.keys, (std::vector<std::string>{"training.micro_batch", "strategy.schedule"}));
  EXPECT_EQ(got.failed, 0u);
  ASSERT_TRUE(got.points[0].report.has_value());
  EXPECT_EQ(got.points[0].values, (std::vector<std::string>{"1", "gpipe"}));
  EXPECT_EQ(got.csv.substr(0, got.csv.find(',')), "training.micro_batch");
}

TEST(Api, ValidateRunsTheScenarioOnTheHostBackend) {
  // Measured times vary from run to run: the figures' relations, not their values.
  const ps::LoadedScenario s = ps::LoadedScenario::load(kToy, {{"training.iterations", "1"}});
  const ps::ValidateResult v =
      ps::validate(s, {.time_scale = "0.01", .warmup = 0, .iterations = 1});
  EXPECT_EQ(v.backend, "host");
  EXPECT_GT(v.measured_makespan_s, 0);
  EXPECT_GT(v.predicted_makespan_s, 0);
  const auto j = nlohmann::json::parse(v.json);
  EXPECT_EQ(j["measured_makespan_s"].get<double>(), v.measured_makespan_s);
  EXPECT_EQ(j["predicted_makespan_s"].get<double>(), v.predicted_makespan_s);
  EXPECT_THROW((void)ps::validate(s, {.backend = "tpu"}), ps::Error);
  EXPECT_THROW((void)ps::validate(s, {.time_scale = "fast"}), ps::Error);
  EXPECT_THROW((void)ps::validate(s, {.iterations = 0}), ps::Error);
}

// The CUDA backend is a plugin opened on demand (backend/cuda_plugin.cc): without it, an
// Error naming the backend, never a crash; the program itself maps no CUDA library.
TEST(Api, CudaBackendWithoutItsPluginIsAnError) {
  const ps::LoadedScenario s = ps::LoadedScenario::load(kToy);
  ASSERT_EQ(setenv("PIPESIM_CUDA_PLUGIN", "/nonexistent/libpipesim-cuda.so", 1), 0);
  try {
    (void)ps::validate(s, {.backend = "cuda"});
    ADD_FAILURE() << "validate on a missing plugin returned";
  } catch (const ps::Error& e) {
    EXPECT_EQ(e.key(), "backend");
    EXPECT_NE(std::string(e.what()).find("CUDA backend is not available"), std::string::npos)
        << e.what();
  }
  unsetenv("PIPESIM_CUDA_PLUGIN");
}

TEST(Api, EverySectionInTheSettings) {
  const ps::LoadedScenario s(
      ps::ScenarioSpec{.settings = {{"cluster", "{gpu: a100-80gb, nodes: 1, gpus_per_node: 2}"},
                                    {"model",
                                     "{generator: transformer, layers: 2, hidden: 256, heads: 4, "
                                     "sequence: 128, vocab: 1000}"},
                                    {"training", "{global_batch: 8, micro_batch: 2}"},
                                    {"strategy", "{schedule: 1f1b, pipeline: 2}"}}});
  EXPECT_EQ(s.cluster_gpus(), 2);
  EXPECT_GT(ps::run(s).throughput_samples_per_s, 0);
}

TEST(Api, TheResolvedScenarioRunsTheSame) {
  const ps::LoadedScenario s(small_spec());
  const ps::LoadedScenario again = ps::LoadedScenario::parse(s.resolved_yaml(), "<code>");
  EXPECT_EQ(ps::run(again, {.reproducible = true}).json, ps::run(s, {.reproducible = true}).json);
}

}  // namespace
