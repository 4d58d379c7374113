#include "backend/cuda_plugin.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace pipesim {
namespace {

// cuda/plugin.cc's entry point: 0 with *out set, 1 with *problem and *allowed for bad input
// (no device), 2 with *problem for anything else.
using MakeExecutor = int (*)(const Scenario*, std::unique_ptr<Executor>*, std::string*,
                             std::string*);
constexpr const char* kEntry = "pipesim_cuda_executor_v1";

std::vector<std::filesystem::path> candidates() {
  if (const char* env = std::getenv("PIPESIM_CUDA_PLUGIN"); env != nullptr && *env != 0)
    return {env};
  std::vector<std::filesystem::path> out;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&load_cuda_executor), &info) != 0 &&
      info.dli_fname != nullptr) {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::canonical(info.dli_fname, ec);
    if (!ec) {
      const std::filesystem::path dir = self.parent_path();
      out.push_back(dir / kCudaPluginName);
      out.push_back(dir.parent_path() / "lib" / "pipesim" / kCudaPluginName);
      out.push_back(dir.parent_path().parent_path() / "pipesim" / kCudaPluginName);
      out.push_back(dir.parent_path() / kCudaPluginName);  // the build tree's python/
    }
  }
#ifdef PIPESIM_PLUGIN_DIR
  out.push_back(std::filesystem::path(PIPESIM_PLUGIN_DIR) / kCudaPluginName);
#endif
  return out;
}

// Opens the plugin once (it is never closed: the executors' code lives in it).
MakeExecutor entry(const std::string& key, const Location& where) {
  static std::mutex mutex;
  static MakeExecutor found = nullptr;
  const std::lock_guard<std::mutex> lock(mutex);
  if (found != nullptr) return found;
  std::string why;
  std::vector<std::string> looked;
  for (const std::filesystem::path& path : candidates()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      looked.push_back(path.string());
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      why = fmt::format("{} could not be opened: {}", path.string(), e != nullptr ? e : "?");
      continue;
    }
    found = reinterpret_cast<MakeExecutor>(dlsym(handle, kEntry));
    if (found != nullptr) return found;
    why = fmt::format("{} has no {}", path.string(), kEntry);
  }
  if (why.empty())
    why = fmt::format("{} was not found (looked at {}); pipesim builds it only where nvcc is found",
                      kCudaPluginName, fmt::join(looked, ", "));
  throw InputError(fmt::format("the CUDA backend is not available: {}", why),
                   "host or torch; cuda needs a build with nvcc, an NVIDIA GPU, and the "
                   "plugin beside the program or at $PIPESIM_CUDA_PLUGIN",
                   key, where);
}

}  // namespace

std::unique_ptr<Executor> load_cuda_executor(const Scenario& s, const std::string& key,
                                             const Location& where) {
  const MakeExecutor make = entry(key, where);
  std::unique_ptr<Executor> out;
  std::string problem, allowed;
  const int rc = make(&s, &out, &problem, &allowed);
  if (rc == 0 && out) return out;
  if (rc == 1) throw InputError(problem, allowed, key, where);
  throw std::runtime_error(fmt::format("the CUDA backend failed: {}", problem));
}

}  // namespace pipesim
