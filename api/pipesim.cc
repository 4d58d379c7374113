// The public API (api/pipesim.h) over the library: a LoadedScenario is the YAML document it was
// read from (or written from a ScenarioSpec) with its settings, and the checked value the
// loader made of them once (api/internal/scenario_impl.h); run, plan and sweep work on that
// value.
#include "api/pipesim.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/internal/report_fields.h"
#include "api/internal/scenario_impl.h"
#include "api/internal/simulation.h"
#include "api/internal/spec_yaml.h"
#include "core/json_text.h"
#include "core/units.h"
#include "planner/planner.h"
#include "scenario/resolved.h"
#include "sweep/sweep.h"

namespace pipesim::api {

const LoadedScenario::Impl& impl(const LoadedScenario& s) {
  return *s.impl_;
}

void rethrow(const InputError& e) {
  // A scenario built in code is text pipesim wrote, so its line and column mean nothing to
  // the caller: the key says where.
  Location where = e.where();
  if (where.file == kCodeSource) where.line = where.column = 0;
  const Error error(e.problem(), e.allowed(), e.key(), where.file, where.line, where.column);
  if (const auto* missing = dynamic_cast<const MissingFile*>(&e))
    throw FileNotFound(error, missing->path());
  throw error;
}

namespace {

std::vector<Override> overrides_of(const std::vector<Setting>& settings) {
  std::vector<Override> out;
  out.reserve(settings.size());
  for (const Setting& s : settings) out.push_back({s.key, s.value});
  return out;
}

std::shared_ptr<const LoadedScenario::Impl> loaded(std::shared_ptr<const ScenarioDocument> document,
                                                   std::vector<Setting> settings) {
  std::vector<Override> overrides = overrides_of(settings);
  pipesim::Scenario value = guarded(document->source(), [&] { return document->load(overrides); });
  return std::make_shared<const LoadedScenario::Impl>(LoadedScenario::Impl{
      std::move(document), std::move(settings), std::move(overrides), std::move(value)});
}

RunSummary summary(const PointReport& p) {
  return RunSummary{.scenario = p.scenario,
                    .schedule = p.schedule,
                    .makespan_s = p.makespan_s,
                    .iteration_time_s = p.iteration_time_s,
                    .throughput_samples_per_s = p.throughput_samples_per_s,
                    .peak_memory_bytes = p.peak_memory_bytes,
                    .oom = p.oom,
                    .oom_message = p.oom_message,
                    .bubble_fraction = p.bubble_fraction,
                    .mfu = p.mfu,
                    .model_tflops_per_gpu = p.model_tflops_per_gpu,
                    .hardware_tflops_per_gpu = p.hardware_tflops_per_gpu,
                    .tokens_per_s = p.tokens_per_s,
                    .goodput = p.goodput,
                    .gpus = p.gpus,
                    .events = p.events};
}

PlanCandidate candidate(const Candidate& c) {
  return PlanCandidate{.strategy = c.strategy.dump(),
                       .micro_batch = c.micro_batch,
                       .iteration_time_s = c.iteration_s,
                       .throughput_samples_per_s = c.throughput,
                       .peak_memory_bytes = c.peak_memory,
                       .oom = c.oom,
                       .simulated = !c.estimated_only,
                       .tight = c.tight,
                       .goodput = c.goodput};
}

[[noreturn]] void bad_option(const std::string& call, const std::string& key,
                             const std::string& problem, const std::string& allowed) {
  throw Error(problem, allowed, key, call);
}

pipesim::PlanOptions plan_options(const PlanConfig& o) {
  const std::string call = "pipesim.plan";
  if (o.top < 1) bad_option(call, "top", "top must be at least 1", "1 or more");
  if (o.threads < 0)
    bad_option(call, "threads", "threads must not be negative", "0 (every core) or more");
  if (!(o.headroom >= 0 && o.headroom < 1))
    bad_option(call, "headroom", fmt::format("headroom {} is not a share in [0, 1)", o.headroom),
               std::string(kShareUnits));
  if (o.tolerance) {
    if (!o.exhaustive)
      bad_option(call, "tolerance", "tolerance applies to exhaustive plans only",
                 "exhaustive with it");
    if (!(*o.tolerance >= 0 && *o.tolerance < 1))
      bad_option(call, "tolerance",
                 fmt::format("tolerance {} is not a share in [0, 1)", *o.tolerance),
                 std::string(kShareUnits));
  }
  if (o.reproducible && o.time_limit_s)
    bad_option(call, "reproducible",
               "reproducible with time_limit: what a time limit leaves simulated depends on "
               "the machine",
               "one of the two");
  pipesim::PlanOptions out;
  out.top = o.top;
  out.threads = o.threads;
  if (o.time_limit_s) out.time_limit_s = checked_time_limit(*o.time_limit_s, "time_limit", {call});
  out.exhaustive = o.exhaustive;
  if (o.tolerance) out.tolerance = *o.tolerance;
  out.headroom = o.headroom;
  out.compare = o.compare;
  out.fix = o.fix;
  out.progress = o.progress;
  return out;
}

}  // namespace

std::string version() {
  return PIPESIM_VERSION;
}

Error::Error(const std::string& problem, const std::string& allowed, std::string key,
             std::string file, int line, int column)
    : std::runtime_error(InputError(problem, allowed, key, {file, line, column}).message()),
      problem_(problem),
      allowed_(allowed),
      key_(std::move(key)),
      file_(std::move(file)),
      line_(line),
      column_(column) {}

double parse_seconds(const std::string& text) {
  return translated([&] { return parse_time(text).seconds(); });
}

LoadedScenario::LoadedScenario() : LoadedScenario(load("")) {}

LoadedScenario::LoadedScenario(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

LoadedScenario::LoadedScenario(const ScenarioSpec& spec)
    : impl_(loaded(std::make_shared<const ScenarioDocument>(ScenarioDocument::of_text(
                       translated([&] { return spec_yaml(spec); }), kCodeSource)),
                   spec.settings)) {}

LoadedScenario LoadedScenario::load(const std::filesystem::path& file,
                                    const std::vector<Setting>& settings) {
  const std::string path = file.string();
  auto document = guarded(path.empty() ? "<default>" : path,
                          [&] { return std::make_shared<const ScenarioDocument>(path); });
  return LoadedScenario(loaded(std::move(document), settings));
}

LoadedScenario LoadedScenario::parse(const std::string& yaml, const std::string& source,
                                     const std::vector<Setting>& settings) {
  return LoadedScenario(loaded(
      std::make_shared<const ScenarioDocument>(ScenarioDocument::of_text(yaml, source)), settings));
}

LoadedScenario LoadedScenario::with(const std::vector<Setting>& settings) const {
  std::vector<Setting> all = impl_->settings;
  all.insert(all.end(), settings.begin(), settings.end());
  return LoadedScenario(loaded(impl_->document, std::move(all)));
}

LoadedScenario LoadedScenario::with(const std::string& key, const std::string& value) const {
  return with(std::vector<Setting>{{key, value}});
}

const std::string& LoadedScenario::name() const {
  return impl_->value.name;
}

const std::string& LoadedScenario::source() const {
  return impl_->value.source;
}

const std::vector<Setting>& LoadedScenario::settings() const {
  return impl_->settings;
}

int LoadedScenario::cluster_gpus() const {
  return impl_->value.cluster.num_devices();
}

std::string LoadedScenario::resolved_yaml() const {
  return guarded(source(), [&] {
    return resolved_scenario_yaml(impl_->value, impl_->document->text(), impl_->overrides);
  });
}

RunResult run(const LoadedScenario& scenario, const RunConfig& options) {
  const LoadedScenario::Impl& s = impl(scenario);
  return guarded(scenario.source(), [&] {
    SimulateOptions o;
    o.reproducible = options.reproducible;
    o.exact_sharing = options.exact_sharing;
    o.fold = options.fold;
    const Simulation sim = simulate_scenario(s.value, s.overrides, o);
    RunResult r;
    static_cast<RunSummary&>(r) = summary(summarize(sim.report));
    r.warnings = sim.report.info.warnings;
    r.json = to_json(sim.report);
    return r;
  });
}

std::vector<Setting> PlanCandidate::settings() const {
  std::vector<Setting> out{{"strategy", strategy}};
  if (micro_batch) out.push_back({"training.micro_batch", std::to_string(*micro_batch)});
  return out;
}

PlanResult plan(const LoadedScenario& scenario, const PlanConfig& options) {
  const LoadedScenario::Impl& s = impl(scenario);
  return guarded(scenario.source(), [&] {
    Plan p = pipesim::plan(s.value, plan_options(options));
    if (options.reproducible) p.wall_s = p.analytic_s = 0;  // the only timings it reports
    PlanResult r;
    for (const Candidate& c : p.candidates) r.candidates.push_back(candidate(c));
    for (const Candidate& c : p.pareto) r.pareto.push_back(candidate(c));
    r.problem = plan_problem(p, "headroom");
    r.lower_bound_s = p.lower_bound_s;
    r.warnings = p.warnings;
    nlohmann::ordered_json j = to_json(p);
    add_version_and_overrides(j, s.overrides);
    r.json = json_text(j, 2) + "\n";
    return r;
  });
}

Axis Axis::parse(const std::string& text) {
  GridAxis a = translated([&] { return parse_grid_axis(text); });
  return Axis{std::move(a.key), std::move(a.values)};
}

SweepResult sweep(const LoadedScenario& scenario, const std::vector<Axis>& axes,
                  const SweepConfig& options) {
  const LoadedScenario::Impl& s = impl(scenario);
  if (options.threads < 0)
    bad_option("pipesim.sweep", "threads", "threads must not be negative",
               "0 (every core) or more");
  return guarded(scenario.source(), [&] {
    std::vector<GridAxis> grid;
    for (const Axis& a : axes) grid.push_back({a.key, a.values});
    pipesim::SweepOptions o;
    o.sets = s.overrides;
    o.zip = options.zip;
    o.threads = options.threads;
    o.progress = options.progress;
    const Sweep w = run_sweep(*s.document, grid, o);
    SweepResult r;
    r.keys = w.keys;
    for (const SweepPoint& p : w.points) {
      r.points.push_back(
          {p.values, p.report ? std::optional(summary(*p.report)) : std::nullopt, p.error});
    }
    r.failed = w.failed;
    r.out_of_memory = w.out_of_memory;
    r.json = json_text(to_json(w), 2) + "\n";
    std::ostringstream csv;
    write_sweep_csv(csv, w);
    r.csv = csv.str();
    return r;
  });
}

}  // namespace pipesim::api
