// Which copies may be left implicit: the rule LoweringInput::built_copies names.
#include <algorithm>
#include <map>
#include <set>

#include "schedules/lower.h"

namespace pipesim {

bool expert_group_spans_copies(int expert, int expert_tensor, int copies, int lanes) {
  return expert_tensor <= 1 && expert > 1 && expert == copies * lanes;
}

bool expert_group_spans_copies(const LoweringInput& in, int lanes) {
  return expert_group_spans_copies(in.expert, in.expert_tensor,
                                   static_cast<int>(in.placement->size()), lanes);
}

bool fills_whole_servers(const Placement& placement, const std::vector<int>& device_node, int group,
                         bool cyclic) {
  if (device_node.empty() || placement.empty()) return false;
  const auto copies = static_cast<int>(placement.size());
  const auto node = [&](int d) { return device_node[static_cast<size_t>(d)]; };
  std::map<int, int> image, preimage;  // server -> server, both ways
  std::set<int> built;
  for (int c = 0; c < copies; ++c) {
    const auto& here = placement[static_cast<size_t>(c)];
    const auto& there = placement[static_cast<size_t>((c + group) % copies)];
    for (size_t p = 0; p < here.size(); ++p) {
      for (size_t lane = 0; lane < here[p].size(); ++lane) {
        const int a = node(here[p][lane]), b = node(there[p][lane]);
        if (c < group) built.insert(a);
        if (image.try_emplace(a, b).first->second != b ||
            preimage.try_emplace(b, a).first->second != a)
          return false;
      }
    }
  }
  for (int c = group; c < copies; ++c) {
    for (const auto& lanes : placement[static_cast<size_t>(c)]) {
      for (const int d : lanes) {
        if (built.count(node(d)) != 0) return false;
      }
    }
  }
  for (size_t p = 0; cyclic && p < placement.front().size(); ++p) {
    std::set<int> on;
    for (const auto& copy : placement) {
      for (const int d : copy[p]) on.insert(node(d));
    }
    const std::vector<int> order(on.begin(), on.end());
    const auto at = [&](int n) {
      return std::lower_bound(order.begin(), order.end(), n) - order.begin();
    };
    const auto N = static_cast<std::ptrdiff_t>(order.size());
    const std::ptrdiff_t moves = (at(image.at(order.front())) - at(order.front()) + N) % N;
    for (const int n : order) {
      if ((at(image.at(n)) - at(n) + N) % N != moves) return false;
    }
  }
  return true;
}

bool may_build_copies(const LoweringInput& in, int group) {
  const Placement& placement = *in.placement;
  const auto copies = static_cast<int>(placement.size());
  // Context groups (`context` consecutive copies) and expert groups (expert x
  // expert_tensor consecutive members, copy x lanes + lane) must lie whole in each group
  // built.
  if (!in.compact_rings || group < 1 || copies % group != 0 || copies / group < 2 ||
      group % std::max(1, in.context) != 0)
    return false;
  // (Or one expert group over every copy's members, its all-to-alls reaching the implicit
  // ones through their images a server at a time: AllToAllImages.)
  const int experts = std::max(1, in.expert) * std::max(1, in.expert_tensor);
  bool spans = false;
  for (const auto& lanes : placement.front()) {
    const auto L = static_cast<int>(lanes.size());
    if (expert_group_spans_copies(in, L)) {
      spans = true;
      continue;
    }
    if (group * L % experts != 0) return false;
  }
  if (spans && !fills_whole_servers(placement, in.device_node, group, true)) return false;
  // (A tree's members do not rotate with the copies; a hierarchical collective's servers
  // must.)
  const auto& algos = in.allreduce;
  if (std::count(algos.begin(), algos.end(), AllReduceAlgo::kTree) > 0) return false;
  if (std::count(algos.begin(), algos.end(), AllReduceAlgo::kHierarchical) > 0 &&
      !fills_whole_servers(placement, in.device_node, group))
    return false;
  // Copy c's GPUs and copy c + group's go at the same pace with the same overhead: so they
  // do where every GPU does.
  const auto alike = [](const auto& v) {
    return std::all_of(v.begin(), v.end(), [&](const auto& x) { return x == v.front(); });
  };
  if (!in.compute_scale && alike(in.launch_overhead) && alike(in.reserved_bytes)) return true;
  const auto stages = static_cast<int>(in.stages.size());
  for (int c = 0; c < copies; ++c) {
    const auto& here = placement[static_cast<size_t>(c)];
    const auto& there = placement[static_cast<size_t>((c + group) % copies)];
    for (size_t p = 0; p < here.size(); ++p) {
      for (size_t lane = 0; lane < here[p].size(); ++lane) {
        const int a = here[p][lane], b = there[p][lane];
        if (!in.launch_overhead.empty() && in.launch_overhead[static_cast<size_t>(a)] !=
                                               in.launch_overhead[static_cast<size_t>(b)])
          return false;
        if (!in.reserved_bytes.empty() &&
            in.reserved_bytes[static_cast<size_t>(a)] != in.reserved_bytes[static_cast<size_t>(b)])
          return false;
        if (!in.compute_scale) continue;
        for (int g = 0; g < stages; ++g) {
          if (in.compute_scale(a, g) != in.compute_scale(b, g)) return false;
        }
      }
    }
  }
  return true;
}

}  // namespace pipesim
