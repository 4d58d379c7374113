// From a loaded scenario to what the backends consume: the schedule orders and the TaskGraph.
#pragma once

#include <functional>
#include <limits>

#include "scenario/scenario.h"
#include "schedules/collective_estimates.h"
#include "schedules/lower.h"
#include "schedules/order.h"
#include "schedules/task_graph.h"
#include "schedules/warmup.h"
#include "sim/report.h"

namespace pipesim {

SlotOrders scenario_orders(const Scenario& s);
// What zb-1p, zb-2p and zb-v order from: each stage's F, B (with its recompute) and W on
// one of its GPUs, its activation share, and the idle-route time of each cross-stage
// transfer (of one lane pair's share of the output) in each direction.
StageCosts stage_costs(const Scenario& s);
// The strategy's context and expert parallelism as stage_profiles takes them.
GroupDegrees group_degrees(const Scenario& s);
// With `compact_rings`, ring collectives are CompactRing (for the engine only). `lowerer`,
// if given, lowers the input in place of lower() (lower_folded: copies left implicit).
TaskGraph scenario_task_graph(const Scenario& s, bool compact_rings = false,
                              const std::function<TaskGraph(LoweringInput)>& lowerer = {});
// The graph for the engine alone when nothing is recorded per op (no trace, no op CSV):
// compact rings, and identical data-parallel copies left implicit where they fold
// (sim/copies.h lower_folded); simulate() with SimOptions::fold on. Where they do not fold
// and every copy's graph would pass `max_full_ops` ops (measured on a group built, else
// `estimated_full_ops`), CopiesDoNotFold before that graph is built; no group is built past
// it either. By default no limit where the work estimate's ops are within kMaxSimulatedOps
// (the loader's limit for every copy), else that limit and that estimate
// (scenario_task_graph without a lowerer checks every copy's against the same limit).
TaskGraph folded_task_graph(const Scenario& s,
                            double max_full_ops = std::numeric_limits<double>::infinity(),
                            double estimated_full_ops = 0);
// Each global stage's recompute mode (strategy.recompute, per-stage overrides, and full
// everywhere under gpipe-recompute).
std::vector<Recompute> recompute_modes(const Scenario& s);
// What a selective recompute re-runs, how many layers a full one checkpoints, and how many
// layers offload their activations over the cluster's slowest host link.
ActivationScope activation_scope(const Scenario& s);
// What the recompute settings leave without effect (recompute_warnings.cc).
std::vector<std::string> recompute_warnings(const Scenario& s);
// Tensor-parallel degree of every global stage (Strategy::tensor_of).
std::vector<int> stage_tensor_degrees(const Scenario& s);

// Micro-batches each pipeline position has in flight at its first backward under the
// 1F1B schedules (strategy.warmup): the rule of schedules/warmup.h on the scenario's stage
// times, launch overheads and idle routes; empty when the schedule or a hand-written order
// decides.
std::vector<int> warmup_depths(const Scenario& s);

// What the report needs to know of the scenario beyond the timeline: names, batch, FLOPs of
// an iteration, the GPUs used and their peak, tokens per sample, the overrides applied.
RunInfo run_info(const Scenario& s, double wall_s, const std::vector<Override>& overrides = {});

// What the scenario itself should tell its user whatever the strategy (SPEC: nothing
// silent): defaults of the file a user may not mean (Scenario::input_warnings), a GPU
// without efficiency curves under analytic layers, given times on GPUs that differ.
// Every run's report lists them; plan and sweep say them once.
std::vector<std::string> scenario_warnings(const Scenario& s);

// What-ifs that cannot change some layers (SPEC: nothing silent): `keys` overridden on
// `s` (--set, a sweep's axes) against layers with given or measured times: a micro-batch
// they do not scale with, a GPU or precision their times do not follow, selective
// recomputation with no attention core to re-run. One warning per key.
std::vector<std::string> what_if_warnings(const Scenario& s, const std::vector<std::string>& keys);

// Extra weight versions each position keeps (schedules/warmup.h's rule on its replicas).
std::vector<int> stashed_versions(const Scenario& s);

// The all-reduce algorithm each position's gradient group uses: strategy.allreduce, or for
// auto the one with the least estimated time on idle links for that group and size.
std::vector<AllReduceAlgo> allreduce_algorithms(const Scenario& s);
// The cluster's idle routes as the collective estimates see them
// (schedules/collective_estimates.h).
LinkCosts link_costs(const Cluster& c);
// Idle-link estimate of an all-reduce of `bytes` among `devices` on the cluster.
Time allreduce_estimate(const Cluster& c, const std::vector<int>& devices, int64_t bytes,
                        AllReduceAlgo algo);

}  // namespace pipesim
