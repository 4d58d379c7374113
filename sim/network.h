// Flow-level network: transfers that share a link direction share its bandwidth max-min
// fairly (progressive filling), recomputed when a flow starts or ends. A change re-rates
// only the flows connected to it through shared links (its component), so disjoint
// traffic costs nothing.
//
// A flow is identified by the engine's op id. Links of unlimited bandwidth (a GPU's
// attachment to its NIC) never constrain a rate; a flow crossing only such links, or
// carrying no bytes, finishes at once.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "core/time.h"
#include "topology/cluster.h"

namespace pipesim {

class FlowNetwork {
 public:
  FlowNetwork(const Cluster& cluster, size_t max_flows);

  struct Update {
    uint32_t flow;
    Time finish;
  };

  // Starts the bandwidth phase of `flow` at `now`. Returns, through `changed`, every flow
  // whose projected finish moved (the new one included); earlier projections of those
  // flows are stale.
  void add(uint32_t flow, const Route& route, int64_t bytes, Time now,
           std::vector<Update>& changed);
  // Whether a completion event for `flow` at `t` is still its current projection.
  bool is_current(uint32_t flow, Time t) const {
    return flows_[flow].active && flows_[flow].finish == t;
  }
  // Ends `flow` (its last byte is through) and re-rates its component.
  void remove(uint32_t flow, Time now, std::vector<Update>& changed);

  int active_on(LinkDirection d) const {
    return static_cast<int>(links_[static_cast<size_t>(d)].flows.size());
  }
  double rate(uint32_t flow) const { return flows_[flow].rate; }
  // Sum of the rates of the flows on a link direction (bytes per second).
  double load(LinkDirection d) const;

 private:
  struct Flow {
    std::vector<LinkDirection> links;  // the constraining (finite) hops
    double remaining = 0;              // bytes
    double rate = 0;                   // bytes per second
    Time updated;                      // when `remaining` was last brought up to date
    Time finish;
    bool active = false;
    bool exact = true;  // `remaining` is still the whole transfer (integral bytes)
  };
  struct LinkState {
    double capacity = 0;
    std::vector<uint32_t> flows;
    // scratch for progressive filling
    double left = 0;
    int unfrozen = 0;
    uint64_t mark = 0;
  };

  void rerate(const std::vector<LinkDirection>& seeds, Time now, std::vector<Update>& changed);
  Time finish_time(const Flow& f, Time now) const;

  std::vector<Flow> flows_;
  std::vector<LinkState> links_;
  std::vector<uint64_t> flow_mark_;
  uint64_t epoch_ = 0;
  // scratch
  std::vector<LinkDirection> comp_links_;
  std::vector<uint32_t> comp_flows_;
  std::vector<double> old_rate_;
};

}  // namespace pipesim
