// What the cluster section leaves to defaults a user may not mean (Scenario::input_warnings).
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "scenario/internal/sections.h"

namespace pipesim::internal {

// Nodes of several GPUs given one network port by default: a link preset, or a kind's
// default one, is one port (`ib-ndr` is one 400 Gbit/s port), while DGX and HGX servers have
// one per GPU, so the network would be gpus_per_node times too slow for them, silently
// (SPEC section 9). A bandwidth of the user's own (a node's aggregate) or `nics` says the
// user meant it.
namespace {

std::vector<std::string> nic_warnings(const YAML::Node& n, const Cluster& c) {
  const YAML::Node inter = n["inter_node"];
  if (!inter.IsDefined() || c.num_nodes() < 2) return {};
  std::string name;
  if (inter.IsScalar()) {
    name = inter.Scalar();
  } else if (inter.IsMap() && !inter["bandwidth"].IsDefined() && !inter["nics"].IsDefined()) {
    for (const char* key : {"preset", "kind"})
      if (name.empty() && inter[key].IsDefined() && inter[key].IsScalar())
        name = inter[key].Scalar();
  }
  if (name.empty()) return {};
  int fewest = c.gpus_of_node(0);
  for (int k = 1; k < c.num_nodes(); ++k) fewest = std::min(fewest, c.gpus_of_node(k));
  if (fewest < 4) return {};
  return {fmt::format(
      "cluster.inter_node: '{}' is one network port for each node of {}{} GPUs (nics: 1, the "
      "default); DGX and HGX servers have one port per GPU: write nics: {} for them, or "
      "nics: 1 to keep one port",
      name, fewest, fewest == c.num_devices() / c.num_nodes() ? "" : " or more", fewest)};
}

// A power limit at or above the board power the peaks are rated at changes nothing: the
// datasheet's clocks are the most pipesim runs a GPU at.
std::vector<std::string> power_warnings(const Cluster& c) {
  std::vector<std::string> out;
  for (int d = 0; d < c.num_devices(); ++d) {
    const GpuSpec& g = c.device(d).gpu;
    if (!(g.power_limit_watts > 0) || g.power_limit_watts < g.tdp_watts) continue;
    std::string w = fmt::format(
        "power_limit: {:g} W on {} is not below its rated {:g} W: no effect (its datasheet "
        "peaks are the fastest pipesim runs it)",
        g.power_limit_watts, g.name, g.tdp_watts);
    if (std::find(out.begin(), out.end(), w) == out.end()) out.push_back(std::move(w));
  }
  return out;
}

// A GPU's rated power given without a limit to scale the clock from it changes nothing.
std::vector<std::string> tdp_warnings(const YAML::Node& n) {
  std::vector<std::string> out;
  const auto check = [&out](const YAML::Node& gpu, const std::string& path) {
    // (A key the YAML lacks is an undefined node: only IsDefined may be asked of it.)
    if (gpu.IsDefined() && gpu.IsMap() && gpu["tdp"].IsDefined() && !gpu["power_limit"].IsDefined())
      out.push_back(fmt::format(
          "{0}.tdp: no effect without {0}.power_limit (the rating a power limit scales the "
          "clock from)",
          path));
  };
  if (!n.IsMap()) return out;
  check(n["gpu"], "cluster.gpu");
  for (const char* list : {"node_groups", "devices"}) {
    const YAML::Node entries = n[list];
    if (!entries.IsDefined() || !entries.IsSequence()) continue;
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].IsMap()) check(entries[i]["gpu"], fmt::format("cluster.{}.{}.gpu", list, i));
  }
  return out;
}

}  // namespace

std::vector<std::string> cluster_warnings(const YAML::Node& n, const Cluster& c) {
  std::vector<std::string> out = nic_warnings(n, c);
  for (std::string& w : power_warnings(c)) out.push_back(std::move(w));
  for (std::string& w : tdp_warnings(n)) out.push_back(std::move(w));
  return out;
}

}  // namespace pipesim::internal
