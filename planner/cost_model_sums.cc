// CostModel's per-layer sums (planner/cost_model.h): each layer as one rank of the plan's
// degrees costs it, for a micro-batch whole and for each replica split.
#include <algorithm>
#include <limits>

#include "planner/cost_model.h"
#include "planner/layer_comm.h"
#include "scenario/device_speed.h"
#include "scenario/work_estimate.h"

namespace pipesim::planner {

namespace {
// Layer l as one rank of the plan's degrees costs it (Layer::at_degrees) for k replicas'
// shards of the micro-batch (their k shards' time, whole bytes), on 1/context of the tokens,
// with 1/(expert x expert_tensor) of a MoE layer's experts on every tensor rank (not split by
// the tensor degree).
Layer rank_layer(const Layer& layer, int t, int expert, int context, int etp, int k) {
  Layer x = layer.at_degrees(t, expert, context, etp, k);
  if (context > 1) {
    for (Time* v : {&x.forward, &x.backward_input, &x.backward_weight, &x.tp_whole_forward,
                    &x.tp_whole_backward_input, &x.tp_whole_backward_weight})
      *v = *v / context;
    for (int64_t* v :
         {&x.activation_bytes, &x.output_bytes, &x.tp_replicated_activation, &x.tp_allreduce_bytes})
      *v /= context;
    for (RecomputePart& p : x.recompute_parts) {
      p.cost.forward = p.cost.forward / context;
      p.cost.bytes /= context;
      p.cost.replicated_bytes /= context;
      p.pinned /= context;
    }
    if (x.weight_activation) *x.weight_activation /= context;
    x.tp_replicated_weight_activation /= context;
  }
  if (x.moe) {
    const int64_t experts = x.moe->expert_params;
    const int64_t share = experts / (int64_t{std::max(1, expert)} * etp);
    x.params = x.params - experts + share;
    x.tp_replicated_params += share;
  }
  return x;
}

// What a selective recompute of `modules` issues again in layer x (RecomputePart): of its
// forward tensor all-reduces, the shares re-run as all-reduces and as the per-op policy's
// gathers; and whether it exchanges the MoE block's tokens again.
LayerRerun rerun_share(const Layer& x, RecomputeModules modules) {
  LayerRerun r;
  r.forward = x.tp_forward_allreduces;
  modules = effective_modules(modules);
  for (const RecomputePart& p : x.recompute_parts) {
    if ((modules & module_bit(p.module)) == 0) continue;
    if (x.tensor_parallel) (p.regather ? r.gathers : r.allreduces) += p.tp_allreduces;
    r.exchanges = r.exchanges || p.exchanges;
  }
  return r;
}

// What one GPU's context and expert exchanges of layer `x` add to its simulation per
// micro-batch, over its passes (F, B and a full recompute's second F): each exchange (a
// compact ring's member op; an all-to-all's n - 1 transfers run about as fast, measured on
// the planner's MoE plans) and the cut of the op it splits.
double exchange_ops(const Layer& x, int context, int expert, int etp, ContextComm comm) {
  const double per_pass = layer_exchanges(x, context, comm, expert, etp).per_pass;
  return ((x.recomputed ? 2 : 1) + 1) * per_pass * 2;
}
}  // namespace

CostModel::CommSums::CommSums(size_t layers) {
  for (auto* v : {&tp_fwd, &tp_rfwd, &tp_bwd, &beside, &beside_sp, &full_fwd, &full_rfwd, &full_bwd,
                  &full_bwd_split, &a2a, &a2a_rf, &sel_whole, &sel_split, &full_sel, &a2a_sel})
    v->assign(layers + 1, 0.0);
  edge_fwd.assign(layers, 0.0);
  edge_bwd.assign(layers, 0.0);
}

void CostModel::CommSums::add(size_t l, const LayerComm& c, bool recomputed,
                              const LayerRerun& rerun) {
  const double a = c.all_to_all;
  // Without sequence parallelism every one an all-reduce; with it a reduce-scatter and an
  // all-gather, or a gather alone. Under `full` (with it), as shares of what the forward's
  // leave past their GEMMs.
  sel_whole[l + 1] = sel_whole[l] + (rerun.allreduces + rerun.gathers) * c.allreduce;
  sel_split[l + 1] =
      sel_split[l] + rerun.allreduces * (c.allreduce / 2 + c.gather) + rerun.gathers * c.gather;
  const double per = rerun.forward > 0 ? c.full.forward / rerun.forward : 0.0;
  full_sel[l + 1] = full_sel[l] + (rerun.allreduces + rerun.gathers / 2.0) * per;
  a2a_sel[l + 1] = a2a_sel[l] + (rerun.exchanges ? a : 0.0);
  tp_fwd[l + 1] = tp_fwd[l] + c.forward;
  tp_rfwd[l + 1] = tp_rfwd[l] + (recomputed ? c.forward : 0.0);
  tp_bwd[l + 1] = tp_bwd[l] + c.backward;
  beside[l + 1] = beside[l] + c.beside;
  beside_sp[l + 1] = beside_sp[l] + c.beside_sp;
  full_fwd[l + 1] = full_fwd[l] + c.full.forward + a;
  full_rfwd[l + 1] = full_rfwd[l] + (recomputed ? c.full.forward + a : 0.0);
  full_bwd[l + 1] = full_bwd[l] + c.full.backward + a;
  full_bwd_split[l + 1] = full_bwd_split[l] + c.full.backward_split_w + a;
  edge_fwd[l] = c.full.edge_forward;
  edge_bwd[l] = c.full.edge_backward;
  a2a[l + 1] = a2a[l] + a;
  a2a_rf[l + 1] = a2a_rf[l] + (recomputed ? a : 0.0);
}

CostModel::CostModel(const Scenario& s, int tensor, const NetworkCosts* net, int context,
                     int expert, int expert_tensor)
    : s_(s),
      t_(tensor),
      comm_(s.model.layers.size()),
      own_net_(net ? nullptr : std::make_unique<NetworkCosts>(s)),
      net_(net ? net : own_net_.get()) {
  const size_t L = s.model.layers.size();
  cp_ = std::max(1, context);
  uneven_speed_ = !DeviceSpeed(s).uniform();
  exchange_ops_.assign(L + 1, 0.0);
  for (auto* v : {&f_, &rf_, &b_, &w_, &opt_, &core_, &whole_, &whole_rf_, &whole_sel_})
    v->assign(L + 1, 0.0);
  for (auto* v : {&act_, &params_, &kept_full_, &kept_split_, &core_bytes_, &core_repl_, &repl_,
                  &rings_, &repl_params_, &weight_act_, &weight_repl_, &held_sp_})
    v->assign(L + 1, 0);
  const int etp = std::max(1, expert_tensor);
  per_node_ = s.cluster.gpus_of_node(0);
  const LayerCommCosts comm(s, t_, context, expert, etp);
  slow_ = comm.slow();
  for (size_t l = 0; l < L; ++l) {
    const Layer x = rank_layer(s.model.layers[l], t_, expert, context, etp, 1);
    comm_.add(l, comm.of(x), x.recomputed, rerun_share(x, s.strategy.recompute_modules));
    const int64_t in = l == 0 ? s.model.input_bytes : s.model.layers[l - 1].output_bytes;
    // What selective recompute re-runs: the scenario's modules (Strategy::recompute_modules).
    const RecomputeCost again = x.selective(s.strategy.recompute_modules);
    core_[l + 1] = core_[l] + again.forward.seconds();
    // Under full recompute: a checkpointed layer keeps its input (whole on every tensor
    // rank), another layer all its activations (split like them).
    kept_full_[l + 1] = kept_full_[l] + (x.recomputed ? std::min(in, x.activation_bytes) : 0);
    kept_split_[l + 1] = kept_split_[l] + (x.recomputed ? 0 : x.activation_bytes);
    rf_[l + 1] = rf_[l] + (x.recomputed ? x.forward.seconds() : 0.0);
    core_bytes_[l + 1] = core_bytes_[l] + again.bytes;
    held_sp_[l + 1] =
        held_sp_[l] + std::min(again.bytes, x.held_whole(s.strategy.recompute_modules, t_, true));
    core_repl_[l + 1] =
        core_repl_[l] + (t_ > 1 ? std::min(again.replicated_bytes, x.tp_replicated_activation) : 0);
    repl_[l + 1] = repl_[l] + (t_ > 1 ? x.tp_replicated_activation : 0);
    rings_[l + 1] = rings_[l] + 2 * int64_t{x.tp_forward_allreduces} + x.tp_backward_allreduces;
    exchange_ops_[l + 1] =
        exchange_ops_[l] + exchange_ops(x, cp_, expert, etp, s.strategy.context_comm);
    max_layer_act_ = std::max(max_layer_act_, x.activation_bytes);
    max_core_ = std::max(max_core_, again.bytes);
    // Ops every tensor rank runs whole without sequence parallelism (Layer::tp_whole_*).
    whole_[l + 1] = whole_[l] + x.tp_whole_forward.seconds() + x.tp_whole_backward_input.seconds() +
                    x.tp_whole_backward_weight.seconds();
    whole_rf_[l + 1] = whole_rf_[l] + (x.recomputed ? x.tp_whole_forward.seconds() : 0.0);
    double sel = 0;  // as the simulation's stage profiles count them (stage_profiles.cc)
    for (const RecomputePart& p : x.recompute_parts)
      if ((effective_modules(s.strategy.recompute_modules) & module_bit(p.module)) != 0)
        sel += p.whole_forward.seconds();
    whole_sel_[l + 1] = whole_sel_[l] + sel;
    f_[l + 1] = f_[l] + x.forward.seconds();
    b_[l + 1] = b_[l] + x.backward_input.seconds();
    w_[l + 1] = w_[l] + x.backward_weight.seconds();
    opt_[l + 1] = opt_[l] + x.optimizer.seconds();
    act_[l + 1] = act_[l] + x.activation_bytes;
    // What a micro-batch waiting for its W keeps (StageProfile::weight_activation_bytes).
    weight_act_[l + 1] = weight_act_[l] + x.weight_kept();
    weight_repl_[l + 1] =
        weight_repl_[l] +
        (t_ > 1 ? (x.weight_activation ? std::min({x.tp_replicated_weight_activation,
                                                   x.tp_replicated_activation, x.weight_kept()})
                                       : x.tp_replicated_activation)
                : 0);
    params_[l + 1] = params_[l] + x.params;
    repl_params_[l + 1] = repl_params_[l] + std::min(x.tp_replicated_params, x.params);
    if (x.tied_to >= 0) tied_.push_back(static_cast<int>(l));
    out_.push_back(x.output_bytes);
  }
  capacity_ = std::numeric_limits<int64_t>::max();
  for (const Device& d : s.cluster.devices()) {
    capacity_ = std::min(capacity_, d.gpu.memory_bytes);
    reserved_ = std::max(reserved_, d.gpu.reserved_bytes);
    launch_ = std::max(launch_, d.gpu.launch_overhead.seconds());
  }
  pb_ = bytes_per_param(s.training);
  price_splits(comm, context, expert, etp);
}

void CostModel::price_splits(const LayerCommCosts& comm, int context, int expert,
                             int expert_tensor) {
  const auto& layers = s_.model.layers;
  // Only where a layer can be priced again at a replica's samples, or the layers' tensor and
  // expert collectives pay a latency each replica pays again.
  const bool latency = t_ > 1 || expert > 1 || expert_tensor > 1;
  if (!latency && std::none_of(layers.begin(), layers.end(),
                               [](const Layer& l) { return l.tensor_retime || l.sample_retime; }))
    return;
  // At most one sample per replica, and no more replicas than the cluster holds.
  const int64_t groups = s_.cluster.num_devices() / std::max(1, t_ * context);
  const int64_t K = std::min<int64_t>({s_.training.micro_batch, groups, 64});
  for (int64_t k = 2; k <= K; ++k) {
    SplitSums sums;
    sums.comm = CommSums(layers.size());
    for (auto* v : {&sums.f, &sums.b, &sums.w, &sums.rf}) v->assign(layers.size() + 1, 0.0);
    for (size_t l = 0; l < layers.size(); ++l) {
      // (As the constructor's loop: the k shards' time, which compute_time divides by the
      // split, and their collectives.)
      const Layer x =
          rank_layer(layers[l], t_, expert, context, expert_tensor, static_cast<int>(k));
      const double f = x.forward.seconds();
      sums.f[l + 1] = sums.f[l] + f;
      sums.b[l + 1] = sums.b[l] + x.backward_input.seconds();
      sums.w[l + 1] = sums.w[l] + x.backward_weight.seconds();
      sums.rf[l + 1] = sums.rf[l] + (x.recomputed ? f : 0.0);
      // (Each replica pays the latency once: the split's times, which stage_time divides
      // by the split.)
      sums.comm.add(l, comm.of(x, split(static_cast<int>(k))), x.recomputed,
                    rerun_share(x, s_.strategy.recompute_modules));
    }
    splits_.push_back(std::move(sums));
  }
}

}  // namespace pipesim::planner
