#include "schedules/lower.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "core/checked.h"
#include "core/error.h"
#include "schedules/collectives.h"
#include "schedules/collectives_rs_ag.h"
#include "schedules/zero.h"
#include "schedules/zero_bubble_v.h"

namespace pipesim {

namespace {

// Ceiling division without the overflow of (a + r - 1) / r near the top of the range.
Time split_time(Time t, int r) {
  return Time::ps(t.ps_count() / r + (t.ps_count() % r != 0));
}
int64_t split_bytes(int64_t b, int r) {
  return b / r + (b % r != 0);
}

// Samples replica i of r1 and replica j of r2 share, in units of 1 / (r1 * r2) of a
// micro-batch: replica i covers [i * r2, (i + 1) * r2).
int64_t overlap(int i, int r1, int j, int r2) {
  const int64_t lo = std::max<int64_t>(int64_t{i} * r2, int64_t{j} * r1);
  const int64_t hi = std::min<int64_t>(int64_t{i + 1} * r2, int64_t{j + 1} * r1);
  return std::max<int64_t>(0, hi - lo);
}

constexpr OpId kNone = UINT32_MAX;
// (position, tensor rank, micro-batch, stage, op kind): one ZeRO-3 weight gather.
using GatherKey = std::tuple<int, int, int, int, int>;

class Lowering {
 public:
  explicit Lowering(const LoweringInput& in)
      : in_(in),
        b_(in.num_devices),
        copies_(static_cast<int>(in.placement.size())),
        P_(copies_ > 0 ? static_cast<int>(in.placement[0].size()) : 0),
        G_(static_cast<int>(in.stages.size())),
        Mb_(in.orders.micro_batches),
        blocks_(in.orders.blocks) {
    PIPESIM_ASSERT(copies_ > 0 && P_ > 0 && G_ % P_ == 0, "stages are a multiple of positions");
    PIPESIM_ASSERT(static_cast<int>(in.orders.steps.size()) == P_, "one order list per position");
    for (const auto& pos : in.placement[0]) max_r_ = std::max(max_r_, static_cast<int>(pos.size()));
    const size_t slots = static_cast<size_t>(copies_) * blocks_ * G_ * Mb_ * max_r_;
    for (auto* v : {&fwd_, &bwd_, &wgt_, &rec_}) v->assign(slots, kNone);
  }

  TaskGraph run() {
    size_t steps = 0;
    for (const auto& pos : in_.orders.steps) {
      for (const auto& list : pos) steps += list.size();
    }
    b_.reserve(static_cast<size_t>(copies_) * blocks_ * steps * 2,
               static_cast<size_t>(copies_) * blocks_ * steps * 3);
    add_static_memory();
    add_compute();
    add_pipeline_transfers();
    add_tensor_collectives();
    add_allreduces();
    add_weight_gathers();
    TaskGraph graph = std::move(b_).build();
    if (auto problem = graph.validate()) {
      if (in_.user_order)
        throw InputError(*problem, "an order in which every op's inputs come before it",
                         "strategy.order");
      PIPESIM_ASSERT(false, problem->c_str());
    }
    return graph;
  }

 private:
  struct OptimizerStep {
    OpId op = kNone;
    OpId before = kNone;         // the slot's compute op just before it
    std::vector<OpId> buckets;   // ops after which each gradient bucket is ready, in order
    std::vector<int64_t> bytes;  // each bucket's gradient bytes
    OpId next = kNone;           // the device's next compute op (waits for ZeRO's weights)
  };
  int node_of(int d) const {
    return in_.device_node.empty() ? 0 : in_.device_node[static_cast<size_t>(d)];
  }

