#include "api/internal/spec_yaml.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"

namespace pipesim::api {
namespace {

// `text` as a YAML double-quoted scalar (a JSON string is one); text that is not UTF-8 is
// bad input naming `key`.
std::string quoted(const std::string& text, const std::string& key) {
  try {
    return nlohmann::json(text).dump();
  } catch (const nlohmann::json::exception&) {
    throw InputError("is not valid UTF-8 text", "UTF-8 text", key, {kCodeSource});
  }
}

// One section's "key: value" lines.
class Section {
 public:
  explicit Section(std::string name) : name_(std::move(name)) {}
  void add(const char* key, const std::string& value) {
    if (!value.empty())
      lines_.push_back(fmt::format("  {}: {}", key, quoted(value, name_ + "." + key)));
  }
  template <typename T>
  void add(const char* key, const std::optional<T>& value) {
    if (value) lines_.push_back(fmt::format("  {}: {}", key, nlohmann::json(*value).dump()));
  }
  void add_raw(const char* key, const std::string& yaml) {
    lines_.push_back(fmt::format("  {}: {}", key, yaml));
  }
  bool empty() const { return lines_.empty(); }
  std::string text() const {
    if (lines_.empty()) return {};
    return fmt::format("{}:\n{}\n", name_, fmt::join(lines_, "\n"));
  }

 private:
  std::string name_;
  std::vector<std::string> lines_;
};

std::string cluster_yaml(const ClusterSpec& c) {
  Section s("cluster");
  if (c.power_limit_w) {  // the preset, capped
    if (c.gpu.empty())
      throw InputError("power_limit_w needs gpu, the preset it caps", "gpu with power_limit_w",
                       "cluster.power_limit_w", {kCodeSource});
    s.add_raw("gpu",
              fmt::format("{{preset: {}, power_limit: {}}}", quoted(c.gpu, "cluster.gpu"),
                          quoted(fmt::format("{} W", *c.power_limit_w), "cluster.power_limit_w")));
  } else {
    s.add("gpu", c.gpu);
  }
  s.add("nodes", c.nodes);
  s.add("gpus_per_node", c.gpus_per_node);
  s.add("intra_node", c.intra_node);
  if (c.nics) {  // the preset's ports, that many to a node
    if (c.inter_node.empty())
      throw InputError("nics needs inter_node, the preset of each port",
                       "inter_node with nics, or neither", "cluster.nics", {kCodeSource});
    s.add_raw("inter_node", fmt::format("{{preset: {}, nics: {}}}",
                                        quoted(c.inter_node, "cluster.inter_node"), *c.nics));
  } else {
    s.add("inter_node", c.inter_node);
  }
  return s.text();
}

std::string model_yaml(const ModelSpec& m) {
  Section s("model");
  s.add("include", m.include);
  const bool shaped = m.layers || m.hidden || m.heads || m.ffn || m.sequence || m.vocab;
  if (m.include.empty() && shaped) s.add_raw("generator", "transformer");
  s.add("layers", m.layers);
  s.add("hidden", m.hidden);
  s.add("heads", m.heads);
  s.add("ffn", m.ffn);
  s.add("sequence", m.sequence);
  s.add("vocab", m.vocab);
  s.add("mtp_layers", m.mtp_layers);
  return s.text();
}

std::string training_yaml(const TrainingSpec& t) {
  Section s("training");
  s.add("global_batch", t.global_batch);
  s.add("micro_batch", t.micro_batch);
  s.add("precision", t.precision);
  s.add("fp8_params", t.fp8_params);
  s.add("optimizer", t.optimizer);
  s.add("optimizer_state", t.optimizer_state);
  s.add("master_weights", t.master_weights);
  s.add("iterations", t.iterations);
  return s.text();
}

std::string strategy_yaml(const StrategySpec& st) {
  Section s("strategy");
  s.add("schedule", st.schedule);
  s.add("pipeline", st.pipeline);
  s.add("tensor", st.tensor);
  s.add("context", st.context);
  s.add("expert", st.expert);
  s.add("data", st.data);
  s.add("virtual_stages", st.virtual_stages);
  s.add("zero", st.zero);
  s.add("sequence_parallel", st.sequence_parallel);
  s.add("recompute", st.recompute);
  if (!st.recompute_modules.empty()) {
    std::vector<std::string> names;
    for (const std::string& m : st.recompute_modules)
      names.push_back(quoted(m, "strategy.recompute_modules"));
    s.add_raw("recompute_modules", fmt::format("[{}]", fmt::join(names, ", ")));
  }
  s.add("recompute_layers", st.recompute_layers);
  s.add("offload_layers", st.offload_layers);
  s.add("placement", st.placement);
  return s.text();
}

}  // namespace

std::string spec_yaml(const ScenarioSpec& spec) {
  std::string out;
  if (!spec.name.empty()) out += fmt::format("name: {}\n", quoted(spec.name, "name"));
  out += cluster_yaml(spec.cluster);
  out += model_yaml(spec.model);
  out += training_yaml(spec.training);
  out += strategy_yaml(spec.strategy);
  return out.empty() ? "{}\n" : out;  // every section in the settings
}

}  // namespace pipesim::api
