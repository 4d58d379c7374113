// Scenario loading (SPEC sections 2 and 3): YAML -> Cluster + Model + Training + Strategy.
//
// Every key is checked: unknown keys are errors with a "did you mean", quantities need
// units, counts must be whole numbers, and the strategy must fit the model and cluster.
// Errors are InputError with file, line, column and the dotted key path.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "schedules/model.h"
#include "schedules/order.h"
#include "topology/cluster.h"
#include "topology/placement.h"

namespace pipesim {

// `--set KEY=VALUE`: KEY is a dotted path (list items by index), VALUE is parsed as YAML.
struct Override {
  std::string key;
  std::string value;
};
Override parse_override(const std::string& text);  // "a.b=c"; throws InputError

struct Scenario {
  std::string name;
  std::string source;  // file path, or "<default>"
  Cluster cluster;
  Model model;
  Training training;
  Strategy strategy;
  PlacementPolicy placement_policy = PlacementPolicy::kAppendFirst;
  bool explicit_placement = false;
  // [copy][stage] -> device index per replica, resolved from the policy or the lists.
  std::vector<std::vector<std::vector<int>>> placement;
  int64_t micro_batches = 1;  // per iteration per pipeline copy
  // Mixed GPUs (SPEC section 10): `model` is priced on device 0's GPU; kind_layer_time[k][l]
  // is layer l's forward + backward time on the k-th kind of GPU in the cluster (kind 0:
  // device 0's), device_kind[d] the kind of device d. Empty when every GPU is alike.
  std::vector<std::vector<Time>> kind_layer_time;
  std::vector<int> device_kind;
  ScheduleOrder user_order;  // parsed strategy.order, one list per position; empty if none
  Location user_order_at;    // where strategy.order was written, for deadlock reports
};

Scenario load_scenario_file(const std::string& path, const std::vector<Override>& overrides = {});
Scenario load_scenario_text(const std::string& yaml, const std::string& source,
                            const std::vector<Override>& overrides = {});
Scenario load_default_scenario(const std::vector<Override>& overrides = {});
// The file, or the embedded default when `path` is empty.
Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides = {});
const char* default_scenario_yaml();

}  // namespace pipesim
