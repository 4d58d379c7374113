// The CUDA backend, opened at run time: cuda/ builds it as a plugin (libpipesim-cuda.so)
// where nvcc is found, and nothing else links it, so a program that never asks for
// `--backend cuda` maps no CUDA library.
#pragma once

#include <memory>
#include <string>

#include "backend/executor.h"
#include "core/error.h"
#include "scenario/scenario.h"

namespace pipesim {

// The plugin's file name, and where it is looked for: $PIPESIM_CUDA_PLUGIN when set (that
// path alone); else beside the program or library holding this code, in ../lib/pipesim
// and ../../pipesim from it (an installed program, an installed Python module), and in the
// installed library directory's pipesim/.
inline constexpr const char* kCudaPluginName = "libpipesim-cuda.so";

// An executor of the CUDA backend for `s`. Throws InputError naming `key` at `where` when
// the plugin is not there, cannot be opened (its CUDA libraries missing), or finds no
// CUDA device.
std::unique_ptr<Executor> load_cuda_executor(const Scenario& s, const std::string& key,
                                             const Location& where);

}  // namespace pipesim
