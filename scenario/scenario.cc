#include "scenario/scenario.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/input_file.h"
#include "scenario/default_scenario.h"
#include "scenario/internal/reader.h"
#include "scenario/internal/sections.h"
#include "scenario/work_estimate.h"

namespace pipesim {
namespace {

using internal::apply_override;
using internal::parse_yaml;
using internal::read_cluster;
using internal::read_model_section;
using internal::read_strategy;
using internal::read_training;
using internal::Reader;
using internal::set_optimizer_step;

Scenario load(YAML::Node root, const std::string& source, const std::vector<Override>& overrides) {
  std::vector<std::string> overridden;
  for (const Override& o : overrides) {
    try {
      apply_override(root, o);
    } catch (const YAML::Exception& e) {
      throw InputError(fmt::format("invalid YAML value '{}': {}", o.value, e.msg),
                       "a YAML scalar, list or mapping", o.key, {"--set"});
    }
    overridden.push_back(o.key);
  }
  const Reader r(source, overridden);
  const std::vector<std::string> keys{"name", "cluster", "model", "training", "strategy"};
  // The file may be anything the user pointed at: say what it is, never quote it.
  if (!root.IsMap())
    r.fail(root, "", fmt::format("a scenario must be a mapping, got {}", Reader::shape(root)),
           "keys: " + internal::join(keys));
  if (std::none_of(keys.begin(), keys.end(),
                   [&](const std::string& k) { return root[k].IsDefined(); }))
    r.fail(root, "", "this file is not a scenario: it has none of the scenario's keys",
           "keys: " + internal::join(keys));
  r.expect_map(root, "", keys);
  Scenario sc{.name = {},
              .source = source,
              .cluster = read_cluster(r, r.require(root, "", "cluster")),
              .model = {},
              .training = {},
              .strategy = {},
              .placement_policy = PlacementPolicy::kAppendFirst,
              .explicit_placement = false,
              .placement = {},
              .micro_batches = 1,
              .user_order = {},
              .user_order_at = {}};
  sc.name = root["name"].IsDefined() ? r.scalar(root["name"], "name")
                                     : lossy_utf8(std::filesystem::path(source).stem().string());
  const YAML::Node training = r.require(root, "", "training");
  sc.training = read_training(r, training);
  if (sc.training.precision == Precision::kFp8) {
    for (const Device& d : sc.cluster.devices()) {
      if (d.gpu.fp8_flops > 0) continue;
      r.fail(training["precision"], "training.precision",
             fmt::format("GPU '{}' ({}) has no fp8 peak", d.gpu.name, d.name),
             "mixed or bf16, or GPUs with fp8 (h100-80gb, h200, b200, gb200, mi300x, or fp8_peak "
             "in the GPU mapping)");
    }
  }
  const YAML::Node model = r.require(root, "", "model");
  sc.model = read_model_section(r, model, sc.training, sc.cluster.device(0).gpu, false);
  set_optimizer_step(sc.model, sc.training, sc.cluster.device(0).gpu);
  const YAML::Node strategy = r.require(root, "", "strategy");
  read_strategy(r, strategy, training, sc);
  // Before anything is built: refuse a run too large to simulate.
  r.at(strategy, "strategy", [&] { check_work(estimate_work(sc)); });
  return sc;
}

}  // namespace

Scenario load_scenario_text(const std::string& yaml, const std::string& source,
                            const std::vector<Override>& overrides) {
  return load(parse_yaml(yaml, source), source, overrides);
}

Scenario load_scenario_file(const std::string& path, const std::vector<Override>& overrides) {
  return load_scenario_text(read_input_file(path, "the scenario file", "a readable YAML file"),
                            path, overrides);
}

Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides) {
  return path.empty() ? load_default_scenario(overrides) : load_scenario_file(path, overrides);
}

const char* default_scenario_yaml() {
  return internal::kDefaultScenarioYaml;
}

Scenario load_default_scenario(const std::vector<Override>& overrides) {
  return load_scenario_text(default_scenario_yaml(), "<default>", overrides);
}

}  // namespace pipesim
