// The CUDA backend as a plugin (libpipesim-cuda.so), opened by backend/cuda_plugin.cc when
// a command asks for `--backend cuda`: its one entry point, with C linkage so the loader
// finds it by name. Errors cross as text, not as exceptions.
#include <exception>
#include <memory>
#include <string>

#include "core/error.h"
#include "cuda/cuda_executor.h"

extern "C" __attribute__((visibility("default"))) int pipesim_cuda_executor_v1(
    const pipesim::Scenario* s, std::unique_ptr<pipesim::Executor>* out, std::string* problem,
    std::string* allowed) {
  try {
    *out = pipesim::make_cuda_executor(*s);
    return 0;
  } catch (const pipesim::InputError& e) {
    *problem = e.problem();
    *allowed = e.allowed();
    return 1;
  } catch (const std::exception& e) {
    *problem = e.what();
    return 2;
  }
}
