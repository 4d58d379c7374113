// What a pipesim::api::LoadedScenario holds, and the library's errors as the API's: shared by
// the API's source files. Not installed.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/internal/simulation.h"
#include "api/pipesim.h"
#include "core/error.h"
#include "scenario/scenario.h"

namespace pipesim::api {

// The document the scenario was read from (or written from a ScenarioSpec), its settings,
// and the checked value the loader made of them.
struct LoadedScenarioState {
  std::shared_ptr<const ScenarioDocument> document;
  std::vector<Setting> settings;
  std::vector<Override> overrides;  // the same, as the loader takes them
  pipesim::Scenario value;
};

const LoadedScenario::Impl& impl(const LoadedScenario& s);

// The library's InputError as the API's Error (FileNotFound for a missing file).
[[noreturn]] void rethrow(const InputError& e);

// Runs `f` with the library's errors as the API's.
template <typename F>
auto translated(F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const InputError& e) {
    rethrow(e);
  }
}

// The same, where an error without a location comes from the scenario `source`.
template <typename F>
auto guarded(const std::string& source, F&& f) {
  return translated([&] { return at_scenario(source == "<default>" ? "" : source, f); });
}

}  // namespace pipesim::api
