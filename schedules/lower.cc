#include "schedules/lower.h"

#include <algorithm>
#include <cmath>

#include "core/checked.h"
#include "schedules/internal/lowering.h"

namespace pipesim {
namespace lowering {

TaskGraph Lowering::run() {
  size_t steps = 0;
  for (const auto& pos : in_.orders.steps) {
    for (const auto& list : pos) steps += list.size();
  }
  b_.reserve(static_cast<size_t>(built_) * blocks_ * steps * 2,
             static_cast<size_t>(built_) * blocks_ * steps * 3);
  if (copies_ > 1) b_.set_copies(placement_, built_ < copies_ ? built_ : 0);
  add_static_memory();
  add_compute();
  scale_compute();
  add_launch_overheads();
  if (!in_.p2p_overlap) index_streams();
  add_pipeline_transfers();
  add_tensor_collectives();
  add_group_collectives();
  add_allreduces();
  add_weight_gathers();
  TaskGraph graph = std::move(b_).build();
  // A user's order can deadlock: say where. Generated orders cannot; the tests check them
  // (EverySchedule.Invariants), the engine asserts that every op runs, and release builds
  // skip this whole-graph pass (7 % of generating and simulating a zb-v pipeline).
#ifdef NDEBUG
  constexpr bool kCheckGenerated = false;
#else
  constexpr bool kCheckGenerated = true;
#endif
  if (!in_.user_order && !kCheckGenerated) return graph;
  if (auto problem = graph.validate()) {
    if (in_.user_order)
      throw InputError(*problem, "an order in which every op's inputs come before it",
                       "strategy.order");
    PIPESIM_ASSERT(false, problem->c_str());
  }
  return graph;
}

Lowering::Cursor Lowering::make_cursor(int c, int p, int lane) {
  Cursor cur;
  cur.c = c;
  cur.p = p;
  cur.lane = lane;
  cur.t = tensor(p);
  cur.j = lane / cur.t;
  cur.k = lane % cur.t;
  const int j = cur.j;
  cur.d = device(c, p, lane);
  // Replicas split each micro-batch into whole samples (round-robin replicas take whole
  // micro-batches instead).
  cur.split = sample_share(p, j);
  cur.split.den *= in_.context;  // a context rank's share of the tokens
  cur.steps = &in_.orders.steps[static_cast<size_t>(p)][static_cast<size_t>(j)];
  cur.has_r.assign(static_cast<size_t>(G_ / P_) * Mb_, 0);
  cur.block_ops.assign(static_cast<size_t>(G_ / P_), 0);
  cur.block_second.assign(cur.block_ops.size(), kNone);
  cur.has_w.assign(cur.has_r.size(), 0);
  for (const Step& s : *cur.steps) {
    const size_t k = static_cast<size_t>(s.chunk) * Mb_ + static_cast<size_t>(s.micro_batch);
    if (s.kind == OpKind::kRecompute) cur.has_r[k] = 1;
    if (s.kind == OpKind::kWeightGrad) cur.has_w[k] = 1;
  }
  for (const int g : stages_of(p)) cur.optimizer += in_.stages[static_cast<size_t>(g)].optimizer;
  // Each rank updates its 1/t, and under ZeRO its 1/n shard of that.
  cur.optimizer = split_time(cur.optimizer, cur.t * zero_ranks(p));
  cur.last_grad.assign(cur.steps->size(), 0);
  // ZeRO-2 and 3 keep only their shard of the gradients, so every micro-batch's gradients
  // are reduce-scattered as its backward produces them (DeepSpeed, PyTorch FSDP); without
  // sharded gradients they are reduced once, after the last micro-batch.
  // (Under a zero-bubble order with the backward's tensor overlap a W runs inside its B and
  // has no buckets of its own: there the gradients are reduce-scattered once, after the
  // last micro-batch, as under ZeRO-1.)
  const bool one_pass = !in_.orders.early_input_grad;  // B and W one autograd pass
  const bool every =
      in_.zero >= 2 && zero_ranks(p) > 1 &&
      (one_pass || !(in_.tensor_overlap != TensorOverlap::kNone && cur.t > 1));
  if (syncs_gradients(p)) {
    std::vector<long> last(static_cast<size_t>(G_ / P_),
                           -1);  // per chunk, since the last optimizer step
    for (size_t i = 0; i < cur.steps->size(); ++i) {
      const Step& s = (*cur.steps)[i];
      const size_t k = static_cast<size_t>(s.chunk) * Mb_ + static_cast<size_t>(s.micro_batch);
      if (s.kind == OpKind::kWeightGrad || (s.kind == OpKind::kBackward && !cur.has_w[k])) {
        last[static_cast<size_t>(s.chunk)] = static_cast<long>(i);
        if (every) cur.last_grad[i] = 1;
      } else if (s.kind == OpKind::kOptimizer) {
        for (long& l : last) {
          // (Without overlap_grad_reduce no buckets: the reduction waits for the backward.)
          if (l >= 0 && in_.overlap_grad_reduce) cur.last_grad[static_cast<size_t>(l)] = 1;
          l = -1;
        }
      }
    }
  }
  // A W right after its B is one autograd pass with it, dX and dW GEMMs layer by layer,
  // wherever the schedule does not place W itself (Megatron-LM's and PyTorch's backward):
  // the B carries the W's time and, before an optimizer step, its gradient buckets, which
  // then close as the pass reaches each bucket's first layer. Zero-bubble orders run W as
  // a pass of its own; there only the backward's tensor overlap folds a W into its B (its
  // dW GEMMs beside the B's all-reduces), and the last W before an optimizer step stays
  // apart, for its gradient buckets.
  cur.fold_w.assign(cur.has_w.size(), 0);
  if (one_pass || (in_.tensor_overlap != TensorOverlap::kNone && cur.t > 1)) {
    for (size_t i = 0; i + 1 < cur.steps->size(); ++i) {
      const Step& b = (*cur.steps)[i];
      const Step& w = (*cur.steps)[i + 1];
      if (b.kind != OpKind::kBackward || w.kind != OpKind::kWeightGrad || b.chunk != w.chunk ||
          b.micro_batch != w.micro_batch || (cur.last_grad[i + 1] && !one_pass))
        continue;
      cur.fold_w[static_cast<size_t>(b.chunk) * Mb_ + static_cast<size_t>(b.micro_batch)] = 1;
      if (cur.last_grad[i + 1]) {  // the buckets close inside the B
        cur.last_grad[i] = 1;
        cur.last_grad[i + 1] = 0;
      }
    }
  }
  return cur;
}

// LoweringInput::compute_scale: each compute op at its device's pace for its stage.
void Lowering::scale_compute() {
  if (!in_.compute_scale) return;
  for (OpId id = 0; id < b_.size(); ++id) {
    const Op& op = b_.op(id);
    if (!is_compute(op.kind) || op.duration == Time::zero()) continue;
    const double f = in_.compute_scale(op.device, op.stage);
    if (f == 1.0) continue;
    b_.add_duration(
        id, checked_scale(op.duration, f, "a compute op's time at its GPU's pace") - op.duration);
  }
}

// LoweringInput::launch_overhead, on the first part of each step's op.
void Lowering::add_launch_overheads() {
  if (in_.launch_overhead.empty()) return;
  for (OpId id = 0; id < b_.size(); ++id) {
    const Op& op = b_.op(id);
    if (!is_compute(op.kind) || op.part != 0) continue;
    // A W folded into its B (Cursor::fold_w) is part of B's call: no step of its own.
    if (op.kind == OpKind::kWeightGrad &&
        (!in_.orders.early_input_grad || op.duration == Time::zero()))
      continue;
    const Time extra = in_.launch_overhead[static_cast<size_t>(op.device)];
    if (extra > Time::zero()) b_.add_duration(id, extra);
  }
}

// Compute ops of all slots, one step of each slot in turn, so that ops which run at
// about the same time get nearby ids (the engine then touches memory in order). Each
// device's stream order is its own steps' order.
void Lowering::add_compute() {
  std::vector<Cursor> cursors;
  for (int c = 0; c < built_; ++c) {
    for (int p = 0; p < P_; ++p) {
      for (int lane = 0; lane < lanes(p); ++lane) cursors.push_back(make_cursor(c, p, lane));
    }
  }
  for (bool any = true; any;) {
    any = false;
    for (Cursor& cur : cursors) any = emit_step(cur) || any;
  }
}

// Emits the slot's next step; false when it has none left.
bool Lowering::emit_step(Cursor& cur) {
  if (cur.idx == cur.steps->size()) {
    if (++cur.blk >= blocks_) return false;
    cur.idx = 0;
    cur.before = kNone;
  }
  const Step& s = (*cur.steps)[cur.idx++];
  Op op;
  op.kind = s.kind;
  op.device = cur.d;
  if (s.kind == OpKind::kOptimizer) {
    op.stage = cur.p;
    op.iteration = cur.blk + s.micro_batch;  // one of the two is zero
    op.duration = cur.optimizer;
    const OpId id = b_.add(op);
    auto& steps = optimizers_[{cur.p, cur.k, op.iteration}];
    steps.push_back({id, cur.before, std::move(cur.buckets), std::move(cur.bucket_bytes), kNone,
                     std::move(cur.block_second)});
    cur.block_ops.assign(cur.block_ops.size(), 0);
    cur.block_second.assign(cur.block_ops.size(), kNone);
    cur.pending_optimizer = {{{cur.p, cur.k, op.iteration}, steps.size() - 1}};
    cur.buckets.clear();
    cur.bucket_bytes.clear();
    cur.prev2 = cur.prev;
    cur.prev = id;
    return true;
  }
  const OpId first = emit_compute(cur, s, op);
  note_compute(cur, s, first);
  return true;
}

// After a compute op: the optimizer step before it learns it (its weights' all-gather
// feeds it), and under ZeRO-3 its layers' weights are gathered one layer ahead.
void Lowering::note_compute(Cursor& cur, const Step& s, OpId first) {
  char& ops = cur.block_ops[static_cast<size_t>(s.chunk)];
  if (ops < 2 && ++ops == 2) cur.block_second[static_cast<size_t>(s.chunk)] = first;
  if (cur.pending_optimizer) {
    optimizers_[cur.pending_optimizer->first][cur.pending_optimizer->second].next = first;
    cur.pending_optimizer.reset();
  }
  const Op& op = b_.op(first);
  if (!gathers_weights(cur.p) || s.kind == OpKind::kWeightGrad) {
    cur.prev2 = cur.prev;
    cur.prev = tail(first);
    return;
  }
  // One layer ahead (DeepSpeed's prefetch): the gather of a part's layer may start once the
  // part before the previous one has ended and the device's previous gather is done (one
  // communication stream). An op not split per layer gathers all its layers at once.
  const auto it = layer_parts_.find(first);
  const StageProfile& sp = in_.stages[static_cast<size_t>(op.stage)];
  int64_t params = sp.params;
  if (op.kind == OpKind::kRecompute && !sp.layers.empty()) {  // the layers it re-runs only
    params = 0;
    for (const auto& lc : sp.layers)
      if (lc.recomputed) params += lc.params;  // within sp.params
  }
  const LayerParts whole{{first}, {params}};
  const LayerParts& lp = it == layer_parts_.end() ? whole : it->second;
  const int mb = op.micro_batch, stage = op.stage;
  for (size_t q = 0; q < lp.parts.size(); ++q) {
    if (lp.params[q] == 0) {  // nothing to gather: a layer kept by R, or one without weights
      cur.prev2 = cur.prev;
      cur.prev = q + 1 == lp.parts.size() ? tail(first) : lp.parts[q];
      continue;
    }
    std::vector<OpId> ready;
    if (cur.prev2 != kNone) ready.push_back(cur.prev2);
    if (cur.prev != kNone && b_.op(cur.prev).kind == OpKind::kOptimizer)
      ready.push_back(cur.prev);  // the shard it gathers is updated
    const GatherKey key{cur.k, mb, stage, static_cast<int>(s.kind), static_cast<int>(q)};
    auto& gather = gathers_[key];
    if (gather.members.empty()) gather_order_.push_back(key);
    gather.params = lp.params[q];
    gather.members.push_back({cur.d, node_of(cur.d), std::move(ready), lp.parts[q]});
    gather.after.push_back(cur.last_gather);
    cur.last_gather = {{key, gather.members.size() - 1}};
    cur.prev2 = cur.prev;
    cur.prev = q + 1 == lp.parts.size() ? tail(first) : lp.parts[q];
  }
}

// What one F, R, B or W step costs on the cursor's lane: its time and memory into `op`.
Lowering::StepCost Lowering::cost_step(const Cursor& cur, const Step& s, Op& op) {
  const int M = in_.micro_batches_per_iteration;
  const int g = stage_of(cur.p, s.chunk);
  PIPESIM_ASSERT(g < G_ && s.micro_batch >= 0 && s.micro_batch < Mb_, "step within range");
  const StageProfile& sp = in_.stages[static_cast<size_t>(g)];
  const size_t k = static_cast<size_t>(s.chunk) * Mb_ + static_cast<size_t>(s.micro_batch);
  const int64_t act = lane_bytes(sp.activation_bytes, sp.replicated_activation, cur.split, cur.t);
  const int64_t kept =
      std::min(act, lane_bytes(sp.kept_bytes, sp.replicated_kept, cur.split, cur.t));
  const int64_t transient = lane_bytes(sp.transient_bytes, 0, cur.split, cur.t);
  // Offloaded (a stage without a recompute): F keeps the rest on the GPU and its copies out
  // pass through the buffer while it runs; B's copies back come through it.
  const int64_t offloaded =
      std::min(act, lane_bytes(sp.offloaded_bytes, sp.replicated_offloaded, cur.split, cur.t));
  const int64_t buffer =
      lane_bytes(sp.offload_buffer_bytes, sp.replicated_offload_buffer, cur.split, cur.t);
  // FLOPs divide over replicas (by their samples) and tensor ranks.
  const Share work{cur.split.num, cur.split.den * cur.t};
  // What the backward frees: everything F allocated, or with a recompute what F kept plus
  // what R allocated again.
  const int64_t freed = cur.has_r[k] ? kept + transient : act - offloaded;
  // With a W of its own, B frees all but what W reads (SPEC section 3) and W the rest; with
  // a recompute or offloading, at most what F kept (gpu_activation counts the same).
  const int64_t weight_kept = std::min(
      cur.has_r[k] ? kept : act - offloaded,
      lane_bytes(sp.weight_activation_bytes, sp.replicated_weight_activation, cur.split, cur.t));
  // Whether this B leaves its weight gradients to a W of their own (Cursor::fold_w).
  const bool split_w = cur.has_w[k] && !cur.fold_w[k];
  op.chunk = static_cast<int16_t>(s.chunk);
  op.stage = g;
  op.micro_batch = cur.blk * Mb_ + s.micro_batch;
  op.iteration = op.micro_batch / M;
  std::vector<OpId>* index = nullptr;
  switch (s.kind) {
    case OpKind::kForward:
      op.duration = split_time(sp.forward, work);
      // A forward that will be recomputed keeps only what recompute keeps, plus one
      // layer's working set while it runs (the checkpointed forward frees the rest).
      op.mem_at_start = cur.has_r[k] ? kept + transient : act - offloaded + buffer;
      op.mem_at_end = cur.has_r[k] ? -transient : -buffer;
      index = &fwd_;
      break;
    case OpKind::kRecompute:
      op.duration = split_time(sp.recompute_time, work);
      op.mem_at_start = transient;
      index = &rec_;
      break;
    case OpKind::kBackward:
      op.duration =
          split_time(split_w ? sp.backward_input : sp.backward_input + sp.backward_weight, work);
      op.mem_at_start = cur.has_r[k] ? 0 : buffer;
      op.mem_at_end = (cur.has_w[k] ? weight_kept - freed : -freed) - op.mem_at_start;
      index = &bwd_;
      break;
    case OpKind::kWeightGrad:
      op.duration = cur.fold_w[k] ? Time::zero() : split_time(sp.backward_weight, work);
      op.mem_at_end = -weight_kept;
      index = &wgt_;
      break;
    default:
      PIPESIM_ASSERT(false, "orders hold F, B, W, R and optimizer steps only");
  }
  return {g, work, split_w, index};
}

// Emits one F, R, B or W step (several ops when it is split) and returns its first op.
OpId Lowering::emit_compute(Cursor& cur, const Step& s, Op op) {
  const StepCost c = cost_step(cur, s, op);
  const StageProfile& sp = in_.stages[static_cast<size_t>(c.g)];
  OpId& target = (*c.index)[slot(cur.c, cur.blk, c.g, s.micro_batch, cur.lane)];
  PIPESIM_ASSERT(target == kNone, "each step appears once per block");
  if (cur.t > 1 || sp.pieces) {
    // The tensor-parallel collectives (Megatron-LM's all-reduces, the shape-described
    // layers' all-gathers) cut the op into segments; the collectives between them are added once
    // every rank has its segments (add_tensor_collectives).
    const auto segs = tp_segments(sp, s.kind, c.split_w);
    if (segs.size() > 1 || (segs.size() == 1 && segs[0].second.bytes > 0)) {
      emit_tp_parts(cur, s, op, c, segs, target);
      return target;
    }
  }
  // ZeRO-3 gathers weights layer by layer before F, a full R and B: one part per layer, in
  // the order the op runs them, each waiting for its own layer's gather.
  const bool per_layer = gathers_weights(cur.p) && sp.layers.size() > 1 &&
                         (s.kind == OpKind::kForward || s.kind == OpKind::kBackward ||
                          (s.kind == OpKind::kRecompute && sp.full_recompute));
  if (per_layer && !cur.last_grad[cur.idx - 1]) {
    emit_layer_parts(cur, s, op, c, target);
    return target;
  }
  if (!cur.last_grad[cur.idx - 1] || sp.layers.empty()) {  // (no per-layer costs: one bucket)
    target = b_.add(op);
    cur.before = target;
    return target;
  }
  emit_buckets(cur, s, op, c, per_layer, target);
  return target;
}

// One part per segment, and a last empty one when the op ends with a collective (what
// follows waits for it there).
void Lowering::emit_tp_parts(Cursor& cur, const Step& s, const Op& op, const StepCost& c,
                             const std::vector<std::pair<Time, TpCollective>>& segs, OpId& target) {
  const size_t n = segs.size() + (segs.back().second.bytes > 0 ? 1 : 0);
  std::vector<OpId> parts;
  for (size_t q = 0; q < n; ++q) {
    Op part = op;
    part.part = static_cast<int16_t>(q);
    part.duration = q < segs.size() ? split_time(segs[q].first, c.work) : Time::zero();
    part.mem_at_start = q == 0 ? op.mem_at_start : 0;
    part.mem_at_end = q + 1 == n ? op.mem_at_end : 0;
    parts.push_back(b_.add(part));
  }
  target = parts.front();
  if (parts.size() > 1) last_part_[target] = parts.back();
  std::vector<TpCollective> collectives;
  for (const auto& sg : segs) collectives.push_back(sg.second);
  if (cur.last_grad[cur.idx - 1] && s.kind == OpKind::kBackward)
    close_buckets_in_segments(cur, c.g, c.split_w, segs, parts);
  tp_parts_[target] = {std::move(parts), std::move(collectives), {}};
  cur.before = tail(target);
}

// ZeRO-3's F, full R or B: one part per layer, in the order the op runs them.
void Lowering::emit_layer_parts(Cursor& cur, const Step& s, const Op& op, const StepCost& c,
                                OpId& target) {
  const StageProfile& sp = in_.stages[static_cast<size_t>(c.g)];
  const bool fwd = s.kind != OpKind::kBackward;
  const size_t L = sp.layers.size();
  LayerParts lp;
  for (size_t i = 0; i < L; ++i) {
    const auto& lc = sp.layers[fwd ? i : L - 1 - i];
    Op part = op;
    part.part = static_cast<int16_t>(i);
    const bool skipped = s.kind == OpKind::kRecompute && !lc.recomputed;  // kept, not re-run
    part.duration =
        split_time(skipped ? Time::zero()
                   : fwd   ? lc.forward
                         : (c.split_w ? lc.backward_input : lc.backward_input + lc.backward_weight),
                   c.work);
    part.mem_at_start = i == 0 ? op.mem_at_start : 0;
    part.mem_at_end = i + 1 == L ? op.mem_at_end : 0;
    lp.parts.push_back(b_.add(part));
    lp.params.push_back(skipped ? 0 : lc.params);  // a layer R does not re-run needs no weights
  }
  target = lp.parts.front();
  last_part_[target] = lp.parts.back();
  cur.before = lp.parts.back();
  layer_parts_[target] = std::move(lp);
}

// The stage's last weight-gradient computation before the optimizer: one op per gradient
// bucket, layers in backward order, so each bucket's all-reduce can start as soon as its
// layers are done (under ZeRO-3 a B is one op per layer, a bucket closing with its last).
// Deps into the op go to the first part, deps out of it leave from the last.
void Lowering::emit_buckets(Cursor& cur, const Step& s, const Op& op, const StepCost& c,
                            bool per_layer, OpId& target) {
  const StageProfile& sp = in_.stages[static_cast<size_t>(c.g)];
  const auto buckets = buckets_of(c.g);
  LayerParts lp;
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (per_layer) {
      int64_t params = 0, replicated = 0, experts = 0;
      for (int l = buckets[b].second; l >= buckets[b].first; --l) {
        const auto& lc = sp.layers[static_cast<size_t>(l)];
        experts += lc.expert_params;
        Op part = op;
        part.part = static_cast<int16_t>(lp.parts.size());
        part.duration = split_time(
            c.split_w ? lc.backward_weight : lc.backward_input + lc.backward_weight, c.work);
        part.mem_at_start = lp.parts.empty() ? op.mem_at_start : 0;
        part.mem_at_end = b + 1 == buckets.size() && l == buckets[b].first ? op.mem_at_end : 0;
        lp.parts.push_back(b_.add(part));
        lp.params.push_back(lc.params);
        params += lc.params;
        replicated += lc.replicated_params;
      }
      cur.buckets.push_back(lp.parts.back());
      cur.bucket_bytes.push_back(bucket_bytes(params, replicated, experts, cur));
      cur.before = lp.parts.back();
      continue;
    }
    Op part = op;
    part.part = static_cast<int16_t>(b);
    Time t;
    int64_t params = 0, replicated = 0, experts = 0;
    for (int l = buckets[b].first; l <= buckets[b].second; ++l) {
      const auto& lc = sp.layers[static_cast<size_t>(l)];
      experts += lc.expert_params;
      t += s.kind == OpKind::kWeightGrad || c.split_w ? lc.backward_weight
                                                      : lc.backward_input + lc.backward_weight;
      params += lc.params;
      replicated += lc.replicated_params;
    }
    part.duration = split_time(t, c.work);
    part.mem_at_start = b == 0 ? op.mem_at_start : 0;
    part.mem_at_end = b + 1 == buckets.size() ? op.mem_at_end : 0;
    const OpId id = b_.add(part);
    if (b == 0) target = id;
    if (b + 1 == buckets.size() && b > 0) last_part_[target] = id;
    cur.buckets.push_back(id);
    cur.bucket_bytes.push_back(bucket_bytes(params, replicated, experts, cur));
    cur.before = id;
  }
  if (per_layer) {
    target = lp.parts.front();
    last_part_[target] = lp.parts.back();
    layer_parts_[target] = std::move(lp);
  }
}

// The gradient buckets of a backward cut into tensor-parallel segments (the stage's last
// before an optimizer step): each closes with the segment in which the pass finishes the
// bucket's first layer. The segments split the layers' times exactly, so the layer ends
// in the first segment whose running total reaches the layers' running total.
void Lowering::close_buckets_in_segments(Cursor& cur, int g, bool split_w,
                                         const std::vector<std::pair<Time, TpCollective>>& segs,
                                         const std::vector<OpId>& parts) {
  const StageProfile& sp = in_.stages[static_cast<size_t>(g)];
  if (sp.layers.empty()) return;  // no per-layer costs: the gradients are ready at the end
  const auto pass_time = [&](const auto& x) {  // a layer's or a piece's part of this B
    return split_w ? x.backward_input : x.backward_input + x.backward_weight;
  };
  const auto layer_time = [&](const StageProfile::LayerCost& lc) {
    if (lc.pieces.empty()) return pass_time(lc);
    Time t;
    for (const auto& pc : lc.pieces) t += pass_time(pc);
    return t;
  };
  Time layers_done;
  size_t q = 0;
  Time segs_done = segs.empty() ? Time::zero() : segs[0].first;
  for (const auto& [first, last] : buckets_of(g)) {
    int64_t params = 0, replicated = 0, experts = 0;
    for (int l = last; l >= first; --l) {
      const auto& lc = sp.layers[static_cast<size_t>(l)];
      layers_done += layer_time(lc);
      params += lc.params;
      replicated += lc.replicated_params;
      experts += lc.expert_params;
    }
    while (segs_done < layers_done && q + 1 < segs.size()) segs_done += segs[++q].first;
    cur.buckets.push_back(parts[q]);
    cur.bucket_bytes.push_back(bucket_bytes(params, replicated, experts, cur));
  }
}

// The op whose end releases stage g's input gradient for micro-batch m on replica j:
// B, or under `late` semantics W when the slot runs a separate W (SlotOrders).
OpId Lowering::gradient_source(int c, int blk, int g, int m, int j) const {
  const size_t k = slot(c, blk, g, m, j);
  if (!in_.orders.early_input_grad && wgt_[k] != kNone) return tail(wgt_[k]);
  return tail(bwd_[k]);
}

void Lowering::add_pipeline_transfers() {
  const bool rr = in_.orders.round_robin;
  const int M = in_.micro_batches_per_iteration;
  for (int c = 0; c < built_; ++c) {
    for (int blk = 0; blk < blocks_; ++blk) {
      for (int g = 0; g < G_; ++g) {
        const int r = replicas(position(g)), t = tensor(position(g));
        for (int m = 0; m < Mb_; ++m) {
          const int mb = blk * Mb_ + m;
          for (int lane = 0; lane < r * t; ++lane) {
            if (rr && lane / t != rr_replica(g, m)) continue;
            const size_t at = slot(c, blk, g, m, lane);
            const OpId f = fwd_[at], bk = bwd_[at];
            PIPESIM_ASSERT(f != kNone && bk != kNone,
                           "every micro-batch has F and B on every stage");
            // W after its B, B after its R, R after its F, and on the last stage B after F:
            // a generated order's stream already keeps them in turn, so an edge is needed
            // only where the earlier op ends in a tensor collective (a transfer, outside the
            // stream). Hand-written orders keep every edge (a B before its F is a deadlock).
            const auto after = [&](OpId later, OpId earlier) {
              const OpId end = tail(earlier);
              if (end != earlier || !in_.orders.generated) b_.add_dep(later, end);
            };
            if (const OpId w = wgt_[at]; w != kNone) after(w, bk);
            if (const OpId rc = rec_[at]; rc != kNone) {
              after(bk, rc);
              after(rc, f);
            }
            if (g == G_ - 1) after(bk, f);
          }
          if (g + 1 == G_) continue;
          // Output of g to g+1 and the gradient back: replica i of r and j of r2 move the
          // samples they share; tensor rank k of t and k2 of t2 the share of the hidden
          // dimension they share (rank to rank when the degrees are equal).
          const int r2 = replicas(position(g + 1)), t2 = tensor(position(g + 1));
          const int64_t out = in_.stages[static_cast<size_t>(g)].output_bytes;
          for (int i = 0; i < r; ++i) {
            for (int j = 0; j < r2; ++j) {
              int64_t bytes = 0;
              if (rr) {
                if (i != rr_replica(g, m) || j != rr_replica(g + 1, m)) continue;
                bytes = out;
              } else {
                const int64_t b = in_.micro_batch_samples;
                if (b > 0 && (b % r != 0 || b % r2 != 0)) {  // whole samples
                  const int64_t lo = std::max(first_sample(i, r, b), first_sample(j, r2, b));
                  const int64_t hi = std::min(first_sample(i, r, b) + samples_of(i, r, b),
                                              first_sample(j, r2, b) + samples_of(j, r2, b));
                  if (hi <= lo) continue;
                  bytes = out / b * (hi - lo) + out % b * (hi - lo) / b;
                } else {
                  const int64_t share = overlap(i, r, j, r2);
                  if (share == 0) continue;
                  bytes = out * share / (int64_t{r} * r2);
                }
              }
              for (int k = 0; k < t; ++k) {
                for (int k2 = 0; k2 < t2; ++k2) {
                  const int64_t rank_share = overlap(k, t, k2, t2);
                  if (rank_share == 0) continue;
                  // (Each context rank sends its own tokens.)
                  const int64_t part = bytes * rank_share / (int64_t{t} * t2) / in_.context;
                  const int a = i * t + k, b = j * t2 + k2;
                  const int src = device(c, g, a), dst = device(c, g + 1, b);
                  connect(tail(fwd_[slot(c, blk, g, m, a)]), src, fwd_[slot(c, blk, g + 1, m, b)],
                          dst, g, mb, mb / M, part, CommKind::kActivation);
                  const OpId rc = rec_[slot(c, blk, g, m, a)];
                  const OpId grad_target = rc != kNone ? rc : bwd_[slot(c, blk, g, m, a)];
                  connect(gradient_source(c, blk, g + 1, m, b), dst, grad_target, src, g + 1, mb,
                          mb / M, part, CommKind::kGradient);
                }
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace lowering

GpuActivation gpu_activation(const StageProfile& sp, int replicas, int t, bool sequence_parallel,
                             bool recompute, int64_t samples, int context) {
  using lowering::lane_share;
  lowering::Share split = lowering::replica_share(0, replicas, samples);
  split.den *= context;
  const int64_t act =
      lane_share(sp.activation_bytes, sp.replicated_activation, split, t, sequence_parallel);
  GpuActivation out;
  out.held = recompute ? std::min(act, lane_share(sp.kept_bytes, sp.replicated_kept, split, t,
                                                  sequence_parallel))
                       : act - std::min(act, lane_share(sp.offloaded_bytes, sp.replicated_offloaded,
                                                        split, t, sequence_parallel));
  out.weight =
      std::min(out.held, lane_share(sp.weight_activation_bytes, sp.replicated_weight_activation,
                                    split, t, sequence_parallel));
  return out;
}

TaskGraph lower(const LoweringInput& in) {
  return lowering::Lowering(in).run();
}

}  // namespace pipesim
