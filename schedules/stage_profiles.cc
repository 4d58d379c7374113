// Per-stage costs summed from the layers of each global stage (schedules/lower.h).
#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "core/checked.h"
#include "schedules/lower.h"

namespace pipesim {

namespace {

// Megatron-LM's all-reduces of a generated transformer layer, and the weight-gradient
// GEMMs that may run beside them (none in the forward).
std::vector<TpCollective> allreduces(int n, int64_t bytes, const std::vector<Time>& beside = {}) {
  if (bytes == 0) return {};
  std::vector<TpCollective> out(static_cast<size_t>(n),
                                TpCollective{TpCollective::Kind::kAllReduce, bytes, Time::zero()});
  for (size_t q = 0; q < out.size() && q < beside.size(); ++q) out[q].beside = beside[q];
  return out;
}

// A tensor all-reduce of `x` as sequence parallelism splits it under fp8 (Layer::tp_fp8):
// the all-gather in fp8, and in the forward under Transformer Engine's overlap (`full`) the
// reduce-scatter too.
TpCollective in_fp8(TpCollective c, const Layer& x, bool forward, bool full) {
  c.gather_fp8 = x.tp_fp8;
  c.scatter_fp8 = x.tp_fp8 && forward && full;
  return c;
}
std::vector<TpCollective> in_fp8(std::vector<TpCollective> v, const Layer& x, bool forward,
                                 bool full) {
  for (TpCollective& c : v) c = in_fp8(c, x, forward, full);
  return v;
}

// The layer as stage_profiles sees it at tensor degree t: a shape-described layer's times
// become t x one rank's (the lowering divides by t), its activations t x one rank's split
// share plus the replicated part. (What stage_profiles reads; shape-described layers have
// no attention core and no Megatron all-reduces.)
Layer sharded(const Layer& layer, const TensorShard& s, int t) {
  Layer x;
  x.optimizer = layer.optimizer;
  x.params = layer.params;
  x.output_bytes = layer.output_bytes;
  const char* what = "a tensor-parallel layer's costs";
  x.forward = checked_mul(s.forward, t, what);
  x.backward_input = checked_mul(s.backward_input, t, what);
  x.backward_weight = checked_mul(s.backward_weight, t, what);
  x.activation_bytes =
      checked_add(checked_mul(s.split_activation, int64_t{t}, what), s.replicated_activation, what);
  x.tp_replicated_activation = s.replicated_activation;
  if (layer.weight_activation && layer.activation_bytes > 0) {
    // What W reads, as the same share of one rank's activations as of the whole layer's.
    const double share =
        static_cast<double>(layer.weight_kept()) / static_cast<double>(layer.activation_bytes);
    // share <= 1, so the products stay at most the (64-bit) activations they scale.
    const auto scaled = [&](int64_t bytes) {
      const double v = std::floor(static_cast<double>(bytes) * share);
      return v >= static_cast<double>(bytes) ? bytes : static_cast<int64_t>(v);
    };
    x.weight_activation = scaled(x.activation_bytes);
    x.tp_replicated_weight_activation = scaled(s.replicated_activation);
  }
  return x;
}

// A MoE layer's routed experts run at the busiest rank's pace: their time stretched by
// the routing imbalance, at most the capacity factor (tokens past it are dropped).
void stretch_experts(Layer& x, double imbalance) {
  if (x.moe && x.moe->capacity > 0) imbalance = std::min(imbalance, x.moe->capacity);
  if (!(imbalance > 1)) return;
  const auto more = [imbalance](Time t) {
    return Time::ps(static_cast<int64_t>(std::ceil(static_cast<double>(t.ps_count()) * imbalance)));
  };
  Time longer;  // what the experts' forward gains
  for (LayerPiece& p : x.pieces) {
    if (p.kind != PieceKind::kExperts) continue;
    longer += more(p.forward) - p.forward;
    x.forward += more(p.forward) - p.forward;
    x.backward_input += more(p.backward_input) - p.backward_input;
    x.backward_weight += more(p.backward_weight) - p.backward_weight;
    p.forward = more(p.forward);
    p.backward_input = more(p.backward_input);
    p.backward_weight = more(p.backward_weight);
  }
  // Their re-runs alike: the activation alone, or the whole block's experts.
  for (RecomputePart& r : x.recompute_parts) {
    if (r.module == RecomputeModule::kMoeAct) r.cost.forward = more(r.cost.forward);
    if (r.module != RecomputeModule::kMoe) continue;
    r.cost.forward += longer;
    r.before_combine += longer;
  }
}

// A MoE layer's shared experts (its last piece, as the ops run). With the overlap on and
// tokens exchanged (EP > 1) they move to just after the router and permutation: the
// dispatch all-to-all runs beside them (issued when they start; the routed experts wait for
// both), and in the backward the dispatch's gradients travel beside their backward.
// Otherwise they join the piece before them (the un-permutation): one piece, as without
// shared experts.
void place_shared_experts(const Layer& x, const GroupDegrees& g,
                          std::vector<StageProfile::LayerCost::Piece>& pieces) {
  const auto kind = [&](PieceKind k) {
    for (size_t i = 0; i < x.pieces.size(); ++i)
      if (x.pieces[i].kind == k) return i;
    return x.pieces.size();
  };
  const size_t shared = kind(PieceKind::kSharedExperts), pre = kind(PieceKind::kPreExperts),
               experts = kind(PieceKind::kExperts);
  if (shared == x.pieces.size() || shared == 0) return;
  if (!g.shared_expert_overlap || g.expert <= 1 || pre + 1 != experts || experts >= shared) {
    auto& before = pieces[shared - 1];
    before.forward += pieces[shared].forward;
    before.backward_input += pieces[shared].backward_input;
    before.backward_weight += pieces[shared].backward_weight;
    pieces.erase(pieces.begin() + static_cast<std::ptrdiff_t>(shared));
    return;
  }
  // (Under expert tensor parallelism the all-gather after the dispatch waits for it: it
  // follows the shared experts; in the backward the dispatch's gradients follow the
  // reduce-scatter.)
  auto moved = pieces[shared];
  moved.forward_beside = std::exchange(pieces[pre].forward_after, TpCollective{});
  moved.forward_after = std::exchange(pieces[pre].forward_then, TpCollective{});
  TpCollective& back = pieces[experts].backward_then.bytes > 0 ? pieces[experts].backward_then
                                                               : pieces[experts].backward_after;
  moved.backward_beside = std::exchange(back, TpCollective{});
  pieces.erase(pieces.begin() + static_cast<std::ptrdiff_t>(shared));
  pieces.insert(pieces.begin() + static_cast<std::ptrdiff_t>(experts), moved);
}

// The collectives around a MoE layer's routed experts (layer_pieces): one rank's `tokens`
// (bytes of its routed copies) dispatched over the expert group and, under expert tensor
// parallelism, gathered over the expert-tensor group (e times the bytes); the first of two
// after a part is its `after`, the second its `then`.
void expert_collectives(PieceKind kind, const MoeFacts& moe, int64_t tokens, const GroupDegrees& g,
                        StageProfile::LayerCost::Piece& p) {
  using K = TpCollective::Kind;
  TpCollective a2a{K::kAllToAll, g.expert > 1 ? tokens : 0, {}, CollectiveGroup::kExpert};
  if (g.dedup_dispatch) {
    a2a.top_k = moe.top_k;
    a2a.experts = moe.experts;
  }
  const int e = g.expert_tensor;
  const int64_t gathered = e > 1 ? checked_mul(tokens, int64_t{e}, "an expert all-gather") : 0;
  const TpCollective gather{K::kAllGather, gathered, {}, CollectiveGroup::kExpertTensor};
  const TpCollective scatter{K::kReduceScatter, gathered, {}, CollectiveGroup::kExpertTensor};
  // In the order they run after the part: the empty ones left out.
  const auto set = [](TpCollective& after, TpCollective& then, std::vector<TpCollective> order) {
    std::erase_if(order, [](const TpCollective& c) { return c.bytes == 0; });
    if (!order.empty()) after = order[0];
    if (order.size() > 1) then = order[1];
  };
  switch (kind) {
    case PieceKind::kPreExperts:  // forward: dispatch, gather; backward: nothing after it
      set(p.forward_after, p.forward_then, {a2a, gather});
      break;
    case PieceKind::kExperts:  // forward: scatter, combine; backward: scatter, the dispatch's
      set(p.forward_after, p.forward_then, {scatter, a2a});
      set(p.backward_after, p.backward_then, {scatter, a2a});
      break;
    default:  // after the rest's backward: the combine's gradients, gather
      set(p.backward_after, p.backward_then, {a2a, gather});
      break;
  }
}

// The collectives a selective recompute of `modules` issues again in layer `x` (one rank
// of tensor degree t, 1/context of the tokens), in the order it runs them (LayerCost::
// tp_recompute), with the re-run's time before each where it is not an equal share
// (recompute_leads). Tensor ones (RecomputePart::tp_allreduces): all-reduces (a
// reduce-scatter and an all-gather each under sequence parallelism), or with `regather`
// under sequence parallelism their all-gathers alone, each of `tp_bytes`, in fp8 where the
// forward's are. A MoE block's (RecomputePart::exchanges), as its forward issues them: the
// dispatch (and the expert-tensor gather) after the router and the permutation, the
// (scatter and) combine after the routed experts; exposed, even where the forward runs
// the shared experts beside the dispatch. (lc.recompute: the layer's whole re-run.)
void rerun_collectives(const Layer& x, RecomputeModules modules, int t, bool sequence_parallel,
                       const GroupDegrees& g, int64_t tp_bytes, StageProfile::LayerCost& lc) {
  modules = effective_modules(modules);
  for (const RecomputePart& part : x.recompute_parts) {
    if ((modules & module_bit(part.module)) == 0) continue;
    const auto kind = part.regather && sequence_parallel ? TpCollective::Kind::kAllGather
                                                         : TpCollective::Kind::kAllReduce;
    for (int i = 0; t > 1 && tp_bytes > 0 && x.tensor_parallel && i < part.tp_allreduces; ++i)
      lc.tp_recompute.push_back(
          in_fp8(TpCollective{kind, tp_bytes, Time::zero()}, x, true, g.tensor_pieces));
    if (!part.exchanges || !x.moe || (g.expert <= 1 && g.expert_tensor <= 1)) continue;
    StageProfile::LayerCost::Piece pre, experts;
    const int64_t tokens = x.moe->dispatch_bytes / (int64_t{t} * g.context);
    expert_collectives(PieceKind::kPreExperts, *x.moe, tokens, g, pre);
    expert_collectives(PieceKind::kExperts, *x.moe, tokens, g, experts);
    PIPESIM_ASSERT(lc.tp_recompute.empty(), "a MoE block's layer re-runs no tensor module");
    // (The layer's other modules, the attention's and the norm's, run before the block.)
    const Time first = part.before_dispatch + (lc.recompute - part.cost.forward);
    for (const auto& [lead, c] : {std::pair{first, pre.forward_after},
                                  {Time::zero(), pre.forward_then},
                                  {part.before_combine, experts.forward_after},
                                  {Time::zero(), experts.forward_then}}) {
      if (c.bytes == 0) {
        if (lead > Time::zero() && !lc.recompute_leads.empty()) lc.recompute_leads.back() += lead;
        continue;
      }
      lc.tp_recompute.push_back(c);
      lc.recompute_leads.push_back(lead);
    }
  }
}

// A reduce-scatter pipelined with the GEMM producing its input (Transformer Engine's
// userbuffers, `pipeline` with num_splits 4): the GEMM runs in kSplits chunks and each chunk's
// reduce-scatter starts when the chunk is done, so the collective runs beside all the GEMM
// but its first chunk (issued that much into the GEMM).
Time pipelined(Time gemm) {
  constexpr int64_t kSplits = 4;
  return gemm - gemm / kSplits;
}

// The collectives of a layer's pieces (LayerCost::Piece) at tensor degree t, for one rank of
// one micro-batch:
//   tensor   the all-reduce after the attention block (forward: after the projection;
//            backward: after QKV's input gradient) and after a dense MLP block
//   context  p2p: the ring of keys and values beside the core (the backward's ring carries
//            their gradients too: twice the bytes); all-gather: keys and values gathered
//            before the core, gathered again before its backward and their gradients
//            reduce-scattered after it; a2a: queries, keys and values to head shards before
//            the core and the output back after it (the backward the other way)
//   expert   dispatch after the router and combine after the experts, all-to-all; the
//            backward sends the gradients back the same ways. Experts split over
//            expert-tensor ranks (Megatron-Core's alltoall dispatcher with
//            expert_tensor_parallel_size > 1): the dispatched tokens are all-gathered over
//            the expert-tensor group before the experts and their outputs reduce-scattered
//            after them (forward: dispatch, all-gather, experts, reduce-scatter, combine; the
//            backward the mirror: the combine's gradients, all-gather, experts,
//            reduce-scatter, the dispatch's)
std::vector<StageProfile::LayerCost::Piece> layer_pieces(const Layer& x, int t,
                                                         const GroupDegrees& g) {
  using K = TpCollective::Kind;
  const auto coll = [](K kind, int64_t bytes, CollectiveGroup group, Time beside = {}) {
    return TpCollective{kind, bytes, beside, group};
  };
  const int cp = g.context;
  const int64_t kv = x.attention ? x.attention->kv_bytes / t : 0;  // a rank's heads, all tokens
  const int64_t qkv = x.attention ? x.attention->qkv_bytes / (int64_t{t} * cp) : 0;
  const int64_t out = x.output_bytes / (int64_t{t} * cp);
  const std::vector<Time>& beside = x.tp_backward_beside;
  std::vector<StageProfile::LayerCost::Piece> result;
  for (const LayerPiece& lp : x.pieces) {
    StageProfile::LayerCost::Piece p;
    p.forward = lp.forward;
    p.backward_input = lp.backward_input;
    p.backward_weight = lp.backward_weight;
    const bool tp = t > 1 && x.tp_allreduce_bytes > 0;
    // (A context rank's tensor group carries its own 1/cp of the tokens.)
    const auto tp_ar = [&](Time w, bool forward) {
      return in_fp8(coll(K::kAllReduce, ceil_div(x.tp_allreduce_bytes, int64_t{cp}),
                         CollectiveGroup::kTensor, w),
                    x, forward, g.tensor_pieces);
    };
    switch (lp.kind) {
      case PieceKind::kPreAttention:
        if (tp) {
          p.backward_after = tp_ar(beside.empty() ? Time{} : beside.back(), false);
          p.lead_forward = lp.lead_forward;
        }
        if (cp > 1 && g.context_comm == ContextComm::kAllGather)
          p.forward_after = coll(K::kAllGather, kv, CollectiveGroup::kContext);
        if (cp > 1 && g.context_comm == ContextComm::kA2a)
          p.forward_after = coll(K::kAllToAll, qkv, CollectiveGroup::kContext);
        break;
      case PieceKind::kAttention:
        if (cp > 1 && g.context_comm == ContextComm::kP2p) {
          p.forward_beside = coll(K::kAllGather, kv, CollectiveGroup::kContext);
          p.backward_beside = coll(K::kAllGather, 2 * kv, CollectiveGroup::kContext);
        }
        if (cp > 1 && g.context_comm == ContextComm::kAllGather)
          p.backward_after = coll(K::kReduceScatter, kv, CollectiveGroup::kContext);
        if (cp > 1 && g.context_comm == ContextComm::kA2a) {
          p.forward_after = coll(K::kAllToAll, out, CollectiveGroup::kContext);
          p.backward_after = coll(K::kAllToAll, qkv, CollectiveGroup::kContext);
        }
        break;
      case PieceKind::kPostAttention:
        if (tp) {
          p.forward_after = tp_ar(pipelined(lp.tail_forward), true);
          p.lead_backward = lp.lead_backward;
        }
        if (cp > 1 && g.context_comm == ContextComm::kAllGather)
          p.backward_after = coll(K::kAllGather, kv, CollectiveGroup::kContext);
        if (cp > 1 && g.context_comm == ContextComm::kA2a)
          p.backward_after = coll(K::kAllToAll, out, CollectiveGroup::kContext);
        break;
      case PieceKind::kMlp:
        if (tp) {
          p.forward_after = tp_ar(pipelined(lp.tail_forward), true);
          p.backward_after = tp_ar(beside.size() > 1 ? beside.front() : Time{}, false);
          p.lead_forward = lp.lead_forward;
          p.lead_backward = lp.lead_backward;
        }
        break;
      case PieceKind::kSharedExperts:  // beside the dispatch or after the rest (below)
        break;
      case PieceKind::kPreExperts:
      case PieceKind::kExperts:
      case PieceKind::kPostExperts:
        if (x.moe && (g.expert > 1 || g.expert_tensor > 1))
          expert_collectives(lp.kind, *x.moe, x.moe->dispatch_bytes / (int64_t{t} * cp), g, p);
        break;
    }
    result.push_back(p);
  }
  place_shared_experts(x, g, result);
  return result;
}

// The layer as one rank of its stage costs it, where that differs from the layer itself:
// a shape-described layer's shard (t x one rank's), an analytic layer retimed at its
// degrees (one rank's GEMMs are 1/t of the layer's, and less efficient for it; a MoE
// layer's experts likewise at the expert degrees; a context rank's ops at its share of the
// tokens), the tokens an expert-tensor group gathers, the routing imbalance, and the ops
// every tensor rank runs whole without sequence parallelism.
std::optional<Layer> at_degrees(const Layer& base, const std::optional<TensorShard>& shard, int t,
                                bool sequence_parallel, const GroupDegrees& groups, int shards) {
  std::optional<Layer> copy;
  if (shard) copy = sharded(base, *shard, t);
  const int ep = base.moe ? groups.expert : 1;
  const int etp = base.moe ? groups.expert_tensor : 1;
  // A replica's ops see its share of the samples as a context rank's see its share of the
  // tokens: both shrink every op's rows alike (Layer::at_degrees).
  const int cp = groups.context;
  // (A layer priced again only at its samples changes only with them.)
  const bool retimed = base.tensor_retime ? t > 1 || ep > 1 || etp > 1 || cp > 1 || shards > 1
                                          : base.sample_retime && cp * shards > 1;
  if (!shard && retimed) copy = base.at_degrees(t, ep, cp, etp, shards);
  if (base.moe && etp > 1) {
    // Each rank keeps the tokens its expert-tensor group gathered for the experts (the
    // first GEMM's input, which W reads): etp times its own routed copies.
    if (!copy) copy = base;
    const char* what = "a layer's activations";
    const int64_t more = checked_mul(base.moe->dispatch_bytes, int64_t{etp - 1}, what);
    copy->activation_bytes = checked_add(copy->activation_bytes, more, what);
    if (copy->weight_activation)
      *copy->weight_activation = checked_add(*copy->weight_activation, more, what);
    // (Inside the MoE block: recomputing the whole block keeps none of them.)
    for (RecomputePart& r : copy->recompute_parts)
      if (r.module == RecomputeModule::kMoe) r.cost.bytes = checked_add(r.cost.bytes, more, what);
  }
  if (base.moe && groups.routing_imbalance > 1) {
    if (!copy) copy = base;
    stretch_experts(*copy, groups.routing_imbalance);
  }
  if (!shard && t > 1 && !sequence_parallel &&
      base.tp_whole_forward + base.tp_whole_backward_input + base.tp_whole_backward_weight >
          Time::zero()) {
    // Whole on every rank: t times over, for the lowering's division by t.
    if (!copy) copy = base;
    const char* what = "a tensor-parallel layer's costs";
    copy->forward =
        checked_add(copy->forward, checked_mul(base.tp_whole_forward, t - 1, what), what);
    copy->backward_input = checked_add(
        copy->backward_input, checked_mul(base.tp_whole_backward_input, t - 1, what), what);
    copy->backward_weight = checked_add(
        copy->backward_weight, checked_mul(base.tp_whole_backward_weight, t - 1, what), what);
  }
  return copy;
}

// The layer's optimizer time as its stage counts it: one rank updates 1/t of the dense
// weights (the lowering divides by t) and 1/(ep etp) of the routed experts.
Time rank_optimizer(const Layer& layer, int t, const GroupDegrees& groups) {
  const int64_t experts = layer.moe ? layer.moe->expert_params : 0;
  const int ep = layer.moe ? groups.expert : 1, etp = layer.moe ? groups.expert_tensor : 1;
  if (experts <= 0 || layer.params <= 0 || (t <= 1 && ep <= 1 && etp <= 1)) return layer.optimizer;
  const double share = (static_cast<double>(layer.params - experts) +
                        static_cast<double>(experts) * t / (ep * etp)) /
                       static_cast<double>(layer.params);
  return Time::ps(
      static_cast<int64_t>(std::ceil(static_cast<double>(layer.optimizer.ps_count()) * share)));
}

// Offloading (Megatron-Core's CPU offloading, Transformer Engine's double-buffered
// handler): the first `scope.offload_layers` transformer layers of stage `s`, never its
// last one, copy the activations their backward reads to the host as each forward ends,
// over the host link, and back before each backward. A copy out runs beside the next
// layer's forward and one back beside the next-later layer's backward (the order the
// backward runs them); what a copy takes past that layer's time stalls the GPU, added to
// the layer the wait falls in. The copies pass through two layers' buffers, which the
// layers kept after the moved ones have not yet taken in the forward (and have given back
// in the backward): the buffer counts only what it holds beyond them. `t_whole`: the
// tensor degree where tensor parallelism leaves the replicated activations whole on every
// rank (no sequence parallelism), else 1.
struct LayerBytes {
  int64_t activation = 0, replicated = 0;  // Layer::activation_bytes, tp_replicated_activation
};
void offload(const Model& model, const StageSpec& s, const ActivationScope& scope, int t_whole,
             const std::vector<LayerBytes>& bytes_of, StageProfile& p) {
  std::vector<char> out =
      checkpointed_layers(model, s.first_layer, s.last_layer, scope.offload_layers);
  const std::vector<char> any = checkpointed_layers(model, s.first_layer, s.last_layer, 0);
  const auto last = std::find(any.rbegin(), any.rend(), 1);
  if (last == any.rend()) return;
  out[static_cast<size_t>(any.rend() - last) - 1] = 0;  // its backward reads them at once
  const size_t L = out.size();
  PIPESIM_ASSERT(p.layers.size() == L && bytes_of.size() == L, "one cost per layer");
  LayerBytes largest;
  size_t end = 0;  // one past the last layer moved
  for (size_t j = 0; j + 1 < L; ++j) {
    if (out[j] == 0) continue;
    const LayerBytes& layer = bytes_of[j];
    // (The profile's costs are t ranks' worth, as the forward's times are.)
    const double bytes = static_cast<double>(layer.activation) +
                         static_cast<double>(t_whole - 1) * static_cast<double>(layer.replicated);
    const Time copy =
        checked_scale(Time::s(1), bytes / scope.host_bytes_per_s, "an offload copy's time");
    p.offloaded_bytes += layer.activation;  // at most activation_bytes: no overflow
    p.replicated_offloaded += layer.replicated;
    if (layer.activation > largest.activation) largest = layer;
    end = j + 1;
    StageProfile::LayerCost& next = p.layers[j + 1];
    StageProfile::LayerCost& self = p.layers[j];
    const Time out_stall = std::max(Time::zero(), copy - next.forward);
    const Time back_stall =
        std::max(Time::zero(), copy - (next.backward_input + next.backward_weight));
    next.forward += out_stall;
    if (!next.pieces.empty()) next.pieces.back().forward += out_stall;
    self.backward_input += back_stall;
    if (!self.pieces.empty()) self.pieces.back().backward_input += back_stall;
    p.forward = checked_add(p.forward, out_stall, "a stage's forward time");
    p.backward_input = checked_add(p.backward_input, back_stall, "a stage's backward time");
  }
  int64_t after = 0;
  for (size_t j = end; j < L; ++j) after += bytes_of[j].activation;  // within activation_bytes
  const int64_t buffer =
      std::max<int64_t>(0, std::min(2 * largest.activation, p.offloaded_bytes) - after);
  p.offload_buffer_bytes = buffer;
  // (Of it, what tensor parallelism leaves whole: the largest layer's share.)
  p.replicated_offload_buffer = largest.activation > 0
                                    ? static_cast<int64_t>(static_cast<double>(buffer) *
                                                           static_cast<double>(largest.replicated) /
                                                           static_cast<double>(largest.activation))
                                    : 0;
}

}  // namespace

std::vector<StageProfile> stage_profiles(const Model& model, const std::vector<StageSpec>& stages,
                                         const std::vector<Recompute>& recompute,
                                         const std::vector<int>& tensor, bool sequence_parallel,
                                         const GroupDegrees& groups, const ActivationScope& scope) {
  std::vector<StageProfile> out;
  out.reserve(stages.size());
  for (size_t g = 0; g < stages.size(); ++g) {
    const StageSpec& s = stages[g];
    const Recompute mode = recompute.empty() ? Recompute::kFull : recompute[g];
    const std::vector<char> checkpointed =
        checkpointed_layers(model, s.first_layer, s.last_layer, scope.layers);
    int64_t replicated_freed = 0;  // selective: of the bytes not kept, whole on every rank
    std::vector<LayerBytes> bytes_of;
    StageProfile p;
    for (int l = s.first_layer; l <= s.last_layer; ++l) {
      const bool rerun = checkpointed[static_cast<size_t>(l - s.first_layer)] != 0;
      const int t = tensor.empty() ? 1 : tensor[g];
      const Layer& base = model.layers.at(static_cast<size_t>(l));
      // The shards each micro-batch's samples are priced in on this stage's replicas.
      const int shards = sample_shards(s.replicas, groups.micro_batch, groups.round_robin);
      std::optional<TensorShard> shard;
      if (t > 1 && base.tensor_split) shard = (*base.tensor_split)(t, shards);
      const std::optional<Layer> copy =
          at_degrees(base, shard, t, sequence_parallel, groups, shards);
      const Layer& layer = copy ? *copy : base;
      const int64_t experts = layer.moe ? layer.moe->expert_params : 0;
      const Time optimizer = rank_optimizer(layer, t, groups);
      p.forward = checked_add(p.forward, layer.forward, "a stage's forward time");
      p.backward_input =
          checked_add(p.backward_input, layer.backward_input, "a stage's backward time");
      p.backward_weight =
          checked_add(p.backward_weight, layer.backward_weight, "a stage's backward time");
      p.optimizer = checked_add(p.optimizer, optimizer, "a stage's optimizer time");
      p.activation_bytes =
          checked_add(p.activation_bytes, layer.activation_bytes, "a stage's activation memory");
      bytes_of.push_back({layer.activation_bytes, layer.tp_replicated_activation});
      const int64_t weight_kept = layer.weight_kept();
      p.weight_activation_bytes += weight_kept;  // at most activation_bytes: no overflow
      p.replicated_weight_activation +=
          layer.weight_activation ? std::min({layer.tp_replicated_weight_activation,
                                              layer.tp_replicated_activation, weight_kept})
                                  : layer.tp_replicated_activation;
      // Tied weights whose owner is on another stage: this stage's own copy.
      const int64_t params =
          checked_add(layer.params, model.tied_copy(l, s.first_layer, s.last_layer),
                      "a stage's parameter count");
      p.params = checked_add(p.params, params, "a stage's parameter count");
      p.replicated_params =
          checked_add(p.replicated_params, layer.tp_replicated_params, "a stage's parameter count");
      // A context rank's tensor collectives carry its 1/cp of the tokens.
      const int64_t tp_bytes = ceil_div(layer.tp_allreduce_bytes, int64_t{groups.context});
      StageProfile::LayerCost cost{
          layer.backward_input,
          layer.backward_weight,
          params,
          layer.tp_replicated_params,
          layer.forward,
          in_fp8(allreduces(layer.tp_forward_allreduces, tp_bytes), layer, true,
                 groups.tensor_pieces),
          in_fp8(allreduces(layer.tp_backward_allreduces, tp_bytes, layer.tp_backward_beside),
                 layer, false, groups.tensor_pieces),
          rerun,
          {},
          experts,
          Time::zero(),
          {},
          {}};
      p.expert_params = checked_add(p.expert_params, experts, "a stage's parameter count");
      if (!layer.pieces.empty() &&
          (layer.moe || groups.context > 1 || groups.expert > 1 ||
           (groups.tensor_pieces && sequence_parallel && t > 1 && layer.tensor_parallel))) {
        cost.pieces = layer_pieces(layer, t, groups);
        cost.tp_forward.clear();
        cost.tp_backward.clear();
        p.pieces = true;
      }
      if (shard) {
        cost.tp_forward = shard->forward_collectives;
        cost.tp_backward = shard->backward_collectives;
        // One input-gradient all-reduce (a column-split linear or convolution): the layer's
        // weight gradient can run beside it.
        if (cost.tp_backward.size() == 1 &&
            cost.tp_backward[0].kind == TpCollective::Kind::kAllReduce)
          cost.tp_backward[0].beside = layer.backward_weight;
      }
      p.layers.push_back(std::move(cost));
      p.replicated_activation =
          checked_add(p.replicated_activation, layer.tp_replicated_activation, "activations");
      // What recompute keeps and re-allocates, layer by layer (Korthikanti et al. 2022).
      const int64_t input =
          l == 0 ? model.input_bytes : model.layers.at(static_cast<size_t>(l) - 1).output_bytes;
      if (mode == Recompute::kSelective) {
        RecomputeCost again = layer.selective(scope.modules);
        again.bytes -= std::min(again.bytes, layer.held_whole(scope.modules, t, sequence_parallel));
        p.kept_bytes =
            checked_add(p.kept_bytes, layer.activation_bytes - again.bytes, "kept activations");
        p.transient_bytes = std::max(p.transient_bytes, again.bytes);
        Time rerun_time = again.forward;
        // Ops run whole on every rank: t times over, as the forward counts them (at_degrees).
        if (!shard && t > 1 && !sequence_parallel) {
          for (const RecomputePart& part : layer.recompute_parts) {
            if ((effective_modules(scope.modules) & module_bit(part.module)) == 0) continue;
            rerun_time =
                checked_add(rerun_time, checked_mul(part.whole_forward, t - 1, "a recompute time"),
                            "a recompute time");
          }
        }
        p.recompute_time = checked_add(p.recompute_time, rerun_time, "a recompute time");
        StageProfile::LayerCost& lc = p.layers.back();
        lc.recompute = rerun_time;
        if (!shard)
          rerun_collectives(layer, scope.modules, t, sequence_parallel, groups, tp_bytes, lc);
        replicated_freed += std::min(again.replicated_bytes, layer.tp_replicated_activation);
      } else if (rerun) {
        // Full: the layer's input, which tensor parallelism leaves whole.
        const int64_t kept = std::min(input, layer.activation_bytes);
        p.kept_bytes = checked_add(p.kept_bytes, kept, "kept activations");
        p.replicated_kept = checked_add(p.replicated_kept, kept, "kept activations");
        p.transient_bytes = std::max(p.transient_bytes, layer.activation_bytes - kept);
        p.recompute_time = checked_add(p.recompute_time, layer.forward, "a recompute time");
      } else {
        // Not checkpointed (an embedding, an output layer, a layer past
        // Strategy::recompute_layers): everything stays, nothing reruns.
        p.kept_bytes = checked_add(p.kept_bytes, layer.activation_bytes, "kept activations");
        p.replicated_kept =
            checked_add(p.replicated_kept, layer.tp_replicated_activation, "kept activations");
      }
    }
    if (mode == Recompute::kNone && scope.offload_layers > 0)
      offload(model, s, scope, tensor.empty() || sequence_parallel ? 1 : tensor[g], bytes_of, p);
    p.full_recompute = mode != Recompute::kSelective;
    // Selective recompute keeps the layer-norm and dropout tensors among the rest
    // (Korthikanti et al., Table 2), unless it re-runs the norms.
    if (!p.full_recompute)
      p.replicated_kept = std::max<int64_t>(0, p.replicated_activation - replicated_freed);
    p.input_bytes = s.first_layer == 0
                        ? model.input_bytes
                        : model.layers.at(static_cast<size_t>(s.first_layer) - 1).output_bytes;
    p.output_bytes = model.layers.at(static_cast<size_t>(s.last_layer)).output_bytes;
    out.push_back(p);
  }
  return out;
}

}  // namespace pipesim
