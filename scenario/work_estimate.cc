#include "scenario/work_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "schedules/collectives.h"
#include "topology/route_length.h"

namespace pipesim {
namespace {

// Transfers of one all-reduce among n members, and how many of them are ring steps: ring
// 2(n - 1) steps of n sends; tree two binary trees, each up and down in up to 8 chunks over
// n - 1 edges; hierarchical at most a ring's. `auto` picks per group later, so the largest
// is taken.
struct CollectiveCount {
  double transfers = 0;
  double ring_steps = 0;
  double ring_members = 0;  // the ops compact rings keep instead (n per ring, 3 rings in a
                            // hierarchical all-reduce)
  // Each transfer times the flows its start and end re-rate with it: a tree's edges cross
  // one another's links (n members' flows); a ring's are neighbours on their own links.
  double flow_pairs = 0;
  CollectiveCount& operator+=(const CollectiveCount& o) {
    transfers += o.transfers;
    ring_steps += o.ring_steps;
    ring_members += o.ring_members;
    flow_pairs += o.flow_pairs;
    return *this;
  }
  CollectiveCount& operator*=(double k) {
    transfers *= k;
    ring_steps *= k;
    ring_members *= k;
    flow_pairs *= k;
    return *this;
  }
};

CollectiveCount allreduce_transfers(double n, std::optional<AllReduceAlgo> algo) {
  if (n < 2) return {};
  const double ring = 2 * (n - 1) * n;
  const double tree = 2 * 2 * 8 * (n - 1);
  if (algo == AllReduceAlgo::kTree) return {tree, 0, 0, tree * n};
  if (algo == AllReduceAlgo::kRing) return {ring, ring, n, ring};
  if (algo == AllReduceAlgo::kHierarchical) return {ring, ring, 3 * n, ring};
  // `auto` takes the ring where routes are long (a tree's edges cross the graph, and its
  // estimate pays their latency every step), so its flows count as the ring's.
  return ring >= tree ? CollectiveCount{ring, ring, 3 * n, ring}
                      : CollectiveCount{tree, 0, 0, ring};
}

// One ring pass (a reduce-scatter or an all-gather) among n members.
CollectiveCount ring_pass(double n) {
  if (n < 2) return {};
  return {(n - 1) * n, (n - 1) * n, n, (n - 1) * n};
}

// Bytes per event in the trace: a compute slice and its memory counter changes; a
// transfer's two slices, flow arrows and link-utilisation samples along its route.
constexpr double kTraceBytesPerComputeOp = 600;
constexpr double kTraceBytesPerTransfer = 2000;
// An op CSV row ("node0/gpu0,send->node1/gpu0,reduce-scatter,-1,0.925098246,0.925164524"):
// 74 bytes a row measured on a 384-GPU run.
constexpr double kCsvBytesPerRow = 80;

void add(WorkEstimate& w, const CollectiveCount& c) {
  w.transfers += c.transfers;
  w.ring_steps += c.ring_steps;
  w.ring_members += c.ring_members;
  w.flow_pairs += c.flow_pairs;
}

// The fastest GPU kind's share of the model's times (mixed GPUs), for the time bound.
double fastest_share(const Scenario& s) {
  double fastest = 1.0;
  for (const auto& kind : s.kind_layer_time) {
    double own = 0, base = 0;
    for (size_t l = 0; l < kind.size() && l < s.model.layers.size(); ++l) {
      own += kind[l].seconds();
      base += s.model.layers[l].forward.seconds() + s.model.layers[l].backward().seconds();
    }
    if (base > 0) fastest = std::min(fastest, own / base);
  }
  return fastest;
}

// One stage's lanes: `data` copies x r replicas x t tensor ranks, M micro-batches.
struct StageLanes {
  double data = 1, r = 1, t = 1, M = 1;
};

// A layer's context, expert and shape-described tensor collectives; its tensor-parallel
// all-reduces (of generated layers) into `tp_allreduces`. `again`: a full recompute re-runs
// it; `selective`: the modules a selective one re-runs (0: none), with the collectives they
// issue again (RecomputePart).
void add_layer(const Scenario& s, const StageSpec& stage, const Layer& layer, bool again,
               RecomputeModules selective, const StageLanes& x, WorkEstimate& w,
               double& tp_allreduces) {
  const Strategy& st = s.strategy;
  const double data = x.data, r = x.r, t = x.t, M = x.M;
  int rerun_tp = 0;
  bool rerun_block = false;
  for (const RecomputePart& p : layer.recompute_parts) {
    if ((effective_modules(selective) & module_bit(p.module)) == 0) continue;
    rerun_tp += p.tp_allreduces;
    rerun_block = rerun_block || p.exchanges;
  }
  // Context and expert collectives: each member sends n - 1 transfers, and each cuts its
  // op once more.
  const LayerExchanges e =
      layer_exchanges(layer, st.context, st.context_comm, st.expert, st.expert_tensor);
  const double exchanges = ((again || rerun_block ? 2 : 1) + 1) * e.per_pass;
  const double members = e.members;
  w.transfers += data * r * t * M * exchanges * (members - 1);
  w.flow_pairs += data * r * t * M * exchanges * (members - 1) * members;
  w.compute_ops += data * r * t * M * exchanges * 2;
  if (layer.tensor_parallel)  // a full recompute re-issues the forward's
    tp_allreduces +=
        layer.tp_forward_allreduces * (again ? 2 : 1) + layer.tp_backward_allreduces + rerun_tp;
  if (!layer.tensor_split || t <= 1) return;
  // Shape-described layers: all-reduces and all-gathers ((t - 1) steps of t sends), each
  // also cutting the op into one more part.
  const TensorShard shard = (*layer.tensor_split)(st.tensor_of(stage), 1);
  CollectiveCount collectives;
  double parts = 0;
  const auto count = [&](const std::vector<TpCollective>& list, double times) {
    for (const TpCollective& c : list) {
      CollectiveCount one = c.kind == TpCollective::Kind::kAllGather
                                ? ring_pass(t)
                                : allreduce_transfers(t, AllReduceAlgo::kRing);
      collectives += one *= times;
      parts += times;
    }
  };
  count(shard.forward_collectives, again ? 2 : 1);  // a full recompute re-issues
  count(shard.backward_collectives, 1);
  add(w, collectives *= data * r * M);
  w.compute_ops += data * r * t * M * parts;
}

// Stage g's compute ops, pipeline transfers and collectives, and its bound on the time.
void add_stage(const Scenario& s, size_t g, double fastest, WorkEstimate& w) {
  const Strategy& st = s.strategy;
  const double grad_bytes = 4;  // the most bytes per gradient (fp32)
  const StageSpec& stage = st.stages[g];
  const StageLanes x{static_cast<double>(st.copies()),  // data-parallel copies x context ranks
                     static_cast<double>(stage.replicas),
                     static_cast<double>(std::max(1, st.tensor_of(stage))),
                     static_cast<double>(s.micro_batches)};
  const double data = x.data, r = x.r, t = x.t, M = x.M;
  double stage_s = 0;
  for (int l = stage.first_layer; l <= stage.last_layer; ++l) {
    const Layer& layer = s.model.layers[static_cast<size_t>(l)];
    stage_s += layer.forward.seconds() + layer.backward().seconds();
  }
  w.simulated_s =
      std::max(w.simulated_s, stage_s * fastest * M * s.training.iterations / (r * t * st.context));
  const double per_mb = 3 + (st.recompute_of(stage) != Recompute::kNone ? 1 : 0);
  w.compute_ops += data * r * t * (M * per_mb + 1);
  w.gpus_used += data * r * t;
  if (g + 1 < st.stages.size()) {  // activations forward, gradients back
    const StageSpec& next = st.stages[g + 1];
    w.transfers += data * M * 2 * r * next.replicas * std::max<double>(t, st.tensor_of(next));
  }
  double params = 0, tp_allreduces = 0;
  const double layers = stage.last_layer - stage.first_layer + 1;
  const bool full_recompute = st.recompute_of(stage) == Recompute::kFull;
  const RecomputeModules selective =
      st.recompute_of(stage) == Recompute::kSelective ? st.recompute_modules : 0;
  const std::vector<char> rerun =
      checkpointed_layers(s.model, stage.first_layer, stage.last_layer, st.recompute_layers);
  for (int l = stage.first_layer; l <= stage.last_layer; ++l) {
    const Layer& layer = s.model.layers[static_cast<size_t>(l)];
    params += static_cast<double>(layer.params);
    add_layer(s, stage, layer, full_recompute && rerun[static_cast<size_t>(l - stage.first_layer)],
              selective, x, w, tp_allreduces);
  }
  // Gradient all-reduce of each bucket (bucket boundaries fall between layers) among the
  // stage's replicas in every copy, one group per tensor rank.
  if (params > 0) {
    const double bucket = st.bucket_bytes > 0 ? static_cast<double>(st.bucket_bytes) : 1e300;
    const double buckets = std::clamp(std::ceil(params * grad_bytes / bucket), 1.0, layers);
    add(w, allreduce_transfers(r * data, st.allreduce) *= t * buckets);
    // ZeRO-2 and 3 reduce-scatter every micro-batch's gradients (half an all-reduce each;
    // the last is half the all-reduce counted above).
    if (st.zero >= 2 && r * data > 1 && M > 1)
      add(w, allreduce_transfers(r * data, st.allreduce) *= t * buckets * (M - 1) * 0.5);
    // ZeRO: an all-gather of the weights after the optimizer (stages 1, 2), or of each
    // layer before each F, R and B of every micro-batch (stage 3, each op then one part
    // per layer); its reduce-scatter is half the all-reduce counted above.
    if (st.zero > 0 && st.zero < 3) add(w, ring_pass(r * data) *= t);
    if (st.zero == 3 && r * data > 1) {
      add(w, ring_pass(r * data) *= t * M * per_mb * layers);
      w.compute_ops += data * r * t * M * per_mb * (layers - 1);
    }
  }
  // Tensor-parallel all-reduces of every layer and micro-batch, in every tensor group.
  add(w, allreduce_transfers(t, AllReduceAlgo::kRing) *= data * r * M * tp_allreduces);
}

}  // namespace

LayerExchanges layer_exchanges(const Layer& layer, int context, ContextComm comm, int expert,
                               int expert_tensor) {
  LayerExchanges e;
  if (layer.attention && context > 1) {
    e.per_pass += comm == ContextComm::kP2p ? 1 : 2;
    e.members = context;
  }
  if (layer.moe && expert > 1) {
    e.per_pass += 2;
    e.members = std::max<double>(e.members, expert);
  }
  if (layer.moe && expert_tensor > 1) {
    e.per_pass += 2;
    e.members = std::max<double>(e.members, expert_tensor);
  }
  return e;
}

WorkEstimate estimate_work(const Scenario& s) {
  WorkEstimate w;
  const double fastest = fastest_share(s);
  for (size_t g = 0; g < s.strategy.stages.size(); ++g) add_stage(s, g, fastest, w);
  w.compute_ops *= s.training.iterations;
  w.transfers *= s.training.iterations;
  w.ring_steps *= s.training.iterations;
  w.ring_members *= s.training.iterations;
  w.flow_pairs *= s.training.iterations;
  if (!s.cluster.shorthand()) {  // a shorthand cluster's routes are a few links by design
    w.route_hops = longest_route_hops(s.cluster);
    w.graph_vertices = s.cluster.num_vertices();
    w.graph_links = s.cluster.num_links();
  }
  w.devices = s.cluster.num_devices();
  w.copies = std::max(1, s.strategy.copies());
  // (A trace shows a ring collective's member as one op, as a profile shows its kernel.)
  w.trace_bytes = w.compute_ops * kTraceBytesPerComputeOp +
                  (w.transfers - w.ring_steps + w.ring_members) * kTraceBytesPerTransfer;
  w.csv_bytes = w.ops() * kCsvBytesPerRow;
  return w;
}

void check_work(const WorkEstimate& w, Collectives form, Copies copies) {
  if (w.devices > kMaxDevices) {
    throw InputError(fmt::format("the cluster has {:.0f} GPUs", w.devices),
                     fmt::format("at most {:.0f}", kMaxDevices), "cluster");
  }
  const std::string lower =
      "lower training.iterations, global_batch / micro_batch, replicas or data";
  const bool compact = form == Collectives::kCompact;
  const double ops = compact ? w.compact_ops() : w.ops();
  const bool folded = copies == Copies::kFolded && w.copies > 1;
  if (ops / (folded ? w.copies : 1) > kMaxSimulatedOps) {
    throw InputError(
        fmt::format("this run would simulate about {:.3g} ops ({:.3g} compute ops and {:.3g} "
                    "transfers, collective steps {}){}",
                    ops, w.compute_ops, ops - w.compute_ops,
                    compact ? "of rings kept compact" : "included",
                    folded ? fmt::format(", {:.3g} for one of its {:.0f} data-parallel copies",
                                         ops / w.copies, w.copies)
                           : ""),
        fmt::format("at most {:.3g}{}; {}", kMaxSimulatedOps, folded ? " a copy" : "", lower),
        "strategy");
  }
  if (w.route_search() > kMaxRouteSearch) {
    throw InputError(
        fmt::format("finding this run's routes would search about {:.3g} vertices and links "
                    "(Dijkstra from each of {:.0f} GPUs over the {:.0f} vertices and {:.0f} links "
                    "of the cluster's graph)",
                    w.route_search(), std::min(w.gpus_used, w.devices), w.graph_vertices,
                    w.graph_links),
        fmt::format("at most {:.3g}; fewer GPUs, or a shorthand cluster (nodes, gpus_per_node), "
                    "whose routes have closed forms",
                    kMaxRouteSearch),
        "cluster");
  }
  if (w.route_hops > kShortRoute && w.flow_hops() > kMaxFlowHops) {
    throw InputError(
        fmt::format("this run's collectives would move about {:.3g} flow-links through the "
                    "max-min sharing ({:.3g} transfers, each in flight with its group's "
                    "others, over routes of up to {:.0f} links)",
                    w.flow_hops(), w.transfers, w.route_hops),
        fmt::format("at most {:.3g}; fewer or smaller data-parallel groups, or a cluster whose "
                    "GPUs are fewer links apart",
                    kMaxFlowHops),
        "strategy");
  }
  if (compact && w.transfers > kMaxFlowSteps) {
    throw InputError(
        fmt::format("this run would simulate about {:.3g} transfers and collective steps",
                    w.transfers),
        fmt::format("at most {:.3g}; {}", kMaxFlowSteps, lower), "strategy");
  }
}

void check_trace_size(const WorkEstimate& w) {
  if (w.trace_bytes > kMaxTraceBytes) {
    throw InputError(fmt::format("the trace would be about {:.3g} GB ({:.3g} ops)",
                                 w.trace_bytes / 1e9, w.ops()),
                     fmt::format("at most {:.3g} GB; trace fewer iterations or micro-batches",
                                 kMaxTraceBytes / 1e9),
                     "--trace");
  }
}

std::optional<std::string> csv_size_warning(const WorkEstimate& w) {
  if (w.csv_bytes > kLargeCsvBytes)
    return fmt::format(
        "--csv: the op CSV will be about {:.3g} GB ({:.3g} rows, one per op and "
        "collective step)",
        w.csv_bytes / 1e9, w.ops());
  return std::nullopt;
}

}  // namespace pipesim
