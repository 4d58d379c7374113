#include "apps/sweep_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "core/input_file.h"
#include "core/json_text.h"
#include "core/output_files.h"
#include "parallel/distributed.h"
#include "scenario/scenario.h"
#include "scenario/setup.h"
#include "sweep/sweep.h"

namespace pipesim {

namespace {

// --slow-gpus: cluster.slowdown with one GPU at a time `factor` times slower.
GridAxis slow_gpu_axis(const Scenario& base, double factor) {
  GridAxis axis{"cluster.slowdown", {}};
  for (const Device& d : base.cluster.devices())
    axis.values.push_back(fmt::format("[{{device: {}, compute: {}}}]", d.name, factor));
  return axis;
}

}  // namespace

SweepCommand::SweepCommand(CLI::App& app, std::vector<const CLI::Option*>& output_options) {
  cmd_ = app.add_subcommand(
      "sweep",
      "run the scenario at every point of a what-if grid, on every core (and every rank "
      "under mpirun)");
  cmd_->add_option("scenario", file_, "scenario YAML file (the default without one)");
  cmd_->add_option("--grid", grids_,
                   "KEY=VALUES to sweep: a,b,c, 1..64 or 1..64*2 (repeatable; commas inside "
                   "{}, [] or quotes do not split)")
      ->take_all()
      ->expected(1);
  cmd_->add_option("--slow-gpus", slow_gpus_,
                   "one more axis: each GPU of the cluster in turn FACTOR times slower "
                   "(cluster.slowdown), e.g. 1.2")
      ->check(CLI::Range(1.0, 1000.0));
  cmd_->add_flag("--zip", zip_, "pair the --grid lists (equal lengths) instead of their product");
  cmd_->add_option("--threads", threads_, "simulation threads (default: every core)")
      ->check(CLI::Range(1, 4096));
  output_options.push_back(cmd_->add_option(
      "--csv", csv_, "write one row per point to F ('-' for stdout instead of the table)"));
  output_options.push_back(
      cmd_->add_option("--json", json_, "write every point as JSON to F ('-' for stdout)"));
  cmd_->add_option("--set", sets_, "override a scenario key at every point (repeatable)")
      ->take_all()
      ->expected(1);
  cmd_->add_flag("--quiet", quiet_, "no progress lines on stderr");
}

int SweepCommand::run(std::ostream& out, std::ostream& err) const {
  SweepOptions options;
  for (const std::string& s : sets_) options.sets.push_back(parse_override(s));
  std::vector<GridAxis> axes;
  for (const std::string& g : grids_) axes.push_back(parse_grid_axis(g));
  options.zip = zip_;
  options.threads = threads_;
  if (!quiet_) options.progress = &err;

  // The files the scenario reads, which no output may replace; whether the scenario is
  // valid without the grid's values is for each point to say.
  // The scenario's own warnings and the what-ifs the grid and --set ask of layers that
  // cannot follow them (SPEC: nothing silent), said once for the whole sweep.
  std::vector<InputIdentity> inputs;
  std::vector<std::string> warnings;
  {
    const InputLog log;
    try {
      const Scenario base = load_scenario(file_, options.sets);
      if (slow_gpus_ > 0) axes.push_back(slow_gpu_axis(base, slow_gpus_));
      std::vector<std::string> keys;
      for (const Override& o : options.sets) keys.push_back(o.key);
      for (const GridAxis& a : axes) keys.push_back(a.key);
      // (The scenario's own warnings hold at every point unless the grid moves the cluster
      // or the model; each point's report says them then.)
      if (std::none_of(axes.begin(), axes.end(), [](const GridAxis& a) {
            return a.key.starts_with("cluster") || a.key.starts_with("model");
          }))
        warnings = scenario_warnings(base);
      for (std::string& w : what_if_warnings(base, keys)) warnings.push_back(std::move(w));
      if (slow_gpus_ > 0 && !base.cluster.slowdowns().empty())
        warnings.push_back(
            "--slow-gpus replaces the scenario's own cluster.slowdown at every point: one GPU "
            "at a time is slow, nothing else");
    } catch (const InputError&) {
      if (slow_gpus_ > 0) throw;  // its axis needs the scenario's GPUs
    }
    inputs = log.files();
  }
  if (job_ranks().rank == 0) {
    for (const std::string& w : warnings) err << "pipesim: warning: " << w << "\n";
  }
  // Only rank 0 writes, so only it checks the paths (before the sweep runs); the other
  // ranks learn whether it could, so that none waits for a sweep that will not run.
  OutputFiles files(inputs);
  if (csv_ == "-" && json_ == "-")
    throw InputError("--csv and --json both name standard output", "at most one '-'", "",
                     {"<command line>"});
  Sweep s;
  const bool writer = job_ranks().rank == 0;
  std::exception_ptr refused;
  try {
    if (writer && !json_.empty() && json_ != "-")
      files.add("--json", json_, [&](std::ostream& f) { f << json_text(to_json(s), 2) << "\n"; });
    if (writer && !csv_.empty() && csv_ != "-")
      files.add("--csv", csv_, [&](std::ostream& f) { write_sweep_csv(f, s); });
  } catch (...) {
    refused = std::current_exception();
  }
  if (!from_rank0(refused == nullptr)) {
    if (refused) std::rethrow_exception(refused);
    return 2;  // rank 0 says why
  }
  s = run_sweep(file_, axes, options);
  const bool all_failed = !s.points.empty() && s.failed == s.points.size();
  if (!writer) return all_failed ? 2 : 0;
  // The error line before the table (the sweep's progress lines, if any, came earlier).
  if (all_failed) {
    err << fmt::format("pipesim: error: every point of the sweep failed, the first with: {}{}\n",
                       s.points.front().error, files.empty() ? "" : " (no output file written)");
  }
  if (json_ == "-") {
    out << json_text(to_json(s), 2) << "\n";
  } else if (csv_ == "-") {
    write_sweep_csv(out, s);
  } else {
    out << sweep_table(s);
  }
  check_stdout(out);
  if (!all_failed) files.commit();  // a file of failures only would read as a result
  return all_failed ? 2 : 0;
}

}  // namespace pipesim
