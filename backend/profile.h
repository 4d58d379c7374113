// `pipesim profile`: every layer's forward and backward measured on a backend, at the
// resources of the stage that holds it, written as a CSV profile `model: {profile: F}` reads.
#pragma once

#include <ostream>

#include "backend/executor.h"
#include "scenario/scenario.h"

namespace pipesim {

// The scenario's model with forward, backward (or its input and weight halves) measured:
// each the median of `repeats` runs of the layer alone on the first device of its stage.
// Sizes, parameters and optimizer times are the scenario's.
Model profile_model(const Scenario& s, Executor& e, int repeats = 5);

// One row per layer: name, forward, backward (or backward_input, backward_weight),
// activation, output, params, optimizer; every cell with its unit.
void write_profile_csv(std::ostream& out, const Model& m);

}  // namespace pipesim
