// The built-in model zoo: the YAML files of scenarios/models/, compiled into the binary so
// `model: {include: NAME}` works wherever pipesim runs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pipesim {

// The YAML text of a built-in model, or nullptr.
const char* find_zoo_model(std::string_view name);
std::vector<std::string> zoo_model_names();

}  // namespace pipesim