  // Gradient buckets of stage g: layer ranges [first, last] in backward order (last layer
  // first), each closing once it holds bucket_bytes of gradients.
  std::vector<std::pair<int, int>> buckets_of(int g) const {
    const auto& layers = in_.stages[static_cast<size_t>(g)].layers;
    std::vector<std::pair<int, int>> out;
    int64_t acc = 0;
    int end = static_cast<int>(layers.size()) - 1;
    for (int l = end; l >= 0; --l) {
      acc = checked_add(acc,
                        checked_mul(layers[static_cast<size_t>(l)].params,
                                    in_.gradient_bytes_per_param, "a gradient bucket"),
                        "a gradient bucket");
      if ((in_.bucket_bytes > 0 && acc >= in_.bucket_bytes) || l == 0) {
        out.emplace_back(l, end);
        end = l - 1;
        acc = 0;
      }
    }
    return out;
  }

  // Pipeline position of global stage g, and the global stage of chunk c on position p:
  // round robin (g % P), or the V of zb-v (chunk 1 of position p is stage 2P - 1 - p).
  int position(int g) const {
    return in_.v_shape && g >= P_ ? 2 * P_ - 1 - g : g % P_;
  }
  int stage_of(int p, int c) const { return in_.v_shape ? v_stage(p, c, P_) : c * P_ + p; }
  std::vector<int> stages_of(int p) const {
    std::vector<int> out;
    for (int c = 0; c < G_ / P_; ++c) out.push_back(stage_of(p, c));
    return out;
  }

  // The position's gradients are all-reduced (it has several copies or replicas).
  bool syncs_gradients(int p) const { return copies_ * replicas(p) >= 2; }
  // Data-parallel ranks ZeRO shards position p's state over (1: ZeRO off or nothing to shard).
  int zero_ranks(int p) const {
    return in_.zero > 0 && syncs_gradients(p) ? copies_ * replicas(p) : 1;
  }
  bool gathers_weights(int p) const { return in_.zero >= 3 && zero_ranks(p) > 1; }
  // Bytes of position p's weights on one tensor rank (what ZeRO gathers).
  int64_t weight_bytes(int p) const {
    int64_t params = 0;
    for (const int g : stages_of(p))
      params = checked_add(params, in_.stages[static_cast<size_t>(g)].params, "a weight gather");
    return checked_mul(split_bytes(params, tensor(p)), in_.param_bytes.weights, "a weight gather");
  }
  // ZeRO-3 keeps the layer being computed and the one being gathered: the two largest.
  int64_t gather_buffer(int p) const {
    if (!gathers_weights(p)) return 0;
    int64_t first = 0, second = 0;
    for (const int g : stages_of(p)) {
      for (const auto& l : in_.stages[static_cast<size_t>(g)].layers) {
        const int64_t x = split_bytes(l.params, tensor(p));
        if (x > first) {
          second = first;
          first = x;
        } else {
          second = std::max(second, x);
        }
      }
    }
    return checked_mul(first + second, in_.param_bytes.weights, "a weight-gather buffer");
  }

  OpId tail(OpId id) const {
    const auto it = last_part_.find(id);
    return it == last_part_.end() ? id : it->second;
  }

  int tensor(int p) const { return in_.tensor.empty() ? 1 : in_.tensor[static_cast<size_t>(p)]; }
  // GPUs of one copy of position p: replicas x tensor ranks ("lanes").
  int lanes(int p) const {
    return static_cast<int>(in_.placement[0][static_cast<size_t>(p)].size());
  }
  int replicas(int p) const { return lanes(p) / tensor(p); }
  // Bytes of one lane's share of `total`, `replicated` of which tensor parallelism leaves
  // whole on each rank unless sequence parallelism splits it too.
  int64_t lane_bytes(int64_t total, int64_t replicated, int split, int t) const {
    if (t == 1 || in_.sequence_parallel) return split_bytes(total, split * t);
    replicated = std::min(replicated, total);
    return split_bytes(total - replicated, split * t) + split_bytes(replicated, split);
  }
  int device(int c, int g, int j) const {
    return in_
        .placement[static_cast<size_t>(c)][static_cast<size_t>(position(g))][static_cast<size_t>(j)];
  }
  size_t slot(int c, int blk, int g, int m, int j) const {
    return ((((static_cast<size_t>(c) * blocks_ + blk) * G_ + g) * Mb_ + m) * max_r_) + j;
  }
  // Replica of stage g that holds micro-batch m in round-robin mode.
  int rr_replica(int g, int m) const { return m % replicas(position(g)); }

