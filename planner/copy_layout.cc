#include "planner/copy_layout.h"

#include <algorithm>

namespace pipesim::planner {
namespace {
size_t u(int v) {
  return static_cast<size_t>(v);
}
}  // namespace

CopyLayout::CopyLayout(const Cluster& c, const PlanPoint& p, int tensor, const Placement* placed)
    : c_(c), p_(p), t_(tensor), placed_(placed) {
  start_.resize(u(p.positions()));
  for (int q = 0; q < p.positions(); ++q) {
    start_[u(q)] = per_copy_;
    per_copy_ += p.stages[u(q)].replicas;
  }
}

int CopyLayout::copies() const {
  return placed_ == nullptr ? p_.data : static_cast<int>(placed_->size());
}

int CopyLayout::server(int d) const {
  return d < c_.num_devices() ? c_.device(d).node : -1;
}

void CopyLayout::append(int k, int q, bool every_rank, std::vector<int>& out) const {
  const int step = every_rank ? 1 : t_;
  if (placed_ != nullptr) {
    const std::vector<int>& d = (*placed_)[u(k)][u(q)];
    for (size_t i = 0; i < d.size(); i += u(step)) out.push_back(d[i]);
    return;
  }
  const int first = (k * per_copy_ + start(q)) * t_;
  for (int d = 0; d < p_.stages[u(q)].replicas * t_; d += step) out.push_back(first + d);
}

void CopyLayout::near_copies(std::vector<int>& out) const {
  out.clear();
  if (placed_ == nullptr) {
    const int per_server = std::max(1, c_.num_devices() / std::max(1, c_.num_nodes()));
    const int near = per_server / std::max(1, per_copy_ * t_) + 2;
    for (int k = 0; k < std::min(p_.data, near); ++k) out.push_back(k);
    return;
  }
  thread_local std::vector<int> home;  // copy 0's servers, sorted
  home.clear();
  for (const auto& devices : placed_->front())
    for (const int d : devices) home.push_back(server(d));
  std::sort(home.begin(), home.end());
  for (int k = 0; k < copies(); ++k) {
    bool near = k == 0;
    for (const auto& devices : (*placed_)[u(k)])
      for (const int d : devices)
        near = near || std::binary_search(home.begin(), home.end(), server(d));
    if (near) out.push_back(k);
  }
}

void CopyLayout::group_ports(std::vector<std::vector<int>>& out) const {
  const int P = p_.positions();
  out.assign(u(P), {});
  thread_local std::vector<int> near, devices;
  near_copies(near);
  for (int q = 0; q < P; ++q) {
    devices.clear();
    if (placed_ != nullptr) {
      for (int k = 0; k < copies(); ++k) append(k, q, false, devices);
    } else {
      for (const int k : near) append(k, q, false, devices);
      devices.push_back(((p_.data - 1) * per_copy_ + start(q) + p_.stages[u(q)].replicas - 1) * t_);
    }
    std::vector<int>& on = out[u(q)];
    int first_node = -1;
    bool spans = false;
    for (const int d : devices) {
      if (d >= c_.num_devices()) continue;
      const int node = c_.device(d).node;
      if (first_node < 0) first_node = node;
      spans = spans || node != first_node;
      const int nic = c_.nic_of(d);
      if (std::find(on.begin(), on.end(), nic) == on.end()) on.push_back(nic);
    }
    if (!spans) on.clear();
  }
}

void port_shares(const std::vector<std::vector<int>>& ports, const std::vector<double>& load,
                 std::vector<double>& shares) {
  const size_t P = ports.size();
  const auto crosses_with = [&](size_t a, size_t b) {
    for (const int n : ports[a])
      if (std::find(ports[b].begin(), ports[b].end(), n) != ports[b].end()) return true;
    return false;
  };
  shares.assign(P, 1.0);
  for (size_t q = 0; q < P; ++q) {
    if (ports[q].empty() || load[q] <= 0) continue;
    double moved = 0;
    for (size_t o = 0; o < P; ++o)
      if (o == q || crosses_with(q, o)) moved += std::min(load[q], load[o]);
    shares[q] = std::max(1.0, moved / load[q]);
  }
}

}  // namespace pipesim::planner
