// Mixed GPUs and stragglers (SPEC section 10): how fast each GPU runs each stage.
//
// The model is priced once, on device 0's GPU. A GPU of another kind runs global stage g in
// the stage's layers' time on its own GPU (Scenario::kind_layer_time) over their time on
// device 0's; a straggler (`cluster.slowdown`, Device::slowdown) multiplies that again. The
// lowering stretches every compute op of the stage on that device by the product
// (LoweringInput::compute_scale), and `pipeline: N` splits the layers so that each stage's
// slowest GPU takes about as long as every other's.
#pragma once

#include <vector>

#include "scenario/scenario.h"

namespace pipesim {

class DeviceSpeed {
 public:
  explicit DeviceSpeed(const Scenario& s);
  // True when every GPU runs every stage at its profile's pace.
  bool uniform() const { return uniform_; }
  // How many times its profile's time global stage `stage` takes on `device`.
  double scale(int device, int stage) const;

 private:
  bool uniform_ = true;
  std::vector<int> kind_;                   // [device]
  std::vector<double> slowdown_;            // [device]
  std::vector<std::vector<double>> ratio_;  // [kind][global stage]
};

// `pipeline: N` on GPUs of different speeds: the split of the model into the strategy's
// global stages that balances each stage's slowest GPU (schedules/partition.h), on the
// scenario's placement. The stages' other fields are kept.
std::vector<StageSpec> speed_balanced_stages(const Scenario& s);

}  // namespace pipesim