  void add_static_memory() {
    for (int c = 0; c < copies_; ++c) {
      for (int p = 0; p < P_; ++p) {
        int64_t params = 0;
        for (const int g : stages_of(p))
          params = checked_add(params, in_.stages[static_cast<size_t>(g)].params,
                               "a device's parameter count");
        const int extra =
            in_.stashed_versions.empty() ? 0 : in_.stashed_versions[static_cast<size_t>(p)];
        params = split_bytes(params, tensor(p));  // each tensor rank holds 1/t of the weights
        const ZeroBytes z = zero_resident_bytes(params, in_.param_bytes, in_.zero, zero_ranks(p));
        for (int j = 0; j < lanes(p); ++j) {
          const int d = device(c, p, j);
          const char* what = "a device's parameter memory";
          b_.add_static_memory(d, MemCategory::kWeights,
                               checked_add(z.weights, gather_buffer(p), what));
          b_.add_static_memory(d, MemCategory::kGradients, z.gradients);
          b_.add_static_memory(d, MemCategory::kOptimizer, z.optimizer);
          b_.add_static_memory(
              d, MemCategory::kStashedWeights,
              checked_mul(extra, checked_mul(params, in_.param_bytes.weights, what), what));
          if (in_.bucket_buffers && (replicas(p) > 1 || copies_ > 1)) {
            b_.add_static_memory(d, MemCategory::kOther,
                                 checked_mul(params, in_.gradient_bytes_per_param, what));
          }
        }
      }
    }
    for (size_t d = 0; d < in_.reserved_bytes.size(); ++d) {
      b_.add_static_memory(static_cast<int>(d), MemCategory::kOther, in_.reserved_bytes[d]);
    }
  }

  // Compute ops of one device, in its stream order, for every block.
  // The compute ops of one device slot, emitted one step at a time.
  struct Cursor {
    int c = 0, p = 0, j = 0, d = 0, split = 1;
    int lane = 0, k = 0, t = 1;  // lane j * t + k: tensor rank k of replica j
    const StepList* steps = nullptr;
    std::vector<char> has_r, has_w;  // [chunk * Mb + m]: this slot recomputes / runs a separate W
    std::vector<char> last_grad;     // [step]: the last step computing a chunk's weight gradients
                                     // before an optimizer step (split into gradient buckets)
    Time optimizer;
    int blk = 0;
    size_t idx = 0;
    OpId before = kNone;  // the slot's last compute op, for the all-reduce
    // The last two compute ops (tails) of the slot whatever the block, whether the last was
    // an optimizer step, and the optimizer step waiting to learn the op after it.
    OpId prev = kNone, prev2 = kNone;
    bool prev_optimizer = false;
    std::optional<std::pair<std::tuple<int, int, int>, size_t>> pending_optimizer;
    std::optional<std::pair<GatherKey, size_t>> last_gather;  // ZeRO-3: the slot's last gather
    std::vector<OpId> buckets;
    std::vector<int64_t> bucket_bytes;
  };

