// `pipesim model`: the model's per-layer (and per-op) costs, sizes and their sources.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/input_file.h"
#include "scenario/scenario.h"

namespace pipesim {

// Writes the table to `out` (or the JSON, with json_path "-"); `inputs`: the files the
// scenario was read from, which no output may replace. With `with_ops`, each layer's ops,
// and where the strategy splits layers over ranks (tensor, context or expert parallelism)
// one rank's share of each op beside the whole op's time (Layer::rank_ops).
int model_command(const Scenario& sc, const std::vector<InputIdentity>& inputs,
                  const std::string& json_path, bool with_ops, std::ostream& out);

}  // namespace pipesim
