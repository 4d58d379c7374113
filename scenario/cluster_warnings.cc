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
std::vector<std::string> cluster_warnings(const YAML::Node& n, const Cluster& c) {
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

}  // namespace pipesim::internal
