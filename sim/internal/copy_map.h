// Copies of a graph as the fold sees them (sim/copies.cc): where each device sits among
// them, and the orbits of the links under moving one copy on (sim/copy_links.cc). Internal
// to sim/.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "schedules/task_graph.h"
#include "sim/copies.h"
#include "topology/cluster.h"

namespace pipesim::folding {

// Where each device sits among the copies, taken `group` at a time (a copy of the fold is
// `group` consecutive copies of the graph), and which device is its image k copies on.
class DeviceMap {
 public:
  DeviceMap(const TaskGraph& g, int group)
      : g_(g),
        group_(group),
        K_(g.copies() / group),
        per_(g.copies() > 0 ? g.copy_devices(0).size() : 0),
        all_(g.copy_devices()),
        copy_(static_cast<size_t>(g.num_devices()), -1),
        pos_(copy_.size(), -1) {}
  // False where a device is in two copies.
  bool build() {
    for (int c = 0; c < K_ * group_; ++c) {
      const auto devices = g_.copy_devices(c);
      const int copy = c / group_;
      const auto first = static_cast<int32_t>(static_cast<size_t>(c % group_) * per_);
      for (size_t i = 0; i < devices.size(); ++i) {
        const auto d = static_cast<size_t>(devices[i]);
        if (copy_[d] != -1) return false;
        copy_[d] = copy;
        pos_[d] = first + static_cast<int32_t>(i);
      }
    }
    return true;
  }
  int copies() const { return K_; }
  int group() const { return group_; }
  int copy(int d) const { return copy_[static_cast<size_t>(d)]; }
  // Device i of copy c (i < group x the graph's devices per copy: the graph's copies lie
  // one after another).
  int device(int c, size_t i) const { return all_[static_cast<size_t>(c) * size() + i]; }
  size_t size() const { return per_ * static_cast<size_t>(group_); }
  int image(int d, int k) const {
    const auto du = static_cast<size_t>(d);
    return device((copy_[du] + k) % K_, static_cast<size_t>(pos_[du]));
  }
  std::vector<int32_t> take_copies_of_devices() && { return std::move(copy_); }

 private:
  const TaskGraph& g_;
  int group_, K_;
  size_t per_;
  std::span<const int32_t> all_;
  std::vector<int32_t> copy_, pos_;
};

using DevicePairs = std::vector<std::pair<int, int>>;

// The (sender, receiver) pairs of the transfers among `ops`, each once.
DevicePairs transfer_pairs(const TaskGraph& g, const std::vector<OpId>& ops);

// Moving one copy on maps the links of every route between `pairs` (copy 0's transfers),
// hop by hop, one to one onto links of the same bandwidth (and the route's latency onto its
// own); each such route crosses an orbit of that map once. Sets f.rep and f.share.
bool links_match(const Cluster& cluster, const DeviceMap& m, const DevicePairs& pairs,
                 CopyFold& f);

}  // namespace pipesim::folding
