// Flow-level network: transfers that share a link direction share its bandwidth max-min
// fairly (progressive filling), recomputed when flows start or end. The starts and ends of
// one moment are re-rated together (commit): a ring step that starts n flows at once costs
// one filling, not n. A change re-rates only the flows connected to it through shared
// links (its component), so disjoint traffic costs nothing; in a large component (a tree
// all-reduce over the whole cluster) only the region whose rates really move
// (rerate_local).
//
// Flows are named by the engine's op ids and live in a pool of slots, so memory follows
// the number of flows in flight, not the number of transfers. Links of unlimited bandwidth
// (a GPU's attachment to its NIC) never constrain a rate; a flow crossing only such links,
// or carrying no bytes, finishes at once.
#pragma once

#include <algorithm>
#include <array>
#include <compare>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "core/time.h"
#include "topology/cluster.h"

namespace pipesim {

class FlowNetwork {
 public:
  // How progressive filling finds each round's bottleneck link: a min-heap (the default)
  // or, as the reference the heap is tested against, a scan of every link.
  enum class Filling { kHeap, kScan };
  // Components of more than this many flows are re-rated locally (rerate_local); below
  // it re-rating the whole component costs less than the local rounds.
  static constexpr size_t kLocalAbove = 128;
  // As `local_above`: never local, every component re-rated whole (SimOptions::exact_sharing).
  static constexpr size_t kNeverLocal = std::numeric_limits<size_t>::max();
  // Flow ids below `max_flow_id` are expected; larger ones grow the id table when they start.
  // `local_above`: the component size past which re-rating goes local (0: always).
  FlowNetwork(const Cluster& cluster, size_t max_flow_id, Filling filling = Filling::kHeap,
              size_t local_above = kLocalAbove);
  // Links numbered by the caller, `capacity[h]` each (routes' hops name them so).
  FlowNetwork(const std::vector<double>& capacity, size_t max_flow_id,
              Filling filling = Filling::kHeap, size_t local_above = kLocalAbove);

  struct Update {
    uint32_t flow;
    Time finish;
  };

  // Starts the bandwidth phase of `flow` at `now` over `route` (which must outlive it).
  // A flow that shares no link with another (or crosses no finite link, or carries no
  // bytes) is projected at once and appended to `changed`; otherwise its projection, and
  // the moves of the flows it slows, wait for commit(), which must come before time
  // passes `now`.
  void add(uint32_t flow, const Route& route, int64_t bytes, Time now,
           std::vector<Update>& changed);
  // A flow that has been sending alone at `rate` since `since` (its links carried no other
  // flow, so `rate` is what max-min sharing gives it, and nobody else's rate depends on
  // it), due to finish at `finish`: it joins in the state add() and the re-ratings since
  // would have left it in, without a re-rating (a collective's phase turned back into
  // steps, SimOptions::fold).
  void add_in_flight(uint32_t flow, const Route& route, int64_t bytes, double rate, Time since,
                     Time finish);
  // A flow over `route` in exactly the state active flow `of` is in (its bytes left, rate,
  // projection), without a re-rating: the image of `of` on links that mirror its own and
  // carry nothing else (a folded ring unfolded, SimOptions::fold). Returns its finish.
  Time add_copy(uint32_t flow, const Route& route, uint32_t of);
  // Whether `flow` is in the network (started and not yet removed).
  bool active(uint32_t flow) const { return flow < slot_of_.size() && slot_of_[flow] != kNoSlot; }
  // Whether a completion event for `flow` at `t` is still its current projection.
  bool is_current(uint32_t flow, Time t) const {
    if (flow >= slot_of_.size()) return false;
    const uint32_t s = slot_of_[flow];
    return s != kNoSlot && slots_[s].finish == t;
  }
  // The route of an active flow.
  const Route& route(uint32_t flow) const { return *slots_[slot_of_[flow]].route; }
  // Ends `flow` (its last byte is through); the flows it leaves more room to are re-rated
  // by the next commit().
  void remove(uint32_t flow);
  // Whether starts or ends wait for commit().
  bool pending() const { return !pending_.empty(); }
  // Re-rates, in one filling, the components of every flow started or ended since the last
  // commit, all at `now`; appends to `changed` every flow whose projected finish moved
  // (earlier projections of those flows are stale). Max-min sharing depends only on the
  // flows present, so this is the allocation the starts and ends re-rated one at a time
  // would leave (to rounding); no byte moves in between, as they share one moment.
  void commit(Time now, std::vector<Update>& changed);

