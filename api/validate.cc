// pipesim::api::validate: the scenario run for real on a backend and compared with its
// simulation, as `pipesim validate` does.
#include "backend/validate.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "api/internal/report_fields.h"
#include "api/internal/scenario_impl.h"
#include "api/pipesim.h"
#include "backend/cuda_plugin.h"
#include "backend/executors.h"
#include "core/json_text.h"

namespace pipesim::api {

ValidateResult validate(const LoadedScenario& scenario, const ValidateConfig& options) {
  const std::string call = "pipesim.validate";
  if (!(options.warmup >= 0 && options.warmup <= 1000))
    throw Error(fmt::format("warmup {} is out of range", options.warmup), "0 to 1000", "warmup",
                call);
  if (!(options.iterations >= 1 && options.iterations <= 1000))
    throw Error(fmt::format("iterations {} is out of range", options.iterations), "1 to 1000",
                "iterations", call);
  const LoadedScenario::Impl& s = impl(scenario);
  return guarded(scenario.source(), [&] {
    std::unique_ptr<Executor> e =
        make_cpu_executor(options.backend, options.time_scale, s.value, "time_scale", {call});
    if (!e && options.backend == "cuda") e = load_cuda_executor(s.value, "backend", {call});
    if (!e)
      throw InputError(fmt::format("unknown backend '{}'", options.backend), "host, torch or cuda",
                       "backend", {call});
    pipesim::ValidateOptions o{options.warmup, options.iterations};
    o.calibrate = options.calibrate;
    const Validation v = pipesim::validate(s.value, *e, o);
    nlohmann::ordered_json j = to_json(v);
    add_version_and_overrides(j, s.overrides);
    return ValidateResult{
        .backend = v.backend,
        .measured_makespan_s = v.measured_s,
        .noise_floor = v.noise_floor,
        .predicted_makespan_s = v.predicted_s,
        .predicted_error = v.predicted_error,
        .replay_makespan_s = v.replay_s,
        .replay_error = v.replay_error,
        .calibrated_makespan_s = v.calibrated ? std::optional(v.calibrated_s) : std::nullopt,
        .calibrated_error = v.calibrated ? std::optional(v.calibrated_error) : std::nullopt,
        .peaks_equal = v.peaks_equal,
        .json = json_text(j, 2) + "\n"};
  });
}

}  // namespace pipesim::api
