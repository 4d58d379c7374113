#include "scenario/scenario.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <mutex>

#include "core/checked.h"
#include "core/error.h"
#include "core/input_file.h"
#include "scenario/default_scenario.h"
#include "scenario/device_speed.h"
#include "scenario/internal/locator.h"
#include "scenario/internal/reader.h"
#include "scenario/internal/sections.h"
#include "scenario/work_estimate.h"
#include "schedules/partition.h"

namespace pipesim {
namespace {

using internal::apply_override;
using internal::Locator;
using internal::parse_yaml;
using internal::read_cluster;
using internal::read_model_section;
using internal::read_strategy;
using internal::read_training;
using internal::Reader;
using internal::set_optimizer_step;

bool same_speed(const GpuSpec& a, const GpuSpec& b) {
  return a.name == b.name && a.peak_flops == b.peak_flops &&
         a.peak_fp32_flops == b.peak_fp32_flops && a.vector_flops == b.vector_flops &&
         a.fp8_flops == b.fp8_flops && a.fp4_flops == b.fp4_flops &&
         a.hbm_bytes_per_s == b.hbm_bytes_per_s && a.efficiency == b.efficiency &&
         a.clock_share() == b.clock_share() && a.curves == b.curves &&
         a.curves_note == b.curves_note && a.matrix_efficiency == b.matrix_efficiency &&
         a.vector_efficiency == b.vector_efficiency && a.memory_efficiency == b.memory_efficiency &&
         a.fp8_efficiency == b.fp8_efficiency && a.fp4_efficiency == b.fp4_efficiency &&
         a.attention_efficiency == b.attention_efficiency &&
         a.triton_attention_efficiency == b.triton_attention_efficiency &&
         a.launch_overhead == b.launch_overhead && a.comm_interference == b.comm_interference;
}

double precision_peak(const GpuSpec& g, Precision p) {
  return p == Precision::kFp32    ? g.peak_fp32_flops
         : p == Precision::kFp8   ? g.fp8_flops
         : p == Precision::kNvfp4 ? g.fp4_flops
                                  : g.peak_flops;
}

// Mixed GPUs (SPEC section 10): the model priced again on every other kind of GPU in the
// cluster (Scenario::kind_layer_time). Layers with given or measured times follow the
// ratio of the GPUs' peaks in the training precision, and say so.
void price_gpu_kinds(Scenario& sc) {
  sc.kind_layer_time.clear();
  sc.device_kind.clear();
  std::vector<const GpuSpec*> kinds{&sc.cluster.device(0).gpu};
  std::vector<int> device_kind;
  for (const Device& d : sc.cluster.devices()) {
    size_t k = 0;
    while (k < kinds.size() && !same_speed(*kinds[k], d.gpu)) ++k;
    if (k == kinds.size()) kinds.push_back(&d.gpu);
    device_kind.push_back(static_cast<int>(k));
  }
  if (kinds.size() == 1) return;
  // Each kind prices the model again: a cluster of a few kinds, as real ones are.
  constexpr size_t kMaxKinds = 16;
  if (kinds.size() > kMaxKinds)
    throw InputError(fmt::format("more than {} kinds of GPU", kMaxKinds),
                     fmt::format("at most {} different GPUs (presets or mappings)", kMaxKinds),
                     "cluster");
  sc.device_kind = std::move(device_kind);
  const auto time = [](const Layer& l) { return l.forward + l.backward_input + l.backward_weight; };
  for (size_t k = 0; k < kinds.size(); ++k) {
    std::vector<Time> times;
    const Model m = k == 0 || !sc.price_model ? Model{} : sc.price_model(sc.training, *kinds[k]);
    for (size_t l = 0; l < sc.model.layers.size(); ++l) {
      const Layer& x = sc.model.layers[l];
      if (k == 0) {
        times.push_back(time(x));
      } else if (x.source == "analytic" && l < m.layers.size()) {
        times.push_back(time(m.layers[l]));
      } else {
        // (Each at the clock its power limit leaves it.)
        const auto peak = [&](const GpuSpec& g) {
          return precision_peak(g, sc.training.precision) * g.clock_share();
        };
        const double own = peak(*kinds[k]);
        const double ratio = own > 0 ? peak(*kinds[0]) / own : 1.0;
        times.push_back(checked_scale(time(x), ratio, "a layer's time on another kind of GPU"));
      }
    }
    sc.kind_layer_time.push_back(std::move(times));
  }
}

// The model section kept for pricing again (Scenario::price_model). Its reads are
// serialised: one document's nodes are not to be read by two threads at once.
ModelPricer model_pricer(const Reader& r, const YAML::Node& model) {
  auto lock = std::make_shared<std::mutex>();
  return [r, model, lock](const Training& t, const GpuSpec& gpu) {
    const std::lock_guard<std::mutex> hold(*lock);
    return read_model_section(r, model, t, gpu, false);
  };
}

// The model priced (again) for sc.training on its GPUs.
void price(Scenario& sc) {
  const GpuSpec& gpu = sc.cluster.device(0).gpu;
  sc.model = sc.price_model(sc.training, gpu);
  set_optimizer_step(sc.model, sc.training, gpu);
  price_gpu_kinds(sc);
}

// After the strategy's checks: `pipeline: N` on GPUs of different speeds sizes each stage
// to its slowest GPU; then, before anything is built, a run too large to simulate even with
// its copies folded is refused.
void finish_strategy(Scenario& sc, const internal::Locator& at) {
  if (sc.pipeline > 0 && !DeviceSpeed(sc).uniform()) sc.strategy.stages = speed_balanced_stages(sc);
  WorkEstimate work;
  try {
    work = estimate_work(sc);
    // (A run whose copies fold builds one group of them; what builds every copy checks them
    // all: scenario_task_graph, lower_folded.)
    sc.strategy_at = at.where("strategy", "strategy");
    check_work(work, Collectives::kCompact, Copies::kFolded);
  } catch (InputError& e) {
    e.set_key_if_empty("strategy");
    e.set_location_if_empty(at.where("strategy", "strategy"));
    throw;
  }
  if (work.simulated_s > kMaxSimulatedSeconds)
    at.fail_at("training", "training",
               fmt::format("the run would simulate at least {:.3g} days", work.simulated_s / 86400),
               "at most 106 days of simulated time; fewer iterations or micro-batches, or shorter "
               "layers");
}

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
              .kind_layer_time = {},
              .device_kind = {},
              .user_order = {},
              .user_order_at = {},
              .strategy_at = {},
              .pipeline = 0,
              .price_model = {},
              .input_warnings = {}};
  sc.input_warnings = internal::cluster_warnings(root["cluster"], sc.cluster);
  sc.name = root["name"].IsDefined() ? r.scalar(root["name"], "name")
                                     : lossy_utf8(std::filesystem::path(source).stem().string());
  const YAML::Node training = r.require(root, "", "training");
  sc.training = read_training(r, training);
  // fp8 and nvfp4 need every GPU to have that format's peak (SPEC section 9).
  if (const Precision p = sc.training.precision; quantized(p)) {
    const bool fp8 = p == Precision::kFp8;
    for (const Device& d : sc.cluster.devices()) {
      if (precision_peak(d.gpu, p) > 0) continue;
      r.fail(training["precision"], "training.precision",
             fmt::format("GPU '{}' ({}) has no {} peak", d.gpu.name, d.name, fp8 ? "fp8" : "fp4"),
             fp8 ? "mixed or bf16, or GPUs with fp8 (h100-80gb, h200, b200, gb200, b300, gb300, "
                   "mi300x, or fp8_peak in the GPU mapping)"
                 : "fp8, mixed or bf16, or GPUs with NVFP4 (b200, gb200, b300, gb300, or "
                   "fp4_peak in the GPU mapping)");
    }
  }
  const YAML::Node model = r.require(root, "", "model");
  sc.price_model = model_pricer(r, model);
  try {
    price(sc);
  } catch (InputError& e) {
    if (e.key() == "cluster") e.set_location_if_empty(r.where(root["cluster"], "cluster"));
    throw;
  }
  const YAML::Node strategy = r.require(root, "", "strategy");
  read_strategy(r, strategy, training, sc);
  finish_strategy(sc, internal::Locator(r, {{"strategy", strategy}, {"training", training}}));
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

ScenarioDocument::ScenarioDocument(const std::string& path)
    : text_(path.empty() ? default_scenario_yaml()
                         : read_input_file(path, "the scenario file", "a readable YAML file")),
      source_(path.empty() ? "<default>" : path) {}

ScenarioDocument ScenarioDocument::of_text(std::string text, std::string source) {
  ScenarioDocument d;
  d.text_ = std::move(text);
  d.source_ = std::move(source);
  return d;
}

Scenario ScenarioDocument::load(const std::vector<Override>& overrides) const {
  return load_scenario_text(text_, source_, overrides);
}

Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides) {
  return path.empty() ? load_default_scenario(overrides) : load_scenario_file(path, overrides);
}

