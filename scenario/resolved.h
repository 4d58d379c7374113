// `pipesim run --resolved F`: the scenario as it was simulated, written back as YAML.
#pragma once

#include <string>
#include <vector>

#include "scenario/scenario.h"

namespace pipesim {

// The scenario document of `sc` (re-read from sc.source, or the embedded default) with the
// overrides applied and its shorthands expanded: the name given explicitly, `pipeline: N`
// replaced by the stages it chose, a placement policy by the device lists it chose, and
// the files the model names made absolute, so the result runs from any directory. Loading
// it gives the same scenario, and simulating it the same report.
std::string resolved_scenario_yaml(const Scenario& sc, const std::vector<Override>& overrides);
// The same from the document's text `sc` was loaded from.
std::string resolved_scenario_yaml(const Scenario& sc, const std::string& text,
                                   const std::vector<Override>& overrides);

}  // namespace pipesim
