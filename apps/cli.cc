#include "apps/cli.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "api/internal/report_fields.h"
#include "api/internal/simulation.h"
#include "apps/backend_commands.h"
#include "apps/cli_docs.h"
#include "apps/model_command.h"
#include "apps/sweep_command.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_text.h"
#include "core/output_files.h"
#include "core/units.h"
#include "parallel/distributed.h"
#include "planner/planner.h"
#include "scenario/resolved.h"
#include "scenario/scenario.h"
#include "scenario/setup.h"
#include "scenario/work_estimate.h"
#include "sim/engine.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace pipesim {
namespace {

enum Exit { kOk = 0, kProblem = 1, kBadInput = 2, kInternal = 3 };

struct RunOptions {
  std::string scenario;
  std::string json, trace, csv, memory_csv, resolved;
  std::vector<std::string> sets;
  bool reproducible = false;
  bool exact_sharing = false;
  bool no_fold = false;
  bool per_device = false;
};

std::vector<Override> parse_overrides(const std::vector<std::string>& sets) {
  std::vector<Override> overrides;
  for (const auto& s : sets) overrides.push_back(parse_override(s));
  return overrides;
}

// Loads the scenario and records the files it read, which no output may overwrite.
Scenario load(const std::string& file, const std::vector<std::string>& sets,
              std::vector<InputIdentity>* inputs = nullptr) {
  const InputLog log;
  Scenario sc = load_scenario(file, parse_overrides(sets));
  if (inputs != nullptr) *inputs = log.files();
  return sc;
}

std::string placement_table(const Scenario& s, bool grouped) {
  // One line per pipeline position (and data-parallel copy): its stages (several chunks
  // for interleaved schedules), their layers and the GPUs of its replicas. When the
  // summary groups its GPUs (groups_gpus) and there are more than four copies, the first
  // and the last copy, the others counted between.
  std::string out = "placement   ";
  const size_t copies = s.placement.size();
  const bool elide = grouped && copies > 4;
  const int positions = s.strategy.positions();
  // Warm-up depths when the scenario chose them (strategy.warmup other than `schedule`).
  const bool chosen =
      std::any_of(s.strategy.stages.begin(), s.strategy.stages.end(), [&](const StageSpec& st) {
        return st.warmup.value_or(s.strategy.warmup) != Warmup::kSchedule;
      });
  const std::vector<int> in_flight = chosen ? warmup_depths(s) : std::vector<int>{};
  for (size_t c = 0; c < copies; ++c) {
    if (elide && c > 0 && c + 1 < copies) {
      if (c == 1)
        out += fmt::format(
            "            ... copies 1-{} alike, each on GPUs of its own "
            "(--per-device lists them)\n",
            copies - 2);
      continue;
    }
    for (int p = 0; p < positions; ++p) {
      std::string devs, stages, layers;
      for (int d : s.placement[c][static_cast<size_t>(p)]) {
        if (!devs.empty()) devs += ',';
        devs += s.cluster.device(d).name;
      }
      for (size_t g = static_cast<size_t>(p); g < s.strategy.stages.size();
           g += static_cast<size_t>(positions)) {
        const StageSpec& st = s.strategy.stages[g];
        stages += fmt::format("{}{}", stages.empty() ? "" : ",", g);
        layers += fmt::format("{}{}-{}", layers.empty() ? "" : ", ", st.first_layer, st.last_layer);
      }
      const std::string warmup = in_flight.empty() ? ""
                                                   : fmt::format(", warm-up {} in flight",
                                                                 in_flight[static_cast<size_t>(p)]);
      out += fmt::format("{}stage {}{} (layers {}{}) -> {}\n", c + p == 0 ? "" : "            ",
                         stages, s.placement.size() > 1 ? fmt::format(" copy {}", c) : "", layers,
                         warmup, devs);
    }
  }
  return out;
}

int cmd_run(const RunOptions& o, std::ostream& out, std::ostream& err) {
  std::vector<InputIdentity> inputs;
  Scenario loaded = load(o.scenario, o.sets, &inputs);
  const WorkEstimate work = estimate_work(loaded);
  if (!o.trace.empty()) check_trace_size(work);
  // The op CSV shows every collective step: the limit on expanded ops first.
  if (!o.csv.empty()) check_work(work, Collectives::kExpanded);
  const std::optional<std::string> csv_warning =
      o.csv.empty() ? std::nullopt : csv_size_warning(work);
  if (csv_warning) err << "pipesim: warning: " << *csv_warning << "\n";  // before the wait
  SimulateOptions opts;
  opts.record_memory = !o.trace.empty() || !o.memory_csv.empty();
  opts.record_links = !o.trace.empty();
  opts.reproducible = o.reproducible;
  opts.exact_sharing = o.exact_sharing;
  opts.fold = !o.no_fold;
  // The op CSV shows every collective step; a trace shows a ring collective's member as one
  // op (as a profile shows the collective's kernel on each GPU), its steps as link samples.
  opts.compact_collectives = o.csv.empty();
  const std::vector<Override> overrides = parse_overrides(o.sets);
  // The outputs are registered (their paths checked) before simulating; their bodies read
  // the simulation when the files are committed.
  std::optional<Simulation> run;
  std::string json;
  OutputFiles files(inputs);
  if (!o.json.empty() && o.json != "-")
    files.add("--json", o.json, [&](std::ostream& f) { f << json; });
  if (!o.trace.empty()) {
    files.add("--trace", o.trace, [&](std::ostream& f) {
      write_trace(f, run->graph, run->scenario.cluster, run->timeline);
    });
  }
  if (!o.csv.empty()) {
    files.add("--csv", o.csv, [&](std::ostream& f) {
      write_csv(f, run->graph, run->scenario.cluster, run->timeline);
    });
  }
  if (!o.memory_csv.empty()) {
    files.add("--memory-csv", o.memory_csv, [&](std::ostream& f) {
      write_memory_csv(f, run->graph, run->scenario.cluster, run->timeline);
    });
  }
  if (!o.resolved.empty()) {
    files.add("--resolved", o.resolved,
              [&](std::ostream& f) { f << resolved_scenario_yaml(run->scenario, overrides); });
  }
  run.emplace(simulate_scenario(std::move(loaded), overrides, opts));
  if (csv_warning) run->report.info.warnings.push_back(*csv_warning);
  const Report& report = run->report;
  json = to_json(report);
  // Out of memory: the error line first, then the report as asked (SPEC section 1).
  if (report.oom.oom) {
    err << fmt::format("pipesim: error: out of memory: {} (at most {} on {})\n", report.oom_message,
                       format_bytes(report.oom.capacity),
                       run->scenario.cluster.device(report.oom.device).name);
  }
  for (const std::string& w : report.info.warnings) {
    if (w != csv_warning) err << "pipesim: warning: " << w << "\n";
  }
  // All or nothing: standard output first, then every file renamed into place together.
  if (o.json == "-") {
    out << json;
  } else {
    out << summary_table(report, o.per_device) << "\n"
        << placement_table(run->scenario, groups_gpus(report, o.per_device));
  }
  check_stdout(out);
  files.commit();
  return report.oom.oom ? kProblem : kOk;
}

// The files the planner's scenario reads, which its output may not overwrite.
std::vector<InputIdentity> plan_inputs(const std::string& file,
                                       const std::vector<std::string>& sets) {
  std::vector<InputIdentity> inputs;
  load(file, sets, &inputs);
  return inputs;
}

int cmd_order(const std::string& file, const std::vector<std::string>& sets, std::ostream& out) {
  const Scenario sc = load(file, sets);
  const TaskGraph graph = scenario_task_graph(sc, true);
  // Read back from the TaskGraph, the representation every backend runs.
  for (int d = 0; d < graph.num_devices(); ++d) {
    std::vector<Step> steps;
    for (OpId id : graph.stream(d)) {
      const Op& op = graph.op(id);
      if (op.kind == OpKind::kOptimizer || op.part > 0) continue;  // a split backward is one step
      steps.push_back({op.kind, op.micro_batch, op.chunk});
    }
    const bool chunks = sc.strategy.virtual_stages > 1;
    if (!steps.empty()) out << fmt::format("dev{}: {}\n", d, format_steps(steps, chunks));
  }
  check_stdout(out);
  return kOk;
}

struct PlanArgs {
  std::string file, json, time_limit, tolerance, headroom;
  std::vector<std::string> sets, compare, fix;
  int top = 10, threads = 0;
  bool exhaustive = false, quiet = false, reproducible = false;
};

// Ranked strategies for the scenario; exit 1 when none fits in memory.
int cmd_plan(const PlanArgs& a, std::ostream& out, std::ostream& err) {
  PlanOptions options;
  options.top = a.top;
  options.threads = a.threads;
  options.exhaustive = a.exhaustive;
  options.compare = a.compare;
  options.fix = a.fix;
  if (!a.headroom.empty()) {
    try {
      options.headroom = parse_share(a.headroom);
    } catch (InputError& e) {
      throw InputError(e.what(), std::string(kShareUnits), "--headroom", {"<command line>"});
    }
  }
  if (!a.quiet) options.progress = &err;
  if (!a.tolerance.empty()) {
    if (!a.exhaustive)
      throw InputError("--tolerance applies to --exhaustive only", "--exhaustive with it",
                       "--tolerance", {"<command line>"});
    try {
      options.tolerance = parse_share(a.tolerance);
    } catch (InputError& e) {
      throw InputError(e.what(), std::string(kShareUnits), "--tolerance", {"<command line>"});
    }
  }
  if (!a.time_limit.empty()) {
    try {
      options.time_limit_s = parse_time(a.time_limit).seconds();
    } catch (InputError& e) {
      throw InputError(e.what(), std::string(kTimeUnits), "--time-limit");
    }
    checked_time_limit(options.time_limit_s, "--time-limit", {"<command line>"});
  }
  if (a.reproducible && !a.time_limit.empty())
    throw InputError(
        "--reproducible with --time-limit: what a time limit leaves simulated "
        "depends on the machine",
        "one of the two", "--reproducible", {"<command line>"});
  const std::vector<Override> overrides = parse_overrides(a.sets);
  // The output path is checked before the search; the file is written after it.
  std::string text;
  OutputFiles files(plan_inputs(a.file, a.sets));
  if (!a.json.empty() && a.json != "-")
    files.add("--json", a.json, [&](std::ostream& f) { f << text; });
  Plan p = plan(a.file, overrides, options);
  if (a.reproducible) p.wall_s = p.analytic_s = 0;  // the only timings it reports
  if (job_ranks().rank == 0) {
    for (const std::string& w : p.warnings) err << "pipesim: warning: " << w << "\n";
  }
  nlohmann::ordered_json j = to_json(p);
  add_version_and_overrides(j, overrides);
  text = json_text(j, 2) + "\n";
  if (a.json == "-") {
    out << text;
  } else {
    out << plan_table(p);
  }
  check_stdout(out);
  if (job_ranks().rank == 0) files.commit();  // every rank of an MPI job holds the plan
  if (const std::string problem = plan_problem(p, "--headroom"); !problem.empty())
    throw SimulationProblem(problem);
  return kOk;
}

// `pipesim run`; its output options join `outputs` (an empty path is refused).
CLI::App* add_run_command(CLI::App& app, RunOptions& run,
                          std::vector<const CLI::Option*>& output_options) {
  auto* run_cmd =
      app.add_subcommand("run", "simulate one scenario (the embedded default without a file)");
  run_cmd->add_option("scenario", run.scenario, "scenario YAML file");
  output_options.push_back(run_cmd->add_option(
      "--json", run.json, "write the JSON report to F ('-' for stdout instead of the table)"));
  output_options.push_back(run_cmd->add_option(
      "--trace", run.trace, "write a Chrome trace (Perfetto, chrome://tracing) to F"));
  output_options.push_back(run_cmd->add_option("--csv", run.csv, "write one CSV row per op to F"));
  output_options.push_back(run_cmd->add_option(
      "--memory-csv", run.memory_csv, "write every GPU's memory timeline, by category, to F"));
  output_options.push_back(run_cmd->add_option(
      "--resolved", run.resolved,
      "write the scenario as simulated (overrides applied, shorthands expanded) as YAML to F"));
  run_cmd
      ->add_option("--set", run.sets, "override a scenario key: --set cluster.nodes=4 (repeatable)")
      ->take_all()
      ->expected(1);
  run_cmd->add_flag("--reproducible", run.reproducible,
                    "report wall_s as 0 so equal inputs give byte-identical JSON");
  run_cmd->add_flag("--per-device", run.per_device,
                    "list every GPU in the summary and every data-parallel copy in the "
                    "placement (past 32 GPUs, GPUs running the same stages share a line)");
  run_cmd->add_flag("--exact-sharing", run.exact_sharing,
                    "re-rate link sharing over whole components at every flow event: "
                    "bit-identical to progressive filling, slower on large collectives");
  run_cmd->add_flag("--no-fold", run.no_fold,
                    "run every collective step by step, never as a phase, and every "
                    "data-parallel copy, never one for all: the same results, more events "
                    "(to check the folds against)");

  return run_cmd;
}

struct OrderArgs {
  std::string file;
  std::vector<std::string> sets;
};

// `pipesim order`.
CLI::App* add_order_command(CLI::App& app, OrderArgs& a) {
  auto* order_cmd =
      app.add_subcommand("order", "print the op order of each device, one line per device");
  order_cmd->add_option("scenario", a.file, "scenario YAML file")->required();
  order_cmd->add_option("--set", a.sets, "override a scenario key (repeatable)")
      ->take_all()
      ->expected(1);

  return order_cmd;
}

struct ModelArgs {
  std::string file, json;
  bool ops = false;
  std::vector<std::string> sets;
};

// `pipesim model`.
CLI::App* add_model_command(CLI::App& app, ModelArgs& a,
                            std::vector<const CLI::Option*>& output_options) {
  auto* model_cmd =
      app.add_subcommand("model", "print the model's per-layer costs, sizes and their sources");
  model_cmd->add_option("scenario", a.file, "scenario YAML file")->required();
  output_options.push_back(
      model_cmd->add_option("--json", a.json, "write the table as JSON to F ('-' for stdout)"));
  model_cmd->add_option("--set", a.sets, "override a scenario key (repeatable)")
      ->take_all()
      ->expected(1);
  model_cmd->add_flag("--ops", a.ops,
                      "per layer, each op: FLOPs, unit, bytes, the forward's bound, times and the "
                      "backward's bound (and one rank's share where the strategy splits layers)");

  return model_cmd;
}

// `pipesim plan`.
CLI::App* add_plan_command(CLI::App& app, PlanArgs& a,
                           std::vector<const CLI::Option*>& output_options) {
  auto* plan_cmd = app.add_subcommand(
      "plan",
      "search cuts, uneven replicas, data copies, micro-batch, schedule and placement: an "
      "analytic DP, then the best simulated in full");
  plan_cmd->add_option("scenario", a.file, "scenario YAML file (the default without one)");
  plan_cmd->add_option("--top", a.top, "keep the K best candidates (default 10)")
      ->check(CLI::Range(1, 100000));
  output_options.push_back(plan_cmd->add_option(
      "--json", a.json,
      "write {best, candidates, pareto, baselines, ...} as JSON to F ('-' for stdout)"));
  plan_cmd->add_option("--set", a.sets, "override a scenario key (repeatable)")
      ->take_all()
      ->expected(1);
  plan_cmd->add_option("--threads", a.threads, "simulation threads (default: every core)")
      ->check(CLI::Range(1, 4096));
  plan_cmd->add_option("--time-limit", a.time_limit,
                       "stop simulating candidates after this long, e.g. 60s");
  plan_cmd->add_flag("--exhaustive", a.exhaustive,
                     "go on by branch and bound until no plan of the space can beat the best");
  plan_cmd->add_option("--tolerance", a.tolerance,
                       "with --exhaustive: stop when no plan left can be faster than the best by "
                       "more than this share, e.g. 1% (default 0.01%; 0: the exact optimum)");
  plan_cmd
      ->add_option("--fix", a.fix,
                   "keep a dimension at the scenario's value, e.g. --fix training.micro_batch "
                   "--fix strategy.schedule (repeatable; the planner and --exhaustive search "
                   "the rest)")
      ->take_all()
      ->expected(1);
  plan_cmd->add_option("--headroom", a.headroom,
                       "rank only plans whose peak leaves this share of every GPU's memory "
                       "free, e.g. 10% (default 0)");
  plan_cmd
      ->add_option("--compare", a.compare,
                   "simulate your own strategy and rank it against the planner's: "
                   "--compare '{schedule: dapple, pipeline: 4, data: 2}' (repeatable)")
      ->take_all()
      ->expected(1);
  plan_cmd->add_flag("--quiet", a.quiet, "no progress lines on stderr");
  plan_cmd->add_flag("--reproducible", a.reproducible,
                     "report wall_s and analytic_s as 0 so equal inputs give byte-identical "
                     "JSON (not with --time-limit)");
  return plan_cmd;
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"pipesim: a discrete-event simulator of pipeline- and data-parallel DNN training",
               "pipesim"};
  app.set_version_flag("--version", std::string("pipesim ") + PIPESIM_VERSION);
  app.require_subcommand(1);