  Cursor make_cursor(int c, int p, int lane) {
    Cursor cur;
    cur.c = c;
    cur.p = p;
    cur.lane = lane;
    cur.t = tensor(p);
    cur.j = lane / cur.t;
    cur.k = lane % cur.t;
    const int j = cur.j;
    cur.d = device(c, p, lane);
    cur.split = in_.orders.round_robin ? 1 : replicas(p);
    cur.steps = &in_.orders.steps[static_cast<size_t>(p)][static_cast<size_t>(j)];
    cur.has_r.assign(static_cast<size_t>(G_ / P_) * Mb_, 0);
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
    if (syncs_gradients(p)) {
      std::vector<long> last(static_cast<size_t>(G_ / P_),
                             -1);  // per chunk, since the last optimizer step
      for (size_t i = 0; i < cur.steps->size(); ++i) {
        const Step& s = (*cur.steps)[i];
        const size_t k = static_cast<size_t>(s.chunk) * Mb_ + static_cast<size_t>(s.micro_batch);
        if (s.kind == OpKind::kWeightGrad || (s.kind == OpKind::kBackward && !cur.has_w[k])) {
          last[static_cast<size_t>(s.chunk)] = static_cast<long>(i);
        } else if (s.kind == OpKind::kOptimizer) {
          for (long& l : last) {
            if (l >= 0) cur.last_grad[static_cast<size_t>(l)] = 1;
            l = -1;
          }
        }
      }
    }
    return cur;
  }