const char* default_scenario_yaml() {
  return internal::kDefaultScenarioYaml;
}

Scenario with_strategy(const Scenario& s, const Strategy& strategy, const StrategyPlacement& gpus,
                       std::optional<int64_t> micro_batch) {
  Scenario sc = s;
  if (micro_batch && *micro_batch != s.training.micro_batch) {
    if (*micro_batch < 1)
      throw InputError(fmt::format("{} is out of range", *micro_batch), "a whole number >= 1",
                       "training.micro_batch");
    if (!sc.price_model)
      throw InputError("the model's layers were given in code, priced at one micro-batch",
                       fmt::format("{}", s.training.micro_batch), "training.micro_batch");
    sc.training.micro_batch = *micro_batch;
    price(sc);
  }
  sc.strategy = strategy;
  sc.pipeline = 0;
  sc.user_order.clear();
  sc.user_order_at = {};
  const Locator nowhere;
  internal::check_strategy(sc, gpus, nowhere);
  finish_strategy(sc, nowhere);
  return sc;
}

Scenario with_micro_batch(const Scenario& s, int64_t micro_batch) {
  if (micro_batch == s.training.micro_batch) return s;
  Scenario sc = with_strategy(s, s.strategy, placement_request(s), micro_batch);
  sc.pipeline = s.pipeline;
  if (sc.pipeline > 0) {
    // `pipeline: N` splits the layers as priced at this micro-batch.
    sc.strategy.stages = even_partition(sc.model, sc.pipeline * sc.strategy.virtual_stages);
    const Locator nowhere;
    internal::check_strategy(sc, placement_request(s), nowhere);
    finish_strategy(sc, nowhere);
  }
  sc.user_order = s.user_order;
  sc.user_order_at = s.user_order_at;
  return sc;
}

StrategyPlacement placement_request(const Scenario& s) {
  StrategyPlacement gpus{
      .policy = s.placement_policy, .given_lists = s.explicit_placement, .lists = {}};
  if (s.explicit_placement)
    for (const auto& copy : s.placement)
      for (const auto& stage : copy) gpus.lists.push_back(stage);
  return gpus;
}

Scenario with_strategy_yaml(const Scenario& s, const std::string& yaml, const std::string& source) {
  YAML::Node root;
  try {
    root = parse_yaml(yaml, source);
  } catch (InputError& e) {
    e.set_key_if_empty("strategy");
    throw;
  }
  const Reader r(source, {});
  Scenario sc = s;
  sc.strategy = Strategy{};
  sc.pipeline = 0;
  sc.user_order.clear();
  sc.user_order_at = {};
  read_strategy(r, root, YAML::Node(), sc);
  finish_strategy(sc, Locator(r, {{"strategy", root}}));
  return sc;
}

Scenario load_default_scenario(const std::vector<Override>& overrides) {
  return load_scenario_text(default_scenario_yaml(), "<default>", overrides);
}

}  // namespace pipesim
