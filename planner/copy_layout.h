// Where a plan's positions are, copy by copy, as the estimates' network terms see them, and
// which network ports the positions' data-parallel groups share.
#pragma once

#include <vector>

#include "planner/cost_model.h"

namespace pipesim::planner {

// A plan's devices: a placement's lists, or contiguous copies (copy k's position q on the
// tensor groups from k * per_copy + start[q] on, t devices each).
class CopyLayout {
 public:
  // `placed` (if not null), `c` and `p` outlive the layout.
  CopyLayout(const Cluster& c, const PlanPoint& p, int tensor, const Placement* placed);

  int per_copy() const { return per_copy_; }  // tensor groups per copy (contiguous)
  int start(int q) const { return start_[static_cast<size_t>(q)]; }
  int copies() const;
  // Appends copy k's devices at position q: every rank, or rank 0 of each tensor group.
  void append(int k, int q, bool every_rank, std::vector<int>& out) const;
  // The copies whose cuts load copy 0's servers: contiguous, those that can share a server
  // with copy 0 (the next ones share none, and every server looks like copy 0's); placed,
  // copy 0 and those with a device on one of its servers (the busiest server is taken to
  // be one of copy 0's).
  void near_copies(std::vector<int>& out) const;

  // [position]: the network ports its data-parallel group (rank 0 of each tensor group;
  // the other ranks' groups, on their own ports, look alike) crosses, or none when the
  // group stays on one server. Contiguous copies look alike: the near copies give the
  // ports, the last copy's last replica whether the group spans servers.
  void group_ports(std::vector<std::vector<int>>& out) const;

 private:
  const Cluster& c_;
  const PlanPoint& p_;
  int t_;
  const Placement* placed_;
  std::vector<int> start_;
  int per_copy_ = 0;

  int server(int d) const;  // -1 past the cluster
};

// [position]: how many times its own bytes cross its ports (>= 1) when every position's
// group (ports[q], load[q] bytes) all-reduces at once. Shared fairly, a group of B bytes
// ends when every group crossing a port it crosses has moved min(B, B'), so its port steps
// take sum min(B, B') / B as long (processor sharing; the largest group's end is the
// ports' whole load, as the simulator finds).
void port_shares(const std::vector<std::vector<int>>& ports, const std::vector<double>& load,
                 std::vector<double>& shares);

}  // namespace pipesim::planner
