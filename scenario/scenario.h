// Scenario loading (SPEC sections 2 and 3): YAML -> Cluster + Model + Training + Strategy.
//
// Every key is checked: unknown keys are errors with a "did you mean", quantities need
// units, counts must be whole numbers, and the strategy must fit the model and cluster.
// Errors are InputError with file, line, column and the dotted key path.
#pragma once

#include <functional>
#include <optional>
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

// Where a strategy's GPUs come from (strategy.placement): a policy, or device lists.
struct StrategyPlacement {
  PlacementPolicy policy = PlacementPolicy::kAppendFirst;
  bool given_lists = false;
  // One list per stage of each pipeline copy, copy after copy (and each copy's context
  // ranks): device indices, replica by replica, tensor rank by tensor rank.
  std::vector<std::vector<int>> lists;
};

// A model priced again for other training settings on a GPU: the YAML front end keeps its
// model section for this (another micro-batch, another kind of GPU).
using ModelPricer = std::function<Model(const Training&, const GpuSpec&)>;

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
  Location strategy_at;      // where the strategy was written, for runs too large to build
  // strategy.pipeline when the stages came from it (split again when the model is priced
  // again); 0 when the stages were given.
  int pipeline = 0;
  // Prices `model` for other training settings; empty for a model built in code, whose
  // layers are what they are (with_micro_batch then refuses another micro-batch).
  ModelPricer price_model;
  // What reading the file found worth a warning (a default the user may not mean); the
  // report's warnings list these first.
  std::vector<std::string> input_warnings;
};

Scenario load_scenario_file(const std::string& path, const std::vector<Override>& overrides = {});
Scenario load_scenario_text(const std::string& yaml, const std::string& source,
                            const std::vector<Override>& overrides = {});
Scenario load_default_scenario(const std::vector<Override>& overrides = {});
// The file, or the embedded default when `path` is empty.
Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides = {});
const char* default_scenario_yaml();

// A scenario file read once (the embedded default when `path` is empty): each load applies
// its overrides to the same text, whatever happens to the file meanwhile (a sweep's points).
class ScenarioDocument {
 public:
  explicit ScenarioDocument(const std::string& path);
  // YAML text; `source` names it in errors and reports as a file path would.
  static ScenarioDocument of_text(std::string text, std::string source);
  Scenario load(const std::vector<Override>& overrides = {}) const;
  const std::string& source() const { return source_; }
  const std::string& text() const { return text_; }

 private:
  ScenarioDocument() = default;
  std::string text_, source_;
};

// A scenario is a value: these give another one with one part changed, checked as the YAML
// front end checks a written one (SPEC section 3), with its work within the limits. An
// InputError names the strategy or training key and no file.
//
// `strategy` (and its GPUs) in place of the scenario's own; with `micro_batch`, the model
// priced again at that many samples first (Scenario::price_model).
Scenario with_strategy(const Scenario& s, const Strategy& strategy,
                       const StrategyPlacement& gpus = {},
                       std::optional<int64_t> micro_batch = std::nullopt);
// A strategy section written in YAML (`source` names it in errors) in place of the
// scenario's own, read as the file's would be.
Scenario with_strategy_yaml(const Scenario& s, const std::string& yaml, const std::string& source);
// The model priced again at `micro_batch` samples (Scenario::price_model), the stages of
// `pipeline: N` split again, the strategy checked again.
Scenario with_micro_batch(const Scenario& s, int64_t micro_batch);
// What the scenario's placement was asked as: its policy, or its device lists.
StrategyPlacement placement_request(const Scenario& s);

}  // namespace pipesim
