// The planner's network terms, computed once per plan: the cluster and its all-reduce
// choice are the same whatever the micro-batch size and tensor degree being costed, so one
// NetworkCosts serves every CostModel of a plan (routes, cut rates and all-reduce times are
// each computed once, not once per micro-batch size).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "scenario/scenario.h"

namespace pipesim::planner {

class NetworkCosts {
 public:
  // Keeps a reference to `s`'s cluster and strategy.allreduce; `s` must outlive it.
  explicit NetworkCosts(const Scenario& s);
  NetworkCosts(NetworkCosts&&) noexcept;
  ~NetworkCosts();

  // Latency and seconds per byte of moving a micro-batch's output from the stage on devices
  // [g0, g0 + r0) to the one on [g1, g1 + r1): replica pair (i, j) moves the share of the
  // samples they have in common; the busiest GPU link or server NIC sets the pace.
  std::pair<double, double> cut_rate(int g0, int r0, int g1, int r1) const;
  // The same between any two device lists (a placed plan's stages).
  std::pair<double, double> cut_rate(const std::vector<int>& from,
                                     const std::vector<int>& to) const;
  // Seconds on the busiest link direction between servers (a network port, a GPU's way
  // to it, a leaf's uplink) when each of `cuts` moves one
  // micro-batch's output forward and its gradient back (`bytes` each way), every pair of a
  // cut sharing its samples as cut_rate's: what one micro-batch's cuts load any one link
  // with, so a steady state can go no faster.
  struct Cut {
    const std::vector<int>* from;
    const std::vector<int>* to;
    double bytes;
  };
  double cut_load(const std::vector<Cut>& cuts) const;
  // Gradient all-reduce of `bytes` among `r` groups from group g, in `data` copies `stride`
  // groups apart, a group being `t` consecutive devices of which rank 0 takes part: the
  // cheapest of ring, tree and hierarchical (or the scenario's choice), as
  // allreduce_estimate (schedules/collective_estimates.h) costs them.
  // `ring`: ZeRO's reduce-scatter and all-gather (the ring's halves, or the hierarchical
  // ones where the group's all-reduce would be hierarchical, as the lowering runs them).
  // The t ranks of each group run the same collective at once (bytes / t each), so a step
  // that leaves a server shares its NICs tensor_ways(t) ways.
  // `share`: how many times its own bytes cross the NICs it crosses, with the groups of
  // other stages that cross them at once (>= 1; the NICs' steps take share x t as long).
  double allreduce(int g, int r, int data, int stride, int t, int64_t bytes,
                   bool ring = false, double share = 1) const;
  // The same among any devices, `bytes` each, `share` copies at once on neighbouring GPUs.
  double allreduce(const std::vector<int>& devices, int64_t bytes, bool ring = false,
                   double share = 1) const;

  // How many of t neighbouring GPUs' flows share one of a server's network ports (t ranks
  // over cluster.nics_per_node() ports, rail-optimized).
  double tensor_ways(int t) const;

  struct Group;  // one all-reduce group's distinct step rates

 private:
  struct Key {
    uint64_t a, b, c;
    bool operator==(const Key&) const = default;
  };
  struct Hash {
    size_t operator()(const Key& k) const {
      return (k.a * 0x9E3779B97F4A7C15ULL ^ k.b) * 0xC2B2AE3D27D4EB4FULL ^ k.c;
    }
  };
  // Seconds per byte that `from` -> `to` adds to each link direction of its routes
  // (`loads`; only pairs on different servers when `servers_only`), times `bytes`;
  // returns the largest route latency.
  struct Loads;
  double add_cut(const std::vector<int>& from, const std::vector<int>& to, double bytes,
                 Loads& loads, bool servers_only = false) const;
  // Seconds per byte on each link direction between servers that `from` -> `to` loads,
  // forward and back (add_cut, servers only), computed once per pair of rows.
  const std::vector<std::pair<LinkDirection, double>>& crossing(const std::vector<int>& from,
                                                               const std::vector<int>& to) const;
  std::unique_ptr<Group> group(const std::vector<int>& devices) const;
  // The group of `devices`, built once whichever shape names them.
  const Group& shared(const std::vector<int>& devices) const;
  double cheapest(const Group& g, int64_t bytes, bool ring = false, double share = 1) const;

  const Scenario& s_;
  mutable std::unordered_map<Key, std::pair<double, double>, Hash> cut_;
  mutable std::unordered_map<Key, const Group*, Hash> groups_;  // owned by placed_
  mutable std::map<std::vector<int>, std::unique_ptr<Group>> placed_;
  mutable std::map<std::pair<std::vector<int>, std::vector<int>>,
                   std::vector<std::pair<LinkDirection, double>>>
      crossing_;
  mutable std::map<std::pair<std::vector<int>, std::vector<int>>, std::pair<double, double>>
      rows_;  // cut_rate of two device lists
};

}  // namespace pipesim::planner
