#include "scenario/resolved.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "core/input_file.h"
#include "scenario/internal/reader.h"
#include "scenario/internal/sections.h"

namespace pipesim {
namespace {

// A file named relative to the scenario, made absolute (the loader resolves it the same way).
void make_absolute(YAML::Node model, const std::string& key, const std::string& source) {
  const YAML::Node n = model[key];
  if (!n.IsDefined() || !n.IsScalar() || source.starts_with("<")) return;
  const std::string name = n.Scalar();
  // model.include names a zoo model unless it looks like a path.
  if (key == "include" && name.find('/') == std::string::npos && !name.ends_with(".yaml") &&
      !name.ends_with(".yml"))
    return;
  const std::filesystem::path path(name);
  if (path.is_relative())
    model[key] = std::filesystem::absolute(std::filesystem::path(source).parent_path() / path)
                     .lexically_normal()
                     .string();
}

YAML::Node stage_node(const StageSpec& s) {
  YAML::Node n(YAML::NodeType::Map);
  n.SetStyle(YAML::EmitterStyle::Flow);
  n["layers"] = fmt::format("{}-{}", s.first_layer, s.last_layer);
  n["replicas"] = s.replicas;
  return n;
}

}  // namespace

std::string resolved_scenario_yaml(const Scenario& sc, const std::vector<Override>& overrides) {
  const bool embedded = sc.source == "<default>";
  return resolved_scenario_yaml(
      sc,
      embedded ? std::string(default_scenario_yaml())
               : read_input_file(sc.source, "the scenario file", "a readable YAML file"),
      overrides);
}

std::string resolved_scenario_yaml(const Scenario& sc, const std::string& text,
                                   const std::vector<Override>& overrides) {
  YAML::Node root = internal::parse_yaml(text, sc.source);
  for (const Override& o : overrides) internal::apply_override(root, o);
  root["name"] = sc.name;
  if (root["model"].IsMap()) {
    make_absolute(root["model"], "profile", sc.source);
    make_absolute(root["model"], "include", sc.source);
  }
  YAML::Node strategy = root["strategy"];
  if (strategy["pipeline"].IsDefined()) {
    // The shorthand's split, with no per-stage options (the shorthand has none).
    strategy.remove("pipeline");
    YAML::Node stages(YAML::NodeType::Sequence);
    for (const StageSpec& s : sc.strategy.stages) stages.push_back(stage_node(s));
    strategy["stages"] = stages;
  }
  if (!sc.explicit_placement) {
    // Device lists, data copies one after another, replica by replica, rank by rank.
    YAML::Node lists(YAML::NodeType::Sequence);
    for (const auto& copy : sc.placement) {
      for (const auto& position : copy) {
        YAML::Node devices(YAML::NodeType::Sequence);
        devices.SetStyle(YAML::EmitterStyle::Flow);
        for (int d : position) devices.push_back(sc.cluster.device(d).name);
        lists.push_back(devices);
      }
    }
    strategy["placement"] = lists;
  }
  YAML::Emitter out;
  out << root;
  std::string sets;
  for (const Override& o : overrides) sets += fmt::format(" --set {}={}", o.key, o.value);
  return fmt::format("# The scenario {} as pipesim simulated it{}{}\n{}\n", sc.source,
                     sets.empty() ? "" : ", with", sets, out.c_str());
}

}  // namespace pipesim
