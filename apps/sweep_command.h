// `pipesim sweep` (SPEC section 7): a scenario at every point of a what-if grid.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace pipesim {

class SweepCommand {
 public:
  // Adds the subcommand to `app`; its output options join `output_options` (checked for
  // empty paths by the caller).
  SweepCommand(CLI::App& app, std::vector<const CLI::Option*>& output_options);

  bool parsed() const { return cmd_->parsed(); }
  const std::string& scenario() const { return file_; }
  // Exit code; throws InputError for bad input. Under MPI only rank 0 writes.
  int run(std::ostream& out, std::ostream& err) const;

 private:
  CLI::App* cmd_;
  std::string file_, json_, csv_;
  std::vector<std::string> grids_, sets_;
  double slow_gpus_ = 0;  // --slow-gpus: 0 when not given
  bool zip_ = false, quiet_ = false;
  int threads_ = 0;
};

}  // namespace pipesim
