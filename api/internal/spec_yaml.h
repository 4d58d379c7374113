// A ScenarioSpec written as the scenario file it stands for, so the YAML front end checks
// it as it checks a file (and sweeps can set any key of it). Not installed.
#pragma once

#include <string>

#include "api/pipesim.h"

namespace pipesim::api {

// The source of a scenario built in code, in errors and reports.
inline constexpr const char* kCodeSource = "<code>";

// The spec's fields in their sections, each as written in a scenario file; an unset field
// is left out. `settings` are not written: they are applied as --set is.
std::string spec_yaml(const ScenarioSpec& spec);

}  // namespace pipesim::api
