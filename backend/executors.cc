#include "backend/executors.h"

#include <fmt/format.h>

#include "backend/host_backend.h"
#include "backend/torch_backend.h"
#include "scenario/setup.h"
#include "sim/engine.h"

namespace pipesim {

double backend_time_scale(const std::string& text, const Scenario& s, bool torch,
                          const std::string& key, const Location& where) {
  if (text == "auto") {
    const TaskGraph g = scenario_task_graph(s, true);
    const Time makespan = simulate(g, s.cluster).makespan;
    return torch ? torch_auto_time_scale(g, makespan) : auto_time_scale(g, makespan);
  }
  double v = 0;
  try {
    size_t used = 0;
    v = std::stod(text, &used);
    if (used != text.size()) v = 0;
  } catch (const std::exception&) {
    v = 0;
  }
  if (!(v >= 1e-6 && v <= 1e3))
    throw InputError(fmt::format("'{}' is not a time scale", text),
                     "auto, or wall seconds per scenario second from 1e-6 to 1000", key, where);
  return v;
}

std::unique_ptr<Executor> make_cpu_executor(const std::string& backend, const std::string& scale,
                                            const Scenario& s, const std::string& scale_key,
                                            const Location& where) {
  if (backend == "host")
    return std::make_unique<HostExecutor>(
        s.cluster, HostOptions{backend_time_scale(scale, s, false, scale_key, where)});
  if (backend == "torch")
    return make_torch_executor(s,
                               TorchOptions{backend_time_scale(scale, s, true, scale_key, where)});
  return nullptr;
}

}  // namespace pipesim
