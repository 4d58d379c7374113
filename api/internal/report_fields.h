// Fields every JSON report of the command line carries (SPEC section 5): pipesim's version
// and the --set overrides applied, as the run report writes them.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "scenario/scenario.h"

namespace pipesim {

inline void add_version_and_overrides(nlohmann::ordered_json& j,
                                      const std::vector<Override>& overrides) {
  j["version"] = PIPESIM_VERSION;
  nlohmann::ordered_json sets = nlohmann::ordered_json::object();
  for (const Override& o : overrides) sets[o.key] = o.value;
  j["overrides"] = sets;
}

}  // namespace pipesim
