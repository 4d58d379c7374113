// One estimate of a run's work, taken when the scenario is loaded and before anything is
// built, so a scenario too large to simulate (a typo in a batch size, 100,000 replicas, a
// data-parallel ring of 25,000 GPUs) is refused in well under a second, with the estimate
// and the limit, instead of running for minutes and dying out of memory.
//
// It counts what the simulation builds and the writers write: compute ops (F, B, W, R per
// micro-batch on every device of a stage, the optimizer step), pipeline transfers between
// consecutive stages, the transfers of every collective step (gradient all-reduces per
// bucket, tensor-parallel all-reduces per layer, ZeRO's weight gathers), the devices, and
// the bytes of the Chrome trace. Counts are upper estimates in floating point: the products
// of large batches, replicas and copies overflow 64 bits.
#pragma once

#include <algorithm>
#include <optional>
#include <string>

#include "scenario/scenario.h"

namespace pipesim {

struct WorkEstimate {
  double compute_ops = 0;
  double transfers = 0;  // point-to-point and collective steps: one flow each
  // Of the transfers, the ring steps that compact rings do not store, and the member ops
  // they store instead.
  double ring_steps = 0;
  double ring_members = 0;
  // Of the transfers, the collectives' ones times the flows in flight with each that its
  // start and end re-rate: a tree's (and an all-to-all's) group members, a ring's 1.
  double flow_pairs = 0;
  // The longest route between two GPUs, in links (topology/route_length.h), of a cluster
  // given as a graph (shorthand clusters: 0; their routes are a few links by design and
  // their symmetric collectives run in phases).
  double route_hops = 0;
  double gpus_used = 0;  // GPUs the strategy puts work on
  // A cluster given as a graph, link by link (shorthand clusters: 0, their routes have
  // closed forms).
  double graph_vertices = 0;  // GPUs and switches
  double graph_links = 0;
  double devices = 0;
  // Data-parallel copies x context ranks: how many identical copies a run whose copies fold
  // simulates as one (sim/copies.h).
  double copies = 1;
  double trace_bytes = 0;  // the trace (--trace): ring collectives one op per member
  double csv_bytes = 0;  // the op CSV (--csv): one row per op, collective steps expanded
  // A lower bound on the simulated time (seconds): the busiest stage's compute on one of
  // its GPUs, every micro-batch of every iteration, at the fastest GPU's pace.
  double simulated_s = 0;
  // What the max-min sharing moves: every collective flow re-rates the flows in flight with
  // it, each along its route.
  double flow_hops() const { return flow_pairs * route_hops; }
  // Routing a graph: Dijkstra from each GPU used, over every vertex and link (its tree kept
  // for that GPU's other routes).
  double route_search() const {
    return std::min(gpus_used, devices) * (graph_vertices + graph_links);
  }
  // Ops stored with every collective step expanded.
  double ops() const { return compute_ops + transfers; }
  // Ops stored with compact rings.
  double compact_ops() const { return ops() - ring_steps + ring_members; }
};

inline constexpr double kMaxSimulatedOps = 50e6;  // about 9 GB of host memory, minutes
// Flow steps of a run with compact rings: about 250 ns each, minutes at the limit.
inline constexpr double kMaxFlowSteps = 500e6;
// A graph's routes of up to this many links (a GPU through its node's switch and NIC,
// leaf, spine and core and down again) are what the flow steps' limit was measured on.
// Longer ones (a chain or a torus given as a graph) are limited by the flow-links their
// sharing moves, counted along the longest route: 0.1-0.3 ns each measured on chains of
// 500 to 2,000 GPUs (tree and ring all-reduces), about two minutes at the limit.
inline constexpr double kShortRoute = 8;
inline constexpr double kMaxFlowHops = 4e11;
// Dijkstra's vertices and links: about 25 ns each, and 4 bytes of kept trees; half a
// minute and 4 GB at the limit.
inline constexpr double kMaxRouteSearch = 1e9;
inline constexpr double kMaxDevices = 65536;
// Simulated time is kept in picoseconds in 64 bits: 106 days.
inline constexpr double kMaxSimulatedSeconds = 9.2e6;
inline constexpr double kMaxTraceBytes = 4.0 * (int64_t{1} << 30);
// The op CSV warns past this size (the ops' limit keeps it under about 4 GB).
inline constexpr double kLargeCsvBytes = 1.0 * (int64_t{1} << 30);

WorkEstimate estimate_work(const Scenario& s);

// A layer's context and expert exchanges in one pass (its F, its B, or a full recompute's
// second F), and the members of the largest: ring attention one, a context all-gather or
// all-to-all two, a MoE layer's dispatch and combine two, expert tensor parallelism's
// all-gather and reduce-scatter two. Each also cuts the op it splits once more. The run's
// estimate (estimate_work) and the planner's (CostModel::simulation_work) both count them.
struct LayerExchanges {
  double per_pass = 0;
  double members = 1;
};
LayerExchanges layer_exchanges(const Layer& layer, int context, ContextComm comm, int expert,
                               int expert_tensor);

// Throws InputError (without a location; the caller adds one) when the ops or the devices
// are over their limit: the ops stored with compact rings (and the flow steps), or with
// every step expanded. `Copies::kFolded`: the ops of one copy, as a run whose copies fold
// builds them (a group of copies at a time, each group within the limit: lower_folded
// refuses a run that does not fold past it before building every copy); kEvery: the ops
// of every copy, as a trace, an op CSV, `--no-fold` or a backend builds them.
enum class Collectives { kCompact, kExpanded };
enum class Copies { kEvery, kFolded };
void check_work(const WorkEstimate& w, Collectives form = Collectives::kCompact,
                Copies copies = Copies::kEvery);
// Throws InputError when the trace would be larger than kMaxTraceBytes.
void check_trace_size(const WorkEstimate& w);
// Past kLargeCsvBytes, a warning saying how large the op CSV will be.
std::optional<std::string> csv_size_warning(const WorkEstimate& w);

}  // namespace pipesim
