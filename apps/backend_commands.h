// `pipesim profile` and `pipesim validate` (SPEC section 8): the commands that run a
// scenario on a real backend (the host's CPU threads, or a CUDA GPU where built with nvcc).
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace pipesim {

class BackendCommands {
 public:
  explicit BackendCommands(CLI::App& app);  // registers both subcommands
  bool parsed() const;
  int run(std::ostream& out, std::ostream& err) const;  // throws InputError and the like

 private:
  int profile(std::ostream& out) const;
  int validate(std::ostream& out, std::ostream& err) const;
  CLI::App* profile_cmd_ = nullptr;
  CLI::App* validate_cmd_ = nullptr;
  std::string scenario_, backend_ = "host", out_, json_, time_scale_ = "auto";
  std::vector<std::string> sets_;
  int repeats_ = 5, iterations_ = 10, warmup_ = 1;
  bool sweep_ = false, quiet_ = false, calibrate_ = false;
  std::vector<std::string> schedules_, links_;
  std::vector<int> stages_, micro_batches_;
};

}  // namespace pipesim