  // Compute ops of all slots, one step of each slot in turn, so that ops which run at
  // about the same time get nearby ids (the engine then touches memory in order). Each
  // device's stream order is its own steps' order.
  void add_compute() {
    std::vector<Cursor> cursors;
    for (int c = 0; c < copies_; ++c) {
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
  bool emit_step(Cursor& cur) {
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
      steps.push_back({id, cur.before, std::move(cur.buckets), std::move(cur.bucket_bytes)});
      cur.pending_optimizer = {{{cur.p, cur.k, op.iteration}, steps.size() - 1}};
      cur.buckets.clear();
      cur.bucket_bytes.clear();
      cur.prev2 = cur.prev;
      cur.prev = id;
      cur.prev_optimizer = true;
      return true;
    }
    const OpId first = emit_compute(cur, s, op);
    note_compute(cur, s, first);
    return true;
  }

  // After a compute op: the optimizer step before it learns it (its weights' all-gather
  // feeds it), and under ZeRO-3 its weights are gathered one op ahead.
  void note_compute(Cursor& cur, const Step& s, OpId first) {
    if (cur.pending_optimizer) {
      optimizers_[cur.pending_optimizer->first][cur.pending_optimizer->second].next = first;
      cur.pending_optimizer.reset();
    }
    const Op& op = b_.op(first);
    if (gathers_weights(cur.p) && s.kind != OpKind::kWeightGrad) {
      // One ahead: the gather may start once the op before the previous one has ended and
      // the device's previous gather is done (one communication stream).
      std::vector<OpId> ready;
      if (cur.prev2 != kNone) ready.push_back(cur.prev2);
      if (cur.prev_optimizer) ready.push_back(cur.prev);  // the shard it gathers is updated
      const GatherKey key{cur.p, cur.k, op.micro_batch, op.stage, static_cast<int>(s.kind)};
      auto& gather = gathers_[key];
      if (gather.members.empty()) gather_order_.push_back(key);
      gather.members.push_back({cur.d, node_of(cur.d), std::move(ready), first});
      gather.after.push_back(cur.last_gather);
      cur.last_gather = {{key, gather.members.size() - 1}};
    }
    cur.prev2 = cur.prev;
    cur.prev = tail(first);
    cur.prev_optimizer = false;
  }

  // Emits one F, R, B or W step (several ops when it is split) and returns its first op.
  OpId emit_compute(Cursor& cur, const Step& s, Op op) {
    const int M = in_.micro_batches_per_iteration;
    const int g = stage_of(cur.p, s.chunk);
    PIPESIM_ASSERT(g < G_ && s.micro_batch >= 0 && s.micro_batch < Mb_, "step within range");
    const StageProfile& sp = in_.stages[static_cast<size_t>(g)];
    const size_t k = static_cast<size_t>(s.chunk) * Mb_ + static_cast<size_t>(s.micro_batch);
    const int64_t act = lane_bytes(sp.activation_bytes, sp.replicated_activation, cur.split, cur.t);
    const int64_t kept =
        std::min(act, lane_bytes(sp.kept_bytes, sp.replicated_kept, cur.split, cur.t));
    const int64_t transient = lane_bytes(sp.transient_bytes, 0, cur.split, cur.t);
    const int work = cur.split * cur.t;  // FLOPs divide over replicas and tensor ranks
    // What the backward frees: everything F allocated, or with a recompute what F kept plus
    // what R allocated again.
    const int64_t freed = cur.has_r[k] ? kept + transient : act;
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
        op.mem_at_start = cur.has_r[k] ? kept + transient : act;
        if (cur.has_r[k]) op.mem_at_end = -transient;
        index = &fwd_;
        break;
      case OpKind::kRecompute:
        op.duration = split_time(sp.recompute_time, work);
        op.mem_at_start = transient;
        index = &rec_;
        break;
      case OpKind::kBackward:
        op.duration = split_time(
            cur.has_w[k] ? sp.backward_input : sp.backward_input + sp.backward_weight, work);
        if (!cur.has_w[k]) op.mem_at_end = -freed;
        index = &bwd_;
        break;
      case OpKind::kWeightGrad:
        op.duration = split_time(sp.backward_weight, work);
        op.mem_at_end = -freed;
        index = &wgt_;
        break;
      default:
        PIPESIM_ASSERT(false, "orders hold F, B, W, R and optimizer steps only");
    }
    OpId& target = (*index)[slot(cur.c, cur.blk, g, s.micro_batch, cur.lane)];
    PIPESIM_ASSERT(target == kNone, "each step appears once per block");
    if (cur.t > 1) {
      // Megatron-LM's tensor-parallel all-reduces cut the op into segments; the collectives
      // between them are added once every rank has its segments (add_tensor_collectives).
      const auto segs = tp_segments(sp, s.kind, cur.has_w[k] != 0);
      if (segs.size() > 1 || (segs.size() == 1 && segs[0].second > 0)) {
        // One part per segment, and a last empty one when the op ends with a collective
        // (what follows waits for it there).
        const size_t n = segs.size() + (segs.back().second > 0 ? 1 : 0);
        std::vector<OpId> parts;
        for (size_t q = 0; q < n; ++q) {
          Op part = op;
          part.part = static_cast<int16_t>(q);
          part.duration = q < segs.size() ? split_time(segs[q].first, work) : Time::zero();
          part.mem_at_start = q == 0 ? op.mem_at_start : 0;
          part.mem_at_end = q + 1 == n ? op.mem_at_end : 0;
          parts.push_back(b_.add(part));
        }
        target = parts.front();
        if (parts.size() > 1) last_part_[target] = parts.back();
        std::vector<int64_t> bytes;
        for (const auto& sg : segs) bytes.push_back(sg.second);
        tp_parts_[target] = {std::move(parts), std::move(bytes)};
        cur.before = tail(target);
        return target;
      }
    }
    if (!cur.last_grad[cur.idx - 1] || sp.layers.empty()) {  // (no per-layer costs: one bucket)
      target = b_.add(op);
      cur.before = target;
      return target;
    }
    // The stage's last weight-gradient computation before the optimizer: one op per
    // gradient bucket, layers in backward order, so each bucket's all-reduce can start as
    // soon as its layers are done. Deps into the op go to the first part, deps out of it
    // leave from the last.
    const auto buckets = buckets_of(g);
    for (size_t b = 0; b < buckets.size(); ++b) {
      Op part = op;
      part.part = static_cast<int16_t>(b);
      Time t;
      int64_t params = 0;
      for (int l = buckets[b].first; l <= buckets[b].second; ++l) {
        const auto& lc = sp.layers[static_cast<size_t>(l)];
        t += s.kind == OpKind::kWeightGrad || cur.has_w[k] ? lc.backward_weight
                                                           : lc.backward_input + lc.backward_weight;
        params += lc.params;
      }
      part.duration = split_time(t, work);
      part.mem_at_start = b == 0 ? op.mem_at_start : 0;
      part.mem_at_end = b + 1 == buckets.size() ? op.mem_at_end : 0;
      const OpId id = b_.add(part);
      if (b == 0) target = id;
      if (b + 1 == buckets.size() && b > 0) last_part_[target] = id;
      cur.buckets.push_back(id);
      cur.bucket_bytes.push_back(checked_mul(split_bytes(params, cur.t),
                                             in_.gradient_bytes_per_param, "a gradient bucket"));
      cur.before = id;
    }
    return target;
  }

