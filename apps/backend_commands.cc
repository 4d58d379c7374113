#include "apps/backend_commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "api/internal/report_fields.h"
#include "backend/cuda_plugin.h"
#include "backend/executors.h"
#include "backend/profile.h"
#include "backend/validate.h"
#include "backend/validation_sweep.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_text.h"
#include "core/output_files.h"
#include "scenario/setup.h"
#include "sim/engine.h"

namespace pipesim {
namespace {

std::vector<Override> overrides(const std::vector<std::string>& sets) {
  std::vector<Override> o;
  for (const auto& s : sets) o.push_back(parse_override(s));
  return o;
}

std::unique_ptr<Executor> make_executor(const std::string& backend, const std::string& scale,
                                        const Scenario& s) {
  if (auto e = make_cpu_executor(backend, scale, s, "--time-scale", {"<command line>"})) return e;
  return load_cuda_executor(s, "--backend", {"<command line>"});
}

}  // namespace

BackendCommands::BackendCommands(CLI::App& app) {
  profile_cmd_ = app.add_subcommand(
      "profile", "measure every layer's forward and backward on a backend; write a CSV profile");
  validate_cmd_ = app.add_subcommand(
      "validate", "run the scenario's TaskGraph on a backend and compare it with the simulation");
  for (CLI::App* c : {profile_cmd_, validate_cmd_}) {
    c->add_option("scenario", scenario_, "scenario YAML file")->required();
    c->add_option("--backend", backend_,
                  "host (CPU threads, the default), torch (PyTorch processes over gloo) or cuda")
        ->check(CLI::IsMember({"host", "torch", "cuda"}));
    c->add_option("--set", sets_, "override a scenario key (repeatable)")->take_all()->expected(1);
    c->add_option("--time-scale", time_scale_,
                  "host backend: wall seconds per scenario second, or auto (the median op "
                  "lasts 5 ms, the run at most 1 s)");
  }
  profile_cmd_
      ->add_option("--out", out_,
                   "the profile to write, CSV whatever the name (model: {profile: F} reads it)")
      ->required();
  profile_cmd_->add_option("--repeats", repeats_, "runs per layer op, median kept (default 5)")
      ->check(CLI::Range(1, 1000));
  validate_cmd_->add_option("--json", json_, "write the comparison as JSON to F ('-' for stdout)");
  validate_cmd_
      ->add_option("--iterations", iterations_,
                   "timed runs in each of the two sets compared for the noise floor (default 10)")
      ->check(CLI::Range(1, 1000));
  validate_cmd_->add_option("--warmup", warmup_, "untimed runs first (default 1)")
      ->check(CLI::Range(0, 1000));
  validate_cmd_->add_flag("--calibrate", calibrate_,
                          "also predict from each compute op timed alone (calibrated prediction)");
  validate_cmd_->add_flag("--sweep", sweep_,
                          "validate a grid: schedules x stages x micro-batches x link speeds");
  validate_cmd_
      ->add_option("--schedules", schedules_, "sweep: schedules (default gpipe,dapple,pipedream)")
      ->delimiter(',');
  validate_cmd_->add_option("--stages", stages_, "sweep: pipeline depths (default 2,4,8)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  validate_cmd_
      ->add_option("--micro-batches", micro_batches_, "sweep: micro-batches (default 4,8,16)")
      ->delimiter(',')
      ->check(CLI::Range(1, 100000));
  validate_cmd_->add_option("--links", links_,
                            "sweep: KEY=A,B, the scenario key of the link speed and its values "
                            "(default cluster.intra_node.bandwidth=64 GB/s,8 GB/s)");
  validate_cmd_->add_flag("--quiet", quiet_, "no progress lines on stderr");
}

bool BackendCommands::parsed() const {
  return profile_cmd_->parsed() || validate_cmd_->parsed();
}

int BackendCommands::run(std::ostream& out, std::ostream& err) const {
  try {
    for (const auto* path : {&out_, &json_}) {
      if (path->empty() && ((path == &out_ && profile_cmd_->parsed()) ||
                            (path == &json_ && validate_cmd_->count("--json") > 0)))
        throw InputError("the output path is empty", "a file path",
                         path == &out_ ? "--out" : "--json", {"<command line>"});
    }
    return profile_cmd_->parsed() ? profile(out) : validate(out, err);
  } catch (InputError& e) {
    e.set_location_if_empty({scenario_});
    throw;
  }
}

int BackendCommands::profile(std::ostream& out) const {
  const InputLog log;
  const Scenario s = load_scenario(scenario_, overrides(sets_));
  const std::unique_ptr<Executor> e = make_executor(backend_, time_scale_, s);
  const Model m = profile_model(s, *e, repeats_);
  OutputFiles files(log.files());
  files.add("--out", out_, [&](std::ostream& f) { write_profile_csv(f, m); });
  out << fmt::format("profiled {} layers on {}\n", m.layers.size(), e->description());
  check_stdout(out);
  files.commit();
  return 0;
}

int BackendCommands::validate(std::ostream& out, std::ostream& err) const {
  const InputLog log;
  const std::vector<Override> o = overrides(sets_);
  ValidateOptions options{warmup_, iterations_};
  options.calibrate = calibrate_;
  std::string text, table;
  if (sweep_) {
    ValidationGrid grid;
    if (!schedules_.empty()) grid.schedules = schedules_;
    if (!stages_.empty()) grid.stages = stages_;
    if (!micro_batches_.empty()) grid.micro_batches = micro_batches_;
    if (!links_.empty()) {
      const std::string& first = links_.front();
      const size_t eq = first.find('=');
      if (eq == std::string::npos || eq == 0)
        throw InputError(fmt::format("'{}' is not KEY=A,B", first),
                         "a scenario key, '=', then link speeds separated by commas", "--links",
                         {"<command line>"});
      grid.link_key = first.substr(0, eq);
      grid.links = {first.substr(eq + 1)};
      grid.links.insert(grid.links.end(), links_.begin() + 1, links_.end());
    }
    const ValidationSweep r = validation_sweep(
        scenario_, o, grid,
        [&](const Scenario& s) { return make_executor(backend_, time_scale_, s); }, options,
        quiet_ ? nullptr : &err);
    nlohmann::ordered_json j = to_json(r);
    add_version_and_overrides(j, o);
    text = json_text(j, 2) + "\n";
    table = validation_sweep_table(r);
  } else {
    const Scenario s = load_scenario(scenario_, o);
    const std::unique_ptr<Executor> e = make_executor(backend_, time_scale_, s);
    const Validation v = pipesim::validate(s, *e, options);
    nlohmann::ordered_json j = to_json(v);
    add_version_and_overrides(j, o);
    text = json_text(j, 2) + "\n";
    table = validation_table(v);
  }
  OutputFiles files(log.files());
  if (json_ == "-") {
    out << text;
  } else {
    if (!json_.empty()) files.add("--json", json_, [&](std::ostream& f) { f << text; });
    out << table;
  }
  check_stdout(out);
  files.commit();
  return 0;
}

}  // namespace pipesim