  std::vector<const CLI::Option*> output_options;
  RunOptions run;
  CLI::App* run_cmd = add_run_command(app, run, output_options);
  OrderArgs order;
  CLI::App* order_cmd = add_order_command(app, order);
  ModelArgs model;
  CLI::App* model_cmd = add_model_command(app, model, output_options);
  PlanArgs plan_args;
  CLI::App* plan_cmd = add_plan_command(app, plan_args, output_options);
  SweepCommand sweep(app, output_options);
  BackendCommands backend(app);
  DocsCommands docs(app);

  // A first word that is no command: name it and list the commands.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; })) {
      names += fmt::format("{}{}", names.empty() ? "" : ", ", c->get_name());
      known |= c->get_name() == argv[1];
    }
    if (!known) {
      err << fmt::format("pipesim: error: unknown command '{}' (commands: {})\n", argv[1], names);
      return kBadInput;
    }
  }
  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::Success& e) {  // --help and --version
      return app.exit(e, out, err);
    } catch (const CLI::ParseError& e) {
      err << fmt::format("pipesim: error: {} (see 'pipesim --help')\n", e.what());
      return kBadInput;
    }
    // `--json ''` and the like: an empty output path is a usage error, not "no output".
    for (const CLI::Option* opt : output_options) {
      if (opt->count() > 0 && opt->as<std::string>().empty())
        throw InputError("the output path is empty", "a file path, or '-' for stdout",
                         opt->get_name(), {"<command line>"});
    }
    if (docs.write(app, PIPESIM_VERSION, out)) return kOk;
    if (run_cmd->parsed()) return at_scenario(run.scenario, [&] { return cmd_run(run, out, err); });
    if (order_cmd->parsed())
      return at_scenario(order.file, [&] { return cmd_order(order.file, order.sets, out); });
    if (model_cmd->parsed())
      return at_scenario(model.file, [&] {
        std::vector<InputIdentity> inputs;
        const Scenario sc = load(model.file, model.sets, &inputs);
        return model_command(sc, inputs, model.json, model.ops, out);
      });
    if (plan_cmd->parsed())
      return at_scenario(plan_args.file, [&] { return cmd_plan(plan_args, out, err); });
    if (sweep.parsed()) return at_scenario(sweep.scenario(), [&] { return sweep.run(out, err); });
    if (backend.parsed()) return backend.run(out, err);
    return kInternal;
  } catch (const InputError& e) {
    err << "pipesim: error: " << e.message() << "\n";
    return kBadInput;
  } catch (const SimulationProblem& e) {
    err << "pipesim: error: " << e.what() << "\n";
    return kProblem;
  } catch (const std::bad_alloc&) {
    err << "pipesim: error: out of host memory while simulating (try a smaller scenario)\n";
    return kInternal;
  } catch (const std::exception& e) {
    err << "pipesim: error: internal error: " << e.what() << "\n";
    return kInternal;
  }
}

}  // namespace pipesim