  // The op whose end releases stage g's input gradient for micro-batch m on replica j:
  // B, or under `late` semantics W when the slot runs a separate W (SlotOrders).
  OpId gradient_source(int c, int blk, int g, int m, int j) const {
    const size_t k = slot(c, blk, g, m, j);
    if (!in_.orders.early_input_grad && wgt_[k] != kNone) return tail(wgt_[k]);
    return tail(bwd_[k]);
  }

  // The segments of a tensor-parallel op: (time, bytes of the all-reduce after it), in the
  // order the op runs its layers (forward order for F and a full R, backward order for B).
  // A layer issuing n all-reduces splits its time into n equal segments; a layer issuing
  // none joins the next segment. W and a selective R issue none.
  std::vector<std::pair<Time, int64_t>> tp_segments(const StageProfile& sp, OpKind kind,
                                                    bool has_w) const {
    std::vector<std::pair<Time, int64_t>> out;
    const bool fwd = kind == OpKind::kForward || (kind == OpKind::kRecompute && sp.full_recompute);
    if (!fwd && kind != OpKind::kBackward) return out;
    Time acc;
    const size_t L = sp.layers.size();
    for (size_t i = 0; i < L; ++i) {
      const auto& lc = sp.layers[fwd ? i : L - 1 - i];
      const Time t =
          fwd ? lc.forward : (has_w ? lc.backward_input : lc.backward_input + lc.backward_weight);
      const int n = fwd ? lc.tp_forward : lc.tp_backward;
      if (n == 0 || lc.tp_bytes == 0) {
        acc += t;
        continue;
      }
      for (int q = 0; q < n; ++q) {
        out.emplace_back(acc + (q + 1 == n ? t - t / n * (n - 1) : t / n), lc.tp_bytes);
        acc = Time::zero();
      }
    }
    if (acc > Time::zero() || out.empty()) out.emplace_back(acc, 0);
    return out;
  }

  // The all-reduces between the segments of every tensor-parallel op: ranks of one replica
  // all-reduce after each segment, and each rank's next segment waits for the result.
  void add_tensor_collectives() {
    for (int c = 0; c < copies_; ++c) {
      for (int p = 0; p < P_; ++p) {
        const int t = tensor(p);
        if (t == 1) continue;
        for (int blk = 0; blk < blocks_; ++blk) {
          for (const int g : stages_of(p)) {
            for (int m = 0; m < Mb_; ++m) {
              for (int j = 0; j < replicas(p); ++j) {
                for (const auto* index : {&fwd_, &rec_, &bwd_}) {
                  std::vector<const TpParts*> ranks;
                  for (int k = 0; k < t; ++k) {
                    const OpId first = (*index)[slot(c, blk, g, m, j * t + k)];
                    const auto it = tp_parts_.find(first);
                    if (it != tp_parts_.end()) ranks.push_back(&it->second);
                  }
                  if (ranks.size() != static_cast<size_t>(t)) continue;
                  const TpParts& r0 = *ranks.front();
                  for (size_t q = 0; q < r0.bytes.size(); ++q) {
                    if (r0.bytes[q] == 0) continue;
                    std::vector<CollectiveMember> members;
                    for (const TpParts* r : ranks) {
                      const int d = b_.op(r->parts[q]).device;
                      members.push_back({d, node_of(d), {r->parts[q]}, r->parts[q + 1]});
                    }
                    if (!in_.sequence_parallel) {
                      add_allreduce(b_, AllReduceAlgo::kRing, members, r0.bytes[q], {g, blk});
                      continue;
                    }
                    // Sequence parallelism: reduce-scatter into the sequence-split region
                    // (layer norm, dropout), all-gather out of it.
                    std::vector<CollectiveMember> scatter = members;
                    for (CollectiveMember& m : scatter) m.done = kNone;
                    const auto shards = add_reduce_scatter(b_, scatter, r0.bytes[q], {g, blk});
                    for (size_t i = 0; i < members.size(); ++i) members[i].ready = shards[i];
                    add_all_gather(b_, members, r0.bytes[q], {g, blk});
                  }
                }
              }
            }
          }
        }
      }
    }
  }