  // Sum of the rates of the flows on a link direction (bytes per second).
  double load(LinkDirection d) const;
  // The rate of an active flow (bytes per second).
  double rate(uint32_t flow) const { return slots_[slot_of_[flow]].rate; }

 private:
  static constexpr uint32_t kNoSlot = std::numeric_limits<uint32_t>::max();
  struct Flow {
    uint32_t id = 0;               // the engine's op id
    const Route* route = nullptr;  // hops; only finite ones constrain
    double remaining = 0;          // bytes
    double rate = 0;               // bytes per second
    Time updated;                  // when `remaining` was last brought up to date
    Time finish;
    uint64_t mark = 0;
    LinkDirection bottleneck = -1;  // where progressive filling last froze it
    bool exact = true;              // `remaining` is still the whole transfer (integral bytes)
    bool constrained = false;       // crosses at least one finite link
  };
  struct Link {
    double capacity = 0;
    bool finite = false;          // unlimited links never constrain a rate
    std::vector<uint32_t> flows;  // slots
    // scratch for progressive filling
    double left = 0;
    int unfrozen = 0;
    uint32_t pos = 0;  // position in comp_links_
    uint64_t mark = 0;
    uint64_t region = 0;  // rerate_local's region stamp
    bool pending = false;  // in pending_
    uint64_t covered = 0;  // commit's stamp: re-rated by this commit already
    double share() const { return std::max(0.0, left) / unfrozen; }
  };
  struct HeapEntry {
    double share;
    uint32_t pos;
    auto operator<=>(const HeapEntry&) const = default;
  };

  // A fresh flow `id` in a slot of its own, sending `bytes` from `since`; returns the slot.
  uint32_t new_flow(uint32_t id, const Route& route, int64_t bytes, Time since);
  // Puts slot `s` on the flow list of every finite link of its route; whether it has any.
  bool join_links(uint32_t s);
  bool finite(LinkDirection h) const { return links_[static_cast<size_t>(h)].finite; }
  // Adds the finite links of `route` to pending_ (each once).
  void note_pending(const Route& route);
  // Re-rates the components of the `seeds` links. `whole`: the whole component whatever
  // its size (rerate_local's fallback). Returns false, doing nothing, when the component
  // is larger than local_above_ and `whole` is not set: the caller re-rates locally.
  bool rerate(std::span<const LinkDirection> seeds, Time now, std::vector<Update>& changed,
              bool whole = false);
  void rerate_local(std::span<const LinkDirection> seeds, Time now, std::vector<Update>& changed);
  // rerate_local's rounds: fills the flows F of the region's links (their old rates kept
  // in old_rate_, the other flows on their links fixed) and returns F's mark; then puts in
  // expand_ the links that must join the region `region` (none: the filling stands).
  uint64_t fill_region();
  void links_to_join(uint64_t region, uint64_t in_f);
  // Adds finite link h to comp_links_, once per epoch_.
  void visit_link(LinkDirection h);
  // Adds the flows of link h not yet in comp_flows_ this epoch_, and their links.
  void take_flows(LinkDirection h);
  // Brings `f` up to `now` at its current rate.
  void catch_up(Flow& f, Time now);
  Time finish_time(const Flow& f, Time now) const;
  template <class Touched>
  size_t freeze(LinkDirection h, double share, Touched&& touched);
  void fill_by_scan();
  void fill_by_heap();

  std::vector<Flow> slots_;
  std::vector<uint32_t> free_;
  std::vector<uint32_t> slot_of_;  // [op id]
  std::vector<Link> links_;
  uint64_t epoch_ = 0, region_epoch_ = 0, commit_epoch_ = 0;
  Filling filling_;
  size_t local_above_;
  // scratch
  std::vector<LinkDirection> comp_links_;
  std::vector<uint32_t> comp_flows_;
  std::vector<double> old_rate_;
  std::vector<HeapEntry> heap_;
  std::vector<Link*> touched_;
  std::vector<LinkDirection> region_links_, expand_;
  std::vector<LinkDirection> pending_;  // links whose flows changed since the last commit
  std::vector<LinkDirection> seeds_;    // the links a re-rating starts from
  // Recent serialization_time(bytes, rate) results: a collective sends the same chunk at
  // the same rate at every step, and the exact 128-bit division is not cheap.
  struct Serialization {
    int64_t bytes = -1;
    double rate = 0;
    Time time;
  };
  static constexpr int kMemoBits = 4;
  mutable std::array<Serialization, size_t{1} << kMemoBits> serialization_memo_{};
};

}  // namespace pipesim
