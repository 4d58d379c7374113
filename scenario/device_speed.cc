#include "scenario/device_speed.h"

#include <algorithm>
#include <set>
#include <utility>

#include "core/checked.h"
#include "schedules/partition.h"

namespace pipesim {
namespace {

int64_t layer_time(const Layer& l) {
  return checked_add(checked_add(l.forward, l.backward_input, "a layer's time"), l.backward_weight,
                     "a layer's time")
      .ps_count();
}

// Layer times on GPU kind k (kind 0: the model's own).
int64_t kind_time(const Scenario& s, int kind, int layer) {
  if (kind == 0 || s.kind_layer_time.empty())
    return layer_time(s.model.layers[static_cast<size_t>(layer)]);
  return s.kind_layer_time[static_cast<size_t>(kind)][static_cast<size_t>(layer)].ps_count();
}

int kind_of(const Scenario& s, int device) {
  return s.device_kind.empty() ? 0 : s.device_kind[static_cast<size_t>(device)];
}

// The devices running global stage g in every copy.
std::vector<int> stage_devices(const Scenario& s, int g) {
  std::vector<int> out;
  const auto p = static_cast<size_t>(s.strategy.position_of(g));
  for (const auto& copy : s.placement) out.insert(out.end(), copy[p].begin(), copy[p].end());
  return out;
}

// Layer l's forward + backward time on `device`'s GPU, its slowdown included.
std::vector<int64_t> device_layer_costs(const Scenario& s, int device) {
  const int kind = kind_of(s, device);
  const double slow = s.cluster.device(device).slowdown;
  std::vector<int64_t> out;
  for (int l = 0; l < static_cast<int>(s.model.layers.size()); ++l) {
    const auto t = static_cast<double>(kind_time(s, kind, l)) * slow;
    out.push_back(static_cast<int64_t>(std::min(t, 9.2e18)));
  }
  return out;
}

}  // namespace

DeviceSpeed::DeviceSpeed(const Scenario& s) {
  // One GPU kind and no straggler: every device at its profile's pace, without looking at
  // each (thousands at scale).
  const auto& slowed = s.cluster.slowdowns();
  if (s.device_kind.empty() &&
      std::none_of(slowed.begin(), slowed.end(), [](const Cluster::Slowdown& x) { return !x.link; }))
    return;
  const int devices = s.cluster.num_devices();
  const int kinds = s.kind_layer_time.empty() ? 1 : static_cast<int>(s.kind_layer_time.size());
  for (int d = 0; d < devices; ++d) {
    kind_.push_back(kind_of(s, d));
    slowdown_.push_back(s.cluster.device(d).slowdown);
    uniform_ = uniform_ && kind_.back() == 0 && slowdown_.back() == 1.0;
  }
  if (uniform_) return;
  const auto stages = static_cast<int>(s.strategy.stages.size());
  ratio_.assign(static_cast<size_t>(kinds), std::vector<double>(static_cast<size_t>(stages), 1.0));
  for (int k = 1; k < kinds; ++k) {
    for (int g = 0; g < stages; ++g) {
      const StageSpec& st = s.strategy.stages[static_cast<size_t>(g)];
      double own = 0, base = 0;
      for (int l = st.first_layer; l <= st.last_layer; ++l) {
        own += static_cast<double>(kind_time(s, k, l));
        base += static_cast<double>(kind_time(s, 0, l));
      }
      ratio_[static_cast<size_t>(k)][static_cast<size_t>(g)] = base > 0 ? own / base : 1.0;
    }
  }
}

double DeviceSpeed::scale(int device, int stage) const {
  if (uniform_) return 1.0;
  const auto d = static_cast<size_t>(device);
  return slowdown_[d] * ratio_[static_cast<size_t>(kind_[d])][static_cast<size_t>(stage)];
}

std::vector<StageSpec> speed_balanced_stages(const Scenario& s) {
  const auto stages = static_cast<int>(s.strategy.stages.size());
  std::vector<std::vector<int64_t>> cost;
  for (int g = 0; g < stages; ++g) {
    std::vector<int64_t> slowest;
    std::set<std::pair<int, double>> seen;  // (kind, slowdown): devices alike cost alike
    for (int d : stage_devices(s, g)) {
      if (!seen.emplace(kind_of(s, d), s.cluster.device(d).slowdown).second) continue;
      const std::vector<int64_t> c = device_layer_costs(s, d);
      if (slowest.empty()) slowest = c;
      for (size_t l = 0; l < c.size(); ++l) slowest[l] = std::max(slowest[l], c[l]);
    }
    cost.push_back(std::move(slowest));
  }
  std::vector<StageSpec> out = even_partition(cost, 1);
  for (int g = 0; g < stages; ++g) {
    StageSpec x = s.strategy.stages[static_cast<size_t>(g)];
    x.first_layer = out[static_cast<size_t>(g)].first_layer;
    x.last_layer = out[static_cast<size_t>(g)].last_layer;
    out[static_cast<size_t>(g)] = x;
  }
  return out;
}

}  // namespace pipesim