  OpId add_transfer(OpId from, int src, int dst, int g, int mb, int it, int64_t bytes,
                    CommKind kind) {
    const OpId id = b_.add(transfer_op(src, dst, bytes, kind, g, mb, it));
    if (from != kNone) b_.add_dep(id, from);
    return id;
  }

  // `from` on device src feeds `to` on device dst: directly on one device, else through a transfer.
  void connect(OpId from, int src, OpId to, int dst, int g, int mb, int it, int64_t bytes,
               CommKind kind) {
    if (src == dst) {
      b_.add_dep(to, from);
      return;
    }
    b_.add_dep(to, add_transfer(from, src, dst, g, mb, it, bytes, kind));
  }

  void add_pipeline_transfers() {
    const bool rr = in_.orders.round_robin;
    const int M = in_.micro_batches_per_iteration;
    for (int c = 0; c < copies_; ++c) {
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
              if (const OpId w = wgt_[at]; w != kNone) b_.add_dep(w, tail(bk));
              if (const OpId rc = rec_[at]; rc != kNone) {
                b_.add_dep(bk, tail(rc));
                b_.add_dep(rc, tail(f));
              }
              if (g == G_ - 1) b_.add_dep(bk, tail(f));
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
                  const int64_t share = overlap(i, r, j, r2);
                  if (share == 0) continue;
                  bytes = out * share / (int64_t{r} * r2);
                }
                for (int k = 0; k < t; ++k) {
                  for (int k2 = 0; k2 < t2; ++k2) {
                    const int64_t rank_share = overlap(k, t, k2, t2);
                    if (rank_share == 0) continue;
                    const int64_t part = bytes * rank_share / (int64_t{t} * t2);
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

  // Gradient all-reduce among the devices of each position before each optimizer step.
  void add_allreduces() {
    for (auto& [key, members] : optimizers_) {
      const auto [p, rank, it] = key;
      (void)rank;
      const AllReduceAlgo algo =
          in_.allreduce.empty() ? AllReduceAlgo::kRing : in_.allreduce[static_cast<size_t>(p)];
      std::vector<CollectiveMember> group;
      for (const OptimizerStep& m : members) {
        const int d = b_.op(m.op).device;
        group.push_back({d, node_of(d), {m.before}, m.op});
      }
      // ZeRO: each rank reduces its shard of the gradients (ring reduce-scatter); stages 1
      // and 2 then all-gather the updated weights, which the next compute op waits for.
      const bool zero = zero_ranks(p) > 1;
      const auto reduce = [&](int64_t bytes) {
        return zero ? add_reduce_scatter(b_, group, bytes, {p, it})
                    : add_allreduce(b_, algo, group, bytes, {p, it});
      };
      if (zero && !gathers_weights(p)) {
        std::vector<CollectiveMember> after;
        for (const OptimizerStep& m : members) {
          const int d = b_.op(m.op).device;
          after.push_back({d, node_of(d), {m.op}, m.next});
        }
        add_all_gather(b_, after, weight_bytes(p), {p, it});
      }
      const OptimizerStep& first = members.front();
      if (first.buckets.empty()) {  // gradients all ready at once
        int64_t params = 0;
        for (const int g : stages_of(p))
          params = checked_add(params, in_.stages[static_cast<size_t>(g)].params,
                               "a gradient all-reduce");
        reduce(checked_mul(split_bytes(params, tensor(p)), in_.gradient_bytes_per_param,
                           "a gradient all-reduce"));
        continue;
      }
      // One all-reduce per bucket, each once its layers are done on a member and the
      // previous bucket's has finished there (one communication stream per device, as
      // PyTorch DDP with NCCL); the optimizer waits for the last.
      std::vector<std::vector<OpId>> previous(members.size());
      for (size_t b = 0; b < first.buckets.size(); ++b) {
        for (size_t i = 0; i < members.size(); ++i) {
          PIPESIM_ASSERT(members[i].buckets.size() == first.buckets.size(),
                         "replicas share the bucket layout");
          group[i].ready = previous[i];
          group[i].ready.push_back(members[i].buckets[b]);
          group[i].done = b + 1 == first.buckets.size() ? members[i].op : kNone;
        }
        previous = reduce(first.bytes[b]);
      }
    }
  }

  // ZeRO-3: before each F, R and B, the devices holding copies of its stage all-gather the
  // stage's weights (their tensor rank's share), each starting when its device is ready.
  // Gathers are built in the order the slots issue them, so each can wait for the one
  // before it on the same device.
  void add_weight_gathers() {
    for (const GatherKey& key : gather_order_) {
      Gather& gather = gathers_.at(key);
      for (size_t i = 0; i < gather.members.size(); ++i) {
        if (const auto& before = gather.after[i]) {
          for (OpId d : gathers_.at(before->first).result.at(before->second))
            gather.members[i].ready.push_back(d);
        }
      }
      const int p = std::get<0>(key), g = std::get<3>(key);
      const int64_t params = in_.stages[static_cast<size_t>(g)].params;
      gather.result = add_all_gather(
          b_, gather.members,
          checked_mul(split_bytes(params, tensor(p)), in_.param_bytes.weights, "a weight gather"),
          {g, std::get<2>(key) / in_.micro_batches_per_iteration});
    }
  }

  const LoweringInput& in_;
  TaskGraphBuilder b_;
  int copies_, P_, G_, Mb_, blocks_;
  int max_r_ = 1;
  std::vector<OpId> fwd_, bwd_, wgt_, rec_;
  // (position, iteration) -> the optimizer steps of its devices, copy-major then replica.
  // (position, tensor rank, iteration) -> the optimizer steps of its devices (the rank's
  // data-parallel group), copy-major then replica.
  std::map<std::tuple<int, int, int>, std::vector<OptimizerStep>> optimizers_;
  // ZeRO-3 weight gathers: their members (copy-major, then replica), the gather each
  // member's device issued before, and once built, what each member's result waits for.
  struct Gather {
    std::vector<CollectiveMember> members;
    std::vector<std::optional<std::pair<GatherKey, size_t>>> after;
    std::vector<std::vector<OpId>> result;
  };
  std::map<GatherKey, Gather> gathers_;
  std::vector<GatherKey> gather_order_;
  std::unordered_map<OpId, OpId> last_part_;  // first part of a split backward -> its last
  struct TpParts {
    std::vector<OpId> parts;     // the op's segments (and a last empty part)
    std::vector<int64_t> bytes;  // the all-reduce after each segment (0: none)
  };
  std::unordered_map<OpId, TpParts> tp_parts_;  // first part of a tensor-parallel op
};

}  // namespace

TaskGraph lower(const LoweringInput& in) {
  return Lowering(in).run();
}

}  // namespace pipesim
