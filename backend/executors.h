// Executors by name, for `pipesim validate|profile` and the public API's validate: the host
// backend (CPU threads) and the torch backend (PyTorch processes); the CUDA backend is
// cuda/'s, where it was built.
#pragma once

#include <memory>
#include <string>

#include "backend/executor.h"
#include "core/error.h"
#include "scenario/scenario.h"

namespace pipesim {

// Wall seconds per scenario second: "auto" (the median op lasts 5 ms, the run at most 1 s;
// the torch backend's own rule) or a number from 1e-6 to 1000. A bad value is an InputError
// naming `key` at `where`.
double backend_time_scale(const std::string& text, const Scenario& s, bool torch,
                          const std::string& key, const Location& where);

// "host" or "torch" with that time scale; nullptr for any other name.
std::unique_ptr<Executor> make_cpu_executor(const std::string& backend, const std::string& scale,
                                            const Scenario& s, const std::string& scale_key,
                                            const Location& where);

}  // namespace pipesim
