// The lowering of a schedule to a TaskGraph: the class shared by lower.cc (compute ops
// and pipeline transfers) and lower_collectives.cc (static memory and the
// tensor-parallel, data-parallel and ZeRO collectives). Internal to schedules/.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "core/checked.h"
#include "core/error.h"
#include "schedules/collectives.h"
#include "schedules/collectives_a2a.h"
#include "schedules/collectives_rs_ag.h"
#include "schedules/lower.h"
#include "schedules/zero.h"

namespace pipesim::lowering {

// Ceiling division without the overflow of (a + r - 1) / r near the top of the range.
inline Time split_time(Time t, int r) {
  return Time::ps(t.ps_count() / r + (t.ps_count() % r != 0));
}
inline int64_t split_bytes(int64_t b, int r) {
  return ceil_div(b, r);
}
// One tensor rank's parameters of `params`, of which `replicated` every rank holds whole.
inline int64_t tensor_rank_params(int64_t params, int64_t replicated, int t) {
  replicated = std::min(replicated, params);
  return split_bytes(params - replicated, t) + replicated;
}

// A replica's share of a micro-batch's work, num / den: 1 / r when the r replicas split
// the micro-batch's samples evenly, else (its whole samples) / (the micro-batch's).
struct Share {
  int64_t num = 1, den = 1;
};
// ceil(x * num / den) without overflowing x * num.
inline int64_t scale_up(int64_t x, Share s) {
  const int64_t rem = x % s.den;
  return x / s.den * s.num + ceil_div(rem * s.num, s.den);
}
inline Time split_time(Time t, Share s) {
  return Time::ps(scale_up(t.ps_count(), s));
}
inline int64_t split_bytes(int64_t b, Share s) {
  return scale_up(b, s);
}
// Whole samples of replica j of r in a micro-batch of b: the first b % r replicas get one
// more than b / r.
inline int64_t samples_of(int j, int r, int64_t b) {
  return b / r + (j < b % r ? 1 : 0);
}
// Replica j's Share of a micro-batch of b samples that its stage's r replicas split (b = 0:
// not known, 1 / r).
inline Share replica_share(int j, int r, int64_t b) {
  return b <= 0 || b % r == 0 ? Share{1, r} : Share{samples_of(j, r, b), b};
}
inline int64_t first_sample(int j, int r, int64_t b) {
  return j * (b / r) + std::min<int64_t>(j, b % r);
}

// Samples replica i of r1 and replica j of r2 share, in units of 1 / (r1 * r2) of a
// micro-batch: replica i covers [i * r2, (i + 1) * r2).
inline int64_t overlap(int i, int r1, int j, int r2) {
  const int64_t lo = std::max<int64_t>(int64_t{i} * r2, int64_t{j} * r1);
  const int64_t hi = std::min<int64_t>(int64_t{i + 1} * r2, int64_t{j + 1} * r1);
  return std::max<int64_t>(0, hi - lo);
}

// Bytes of one lane's share of `total`, `replicated` of which tensor parallelism leaves
// whole on each of the t ranks unless sequence parallelism splits it too.
inline int64_t lane_share(int64_t total, int64_t replicated, Share split, int t,
                          bool sequence_parallel) {
  if (t == 1 || sequence_parallel) return split_bytes(total, Share{split.num, split.den * t});
  replicated = std::min(replicated, total);
  return split_bytes(total - replicated, Share{split.num, split.den * t}) +
         split_bytes(replicated, split);
}

inline constexpr OpId kNone = UINT32_MAX;
// (tensor rank, micro-batch, stage, op kind, part): one ZeRO-3 weight gather (the stage names
// its position; the part, the layer of the op it feeds).
using GatherKey = std::tuple<int, int, int, int, int>;

class Lowering {
 public:
  explicit Lowering(const LoweringInput& in)
      : in_(in),
        placement_(*in.placement),
        b_(in.num_devices),
        copies_(static_cast<int>(placement_.size())),
        built_(in.built_copies > 0 ? in.built_copies : copies_),
        P_(copies_ > 0 ? static_cast<int>(placement_[0].size()) : 0),
        G_(static_cast<int>(in.stages.size())),
        Mb_(in.orders.micro_batches),
        blocks_(in.orders.blocks) {
    b_.set_compact_rings(in.compact_rings);
    PIPESIM_ASSERT(copies_ > 0 && P_ > 0 && G_ % P_ == 0, "stages are a multiple of positions");
    PIPESIM_ASSERT(static_cast<int>(in.orders.steps.size()) == P_, "one order list per position");
    for (const auto& pos : placement_[0]) max_r_ = std::max(max_r_, static_cast<int>(pos.size()));
    PIPESIM_ASSERT(copies_ % built_ == 0, "whole groups of copies built");
    const size_t slots = static_cast<size_t>(built_) * blocks_ * G_ * Mb_ * max_r_;
    for (auto* v : {&fwd_, &bwd_, &wgt_, &rec_}) v->assign(slots, kNone);
    // (A device's member index matters to expert groups alone; its place, with copies
    // implicit, to the built copies' ring members alone: image_device.)
    const bool experts = expert_ranks() > 1;
    if (experts) member_of_device_.assign(static_cast<size_t>(in.num_devices), -1);
    for (int c = 0; c < (experts ? copies_ : built_ < copies_ ? built_ : 0); ++c) {
      const auto& copy = placement_[static_cast<size_t>(c)];
      for (size_t p = 0; p < copy.size(); ++p) {
        const auto L = static_cast<int>(copy[p].size());
        for (int lane = 0; lane < L; ++lane) {
          const auto d = static_cast<size_t>(copy[p][static_cast<size_t>(lane)]);
          if (experts) member_of_device_[d] = c * L + lane;
          if (built_ < copies_ && c < built_)
            where_[static_cast<int>(d)] = {c, static_cast<int>(p), lane};
        }
      }
    }
  }

  TaskGraph run();

 private:
  struct OptimizerStep {
    OpId op = kNone;
    OpId before = kNone;         // the slot's compute op just before it
    std::vector<OpId> buckets;   // ops after which each gradient bucket is ready, in order
    std::vector<int64_t> bytes;  // each bucket's gradient bytes
    OpId next = kNone;           // the device's next compute op (waits for ZeRO's weights)
    // Per chunk of the position, its second compute op of this iteration
    // (overlap_param_gather: it waits for that chunk's weights, gathered after the previous
    // iteration's step; the first runs beside the gather).
    std::vector<OpId> second;
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

  // Pipeline position of global stage g, and the global stage of chunk c on position p
  // (schedules/model.h: round robin, or zb-v's V).
  int position(int g) const { return position_of_stage(g, P_, in_.v_shape); }
  int stage_of(int p, int c) const { return stage_of_position(p, c, P_, in_.v_shape); }
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
  // The algorithm of position p's data-parallel collectives (ring unless the input says).
  AllReduceAlgo allreduce_algo(int p) const {
    return in_.allreduce.empty() ? AllReduceAlgo::kRing : in_.allreduce[static_cast<size_t>(p)];
  }
  // Parameters of position p's stages held by one tensor rank (1/t of them, rounded up).
  // Routed experts sit whole on each tensor rank, 1/expert of them on each expert rank.
  int64_t rank_params(int p) const {
    return checked_add(dense_rank_params(p), expert_rank_params(p), "a device's parameter count");
  }
  int64_t dense_rank_params(int p) const {
    int64_t params = 0, replicated = 0;
    for (const int g : stages_of(p)) {
      const StageProfile& sp = in_.stages[static_cast<size_t>(g)];
      params = checked_add(params, sp.params - sp.expert_params, "a device's parameter count");
      replicated = checked_add(replicated, sp.replicated_params, "a device's parameter count");
    }
    return tensor_rank_params(params, replicated, tensor(p));
  }
  int64_t expert_rank_params(int p) const {
    int64_t experts = 0;
    for (const int g : stages_of(p))
      experts = checked_add(experts, in_.stages[static_cast<size_t>(g)].expert_params,
                            "a device's parameter count");
    return split_bytes(experts, expert_ranks());
  }
  // The ranks one copy of the routed experts is spread over (expert x expert_tensor).
  int expert_ranks() const { return in_.expert * in_.expert_tensor; }
  // Whether position p's one expert group holds every copy's members while copies are left
  // implicit (may_build_copies): its all-to-alls reach the implicit members through their
  // images (AllToAllImages), and it has no expert gradients to reduce.
  bool experts_span_copies(int p) const {
    return built_ < copies_ && expert_group_spans_copies(in_, lanes(p));
  }
  // Whether position p's expert gradients are reduced apart from the rest, among the
  // members holding the same experts (Megatron-Core's expert-data-parallel group: tensor x
  // copies / (expert x expert_tensor) members): wherever that group is not the dense
  // gradients' (the copies of one tensor rank).
  bool separate_experts(int p) const {
    return (expert_ranks() > 1 || tensor(p) > 1) && expert_rank_params(p) > 0;
  }
  // Members of position p's expert-data-parallel group (ZeRO shards the experts over them).
  int expert_data_ranks(int p) const {
    return std::max(1, copies_ * replicas(p) * tensor(p) / expert_ranks());
  }
  // Bytes of position p's weights on one tensor rank (what ZeRO gathers).
  // (Experts reduced apart are gathered apart too, add_expert_reduction.)
  int64_t weight_bytes(int p) const {
    return checked_mul(separate_experts(p) ? dense_rank_params(p) : rank_params(p),
                       in_.param_bytes.gathered, "a weight gather");
  }
  // The parameters of global stage g that one rank of its position gathers (its share of
  // weight_bytes, by which an interleaved position's gather is split over its chunks).
  int64_t gathered_params(int g) const {
    const int p = position(g);
    const StageProfile& sp = in_.stages[static_cast<size_t>(g)];
    const int64_t dense =
        tensor_rank_params(sp.params - sp.expert_params, sp.replicated_params, tensor(p));
    return separate_experts(p) ? dense
                               : checked_add(dense, split_bytes(sp.expert_params, expert_ranks()),
                                             "a device's parameter count");
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
    return static_cast<int>(placement_[0][static_cast<size_t>(p)].size());
  }
  int replicas(int p) const { return lanes(p) / tensor(p); }
  // Replica j's share of each micro-batch's samples on position p: 1/r when its r replicas
  // split them evenly, else its whole samples over the micro-batch's; all of it when
  // replicas take whole micro-batches in turn (round robin).
  Share sample_share(int p, int j) const {
    return replica_share(j, in_.orders.round_robin ? 1 : replicas(p), in_.micro_batch_samples);
  }
  // Bytes of one lane's share of `total`, `replicated` of which tensor parallelism leaves
  // whole on each rank unless sequence parallelism splits it too.
  int64_t lane_bytes(int64_t total, int64_t replicated, Share split, int t) const {
    return lane_share(total, replicated, split, t, in_.sequence_parallel);
  }
  int device(int c, int g, int j) const {
    return placement_[static_cast<size_t>(c)][static_cast<size_t>(position(g))]
                        [static_cast<size_t>(j)];
  }
  size_t slot(int c, int blk, int g, int m, int j) const {
    return ((((static_cast<size_t>(c) * blocks_ + blk) * G_ + g) * Mb_ + m) * max_r_) + j;
  }
  // Replica of stage g that holds micro-batch m in round-robin mode.
  int rr_replica(int g, int m) const { return m % replicas(position(g)); }

  void add_static_memory();

  // The compute ops of one device slot, emitted one step at a time.
  struct Cursor {
    int c = 0, p = 0, j = 0, d = 0;
    Share split;                 // of each micro-batch's samples
    int lane = 0, k = 0, t = 1;  // lane j * t + k: tensor rank k of replica j
    const StepList* steps = nullptr;
    std::vector<char> has_r, has_w;  // [chunk * Mb + m]: this slot recomputes / runs a separate W
    std::vector<char> last_grad;     // [step]: the last step computing a chunk's weight gradients
                                     // before an optimizer step (split into gradient buckets)
    // [chunk * Mb + m]: a W right after its B, which under Strategy::tensor_overlap runs
    // inside the B (its dW GEMMs beside the B's all-reduces) and is left as an empty op that
    // still frees the activations and releases the gradient to the previous stage.
    std::vector<char> fold_w;
    Time optimizer;
    int blk = 0;
    size_t idx = 0;
    OpId before = kNone;  // the slot's last compute op, for the all-reduce
    // The last two compute ops (tails) of the slot whatever the block, and the optimizer
    // step waiting to learn the op after it.
    OpId prev = kNone, prev2 = kNone;
    std::optional<std::pair<std::tuple<int, int, int>, size_t>> pending_optimizer;
    std::optional<std::pair<GatherKey, size_t>> last_gather;  // ZeRO-3: the slot's last gather
    std::vector<OpId> buckets;
    std::vector<int64_t> bucket_bytes;
    // Per chunk: how many compute ops this iteration has run so far (up to 2), and its second.
    std::vector<char> block_ops;
    std::vector<OpId> block_second;
  };

  Cursor make_cursor(int c, int p, int lane);

  // Gradient bytes of a bucket of `params` parameters on the cursor's device: its tensor
  // rank's share of them, the routed experts' (`experts` of them) whole unless they are
  // reduced apart (separate_experts).
  int64_t bucket_bytes(int64_t params, int64_t replicated, int64_t experts,
                       const Cursor& cur) const {
    int64_t n = tensor_rank_params(params - experts, replicated, cur.t);
    if (!separate_experts(cur.p)) n = checked_add(n, experts, "a gradient bucket");
    return checked_mul(n, in_.gradient_bytes_per_param, "a gradient bucket");
  }

  // LoweringInput::launch_overhead, on the first part of each step's op.
  void add_launch_overheads();
  void scale_compute();

  // Compute ops of all slots, one step of each slot in turn, so that ops which run at
  // about the same time get nearby ids (the engine then touches memory in order). Each
  // device's stream order is its own steps' order.
  void add_compute();

  // Emits the slot's next step; false when it has none left.
  bool emit_step(Cursor& cur);

  // After a compute op: the optimizer step before it learns it (its weights' all-gather
  // feeds it), and under ZeRO-3 its layers' weights are gathered one layer ahead.
  void note_compute(Cursor& cur, const Step& s, OpId first);

  // Emits one F, R, B or W step (several ops when it is split) and returns its first op.
  OpId emit_compute(Cursor& cur, const Step& s, Op op);
  // A step's stage, its share of the stage's work on the lane, whether a B leaves its
  // weight gradients to a W of its own, and the index of such steps it goes into.
  struct StepCost {
    int g = 0;
    Share work;
    bool split_w = false;
    std::vector<OpId>* index = nullptr;
  };
  StepCost cost_step(const Cursor& cur, const Step& s, Op& op);
  // The three ways a step is cut into parts: tensor-parallel segments, ZeRO-3's layers,
  // the last backward's gradient buckets. Each sets `target` to the first part.
  void emit_tp_parts(Cursor& cur, const Step& s, const Op& op, const StepCost& c,
                     const std::vector<std::pair<Time, TpCollective>>& segs, OpId& target);
  void emit_layer_parts(Cursor& cur, const Step& s, const Op& op, const StepCost& c, OpId& target);
  void emit_buckets(Cursor& cur, const Step& s, const Op& op, const StepCost& c, bool per_layer,
                    OpId& target);
  void close_buckets_in_segments(Cursor& cur, int g, bool split_w,
                                 const std::vector<std::pair<Time, TpCollective>>& segs,
                                 const std::vector<OpId>& parts);

  // The op whose end releases stage g's input gradient for micro-batch m on replica j:
  // B, or under `late` semantics W when the slot runs a separate W (SlotOrders).
  OpId gradient_source(int c, int blk, int g, int m, int j) const;

  // The segments of a tensor-parallel op: (time, the collective after it), in the order the
  // op runs its layers (forward order for F and R, backward order for B). A layer issuing n
  // collectives splits its time into n equal segments; a layer issuing none joins the next
  // segment. A selective R issues what its modules re-run (LayerCost::tp_recompute); W
  // issues none. A last segment with no collective after it has bytes 0.
  std::vector<std::pair<Time, TpCollective>> tp_segments(const StageProfile& sp, OpKind kind,
                                                         bool has_w) const {
    std::vector<std::pair<Time, TpCollective>> out;
    const bool fwd = kind == OpKind::kForward || kind == OpKind::kRecompute;
    const bool selective = kind == OpKind::kRecompute && !sp.full_recompute;
    if (!fwd && kind != OpKind::kBackward) return out;
    // Asynchronous tensor-parallel all-reduce: a backward that holds its weight gradients
    // runs each column-parallel linear's dW GEMM (`beside`) while the all-reduce of its dX
    // is in flight. Such a collective keeps a `beside` > 0 and is followed by a segment of
    // that time with no collective of its own; the segment after that waits for it.
    const bool overlap =
        in_.tensor_overlap == TensorOverlap::kBackward && kind == OpKind::kBackward && !has_w;
    // TensorOverlap::kFull: every tensor collective beside the compute before it (a
    // generated layer's under sequence parallelism: piece_segments).
    const bool full = in_.tensor_overlap == TensorOverlap::kFull;
    Time acc;
    bool pending = false;  // the last segment runs beside a collective
    const size_t L = sp.layers.size();
    for (size_t i = 0; i < L; ++i) {
      const auto& lc = sp.layers[fwd ? i : L - 1 - i];
      if (kind == OpKind::kRecompute && !selective && !lc.recomputed) continue;  // kept
      if (!selective && !lc.pieces.empty()) {
        piece_segments(lc, fwd, has_w, overlap, full, full && in_.sequence_parallel, acc, pending,
                       out);
        continue;
      }
      const Time t = selective ? lc.recompute
                     : fwd     ? lc.forward
                           : (has_w ? lc.backward_input : lc.backward_input + lc.backward_weight);
      const auto& colls = selective ? lc.tp_recompute : fwd ? lc.tp_forward : lc.tp_backward;
      if (colls.empty()) {
        acc += t;
        continue;
      }
      const auto n = static_cast<int64_t>(colls.size());
      // (A selective re-run's leads, where given: its time before each collective.)
      const bool led = selective && lc.recompute_leads.size() == colls.size();
      Time rest = t;
      for (int64_t q = 0; q < n; ++q) {
        const Time share = led          ? std::min(lc.recompute_leads[static_cast<size_t>(q)], rest)
                           : q + 1 == n ? t - t / n * (n - 1)
                                        : t / n;
        rest -= share;
        TpCollective c = colls[static_cast<size_t>(q)];
        // (Under `full` a tensor collective runs beside the compute before it; a MoE
        // exchange waits for it.)
        c.beside = full && c.bytes > 0 && c.group == CollectiveGroup::kTensor ? acc + share
                   : overlap && c.bytes > 0 && c.kind == TpCollective::Kind::kAllReduce
                       ? std::min(c.beside, share)
                       : Time::zero();
        out.emplace_back(acc + share - c.beside, c);
        acc = Time::zero();
        pending = c.beside > Time::zero();
        if (pending) out.emplace_back(c.beside, TpCollective{});
      }
      if (led) acc += rest;  // the re-run after its last collective
    }
    if (acc > Time::zero() || out.empty() || pending) out.emplace_back(acc, TpCollective{});
    // Under `full` a sequence-parallel all-gather runs beside the segment it feeds, the last
    // one included: a part of no time after it waits for the gather. (A selective R that
    // issues nothing stays one op.)
    const bool issues = !selective || std::any_of(out.begin(), out.end(), [](const auto& sg) {
      return sg.second.bytes > 0;
    });
    if (full && in_.sequence_parallel && issues && out.back().first > Time::zero())
      out.emplace_back(Time::zero(), TpCollective{});
    return out;
  }

  // tp_segments for a layer with pieces (StageProfile::LayerCost::Piece), in the order the
  // pass runs them: a collective beside a piece is issued before it and followed by a
  // segment of the piece's time; one after a piece is issued when it ends (a tensor
  // all-reduce of an input gradient, under `overlap`, beside the weight-gradient GEMM
  // before it, as tp_segments does). Under `full` a tensor collective runs beside the GEMM
  // Transformer Engine pairs it with, where the piece names one (its `beside`: the forward's
  // pipelined reduce-scatter beside the last chunks of the GEMM producing it, the backward's
  // beside the weight gradient of the GEMM whose input gradient it reduces), else beside all
  // the compute since the collective before it; and with `gate` (sequence parallelism) a
  // piece's lead ends a segment of its own, the one the all-gather feeding it runs beside.
  static void piece_segments(const StageProfile::LayerCost& lc, bool fwd, bool has_w, bool overlap,
                             bool full, bool gate, Time& acc, bool& pending,
                             std::vector<std::pair<Time, TpCollective>>& out) {
    const size_t n = lc.pieces.size();
    for (size_t i = 0; i < n; ++i) {
      const auto& p = lc.pieces[fwd ? i : n - 1 - i];
      Time t = fwd ? p.forward : (has_w ? p.backward_input : p.backward_input + p.backward_weight);
      if (const Time lead = fwd ? p.lead_forward : p.lead_backward;
          gate && lead > Time::zero() && lead <= t) {
        out.emplace_back(acc + lead, TpCollective{});
        acc = Time::zero();
        pending = false;
        t -= lead;
      }
      if (const TpCollective& b = fwd ? p.forward_beside : p.backward_beside; b.bytes > 0) {
        TpCollective c = b;
        c.beside = t;
        out.emplace_back(acc, c);
        out.emplace_back(t, TpCollective{});
        acc = Time::zero();
        pending = true;
      } else {
        acc += t;
      }
      // (A second collective after the first: a segment of no time between them.)
      for (TpCollective c : {fwd ? p.forward_after : p.backward_after,
                             fwd ? p.forward_then : p.backward_then}) {
        if (c.bytes == 0) break;
        const bool tensor = c.group == CollectiveGroup::kTensor;
        const bool beside = overlap && tensor && c.kind == TpCollective::Kind::kAllReduce &&
                            c.beside > Time::zero();
        // (A split backward's weight gradient is not in this pass: all of it, as before.)
        const bool paired = gate && c.beside > Time::zero() && (fwd || !has_w);
        c.beside = full && tensor ? (paired ? std::min(c.beside, acc) : acc)
                   : beside       ? std::min(c.beside, acc)
                                  : Time::zero();
        out.emplace_back(acc - c.beside, c);
        acc = Time::zero();
        pending = c.beside > Time::zero();
        if (pending) out.emplace_back(c.beside, TpCollective{});
      }
    }
  }

  // The collectives between the segments of every tensor-parallel op: ranks of one replica
  // all-reduce (or all-gather) after each segment, and each rank's next segment waits for
  // the result.
  void add_tensor_collectives();
  struct TpParts;
  size_t consumer_part(const TpParts& r, size_t k) const;
  static std::vector<OpId> ready_after(const TpParts& r, size_t k, std::vector<OpId> ready);
  // The context- and expert-parallel collectives between the segments of every op: the
  // same lane of the copies of one group exchange after each segment (add_tensor_collectives'
  // counterpart across copies).
  void add_group_collectives();
  void add_expert_reduction(int p, int it, const std::vector<OptimizerStep>& members);
  // Position p's context groups (CollectiveGroup::kContext: `context` consecutive copies,
  // lane by lane), expert groups (kExpert: `expert` members in the order copy x lanes +
  // lane, consecutive or expert_tensor apart, so an expert group spans tensor ranks where
  // the expert degree exceeds the copies', as Megatron-Core's expert layout folds them) or
  // expert-tensor groups (kExpertTensor: expert_tensor consecutive members), each as (copy,
  // lane) pairs, among the copies built (whole groups: may_build_copies).
  std::vector<std::vector<std::pair<int, int>>> group_members(int p, CollectiveGroup g) const {
    const int L = lanes(p);
    std::vector<std::vector<std::pair<int, int>>> out;
    if (g == CollectiveGroup::kContext) {
      for (int lane = 0; lane < L; ++lane) {
        for (int c0 = 0; c0 < built_; c0 += in_.context) {
          out.emplace_back();
          for (int c = c0; c < c0 + in_.context; ++c) out.back().emplace_back(c, lane);
        }
      }
      return out;
    }
    // One expert group over every copy's members (the built ones and the implicit ones).
    if (g == CollectiveGroup::kExpert && experts_span_copies(p)) {
      out.emplace_back();
      for (int c = 0; c < copies_; ++c) {
        for (int lane = 0; lane < L; ++lane) out.back().emplace_back(c, lane);
      }
      return out;
    }
    // Member m = (expert-data rank x expert + expert rank) x e + expert-tensor rank.
    const int e = in_.expert_tensor, block = in_.expert * e;
    const bool tensor_group = g == CollectiveGroup::kExpertTensor;
    for (int m0 = 0; m0 < built_ * L; m0 += block) {
      for (int r = 0; r < (tensor_group ? in_.expert : e); ++r) {
        out.emplace_back();
        for (int i = 0; i < (tensor_group ? e : in_.expert); ++i) {
          const int m = m0 + (tensor_group ? r * e + i : i * e + r);
          out.back().emplace_back(m / L, m % L);
        }
      }
    }
    return out;
  }

  // A collective among the copies' devices of a position, its members the built copies':
  // the implicit copies' in its rings across the copies (CopyImages), each member's image
  // in the next group of built copies.
  CopyImages images_of(const std::vector<CollectiveMember>& members) const {
    if (built_ == copies_ || members.empty()) return {};
    CopyImages out{copies_ / built_, {}};
    out.next.reserve(members.size());
    for (const CollectiveMember& m : members) out.next.push_back(image_device(m.device));
    return out;
  }
  // The device that holds what `d` holds in the next group of built copies.
  int image_device(int d) const;

  OpId add_transfer(OpId from, int src, int dst, int g, int mb, int it, int64_t bytes,
                    CommKind kind) {
    const OpId id = b_.add(transfer_op(src, dst, bytes, kind, g, mb, it));
    if (from != kNone) b_.add_dep(id, from);
    return id;
  }

  // `from` on device src feeds `to` on device dst: directly on one device, else through a
  // transfer. Without p2p overlap (Strategy::p2p_overlap) the op after `from` on src waits
  // for the transfer: the send holds the sender's stream until it has arrived (the
  // receiver's `to` waits for it in any case).
  void connect(OpId from, int src, OpId to, int dst, int g, int mb, int it, int64_t bytes,
               CommKind kind) {
    if (src == dst) {
      b_.add_dep(to, from);
      return;
    }
    if (in_.p2p_overlap) {
      b_.add_dep(to, add_transfer(from, src, dst, g, mb, it, bytes, kind));
      return;
    }
    const OpId sent = send_point_[from];
    const OpId transfer = add_transfer(sent, src, dst, g, mb, it, bytes, kind);
    if (sent != from) b_.add_dep(transfer, from);
    b_.add_dep(to, transfer);
    if (const OpId next = stream_next_[sent]; next != kNone) b_.add_dep(next, transfer);
  }

  // Without p2p overlap: the compute op after each compute op in its device's stream
  // (kNone at the end), and the op after which each op's sends leave: itself, or for a
  // steady-state forward of SlotOrders::pair_from, the end of the backward step after it
  // (its R, B and W).
  void index_streams() {
    stream_next_.assign(b_.size(), kNone);
    send_point_.resize(b_.size());
    for (OpId id = 0; id < send_point_.size(); ++id) send_point_[id] = id;
    for (int d = 0; d < in_.num_devices; ++d) {
      const std::vector<OpId>& s = b_.stream(d);
      for (size_t i = 1; i < s.size(); ++i) stream_next_[s[i - 1]] = s[i];
    }
    if (in_.orders.pair_from.empty()) return;
    for (int c = 0; c < built_; ++c) {
      for (int p = 0; p < P_; ++p) {
        for (const int d : placement_[static_cast<size_t>(c)][static_cast<size_t>(p)])
          pair_steps(b_.stream(d), in_.orders.pair_from[static_cast<size_t>(p)]);
      }
    }
  }
  // index_streams for one device's stream: forward number `from` and later of each
  // iteration send after the backward step that follows them.
  void pair_steps(const std::vector<OpId>& s, int from) {
    // Whole ops (their parts together: one step's kind, stage and micro-batch), by their
    // last parts, in stream order.
    std::vector<OpId> whole;
    for (size_t i = 0; i < s.size(); ++i) {
      const Op& first = b_.op(s[i]);
      while (i + 1 < s.size() && b_.op(s[i + 1]).kind == first.kind &&
             b_.op(s[i + 1]).stage == first.stage &&
             b_.op(s[i + 1]).micro_batch == first.micro_batch)
        ++i;
      whole.push_back(s[i]);
    }
    std::map<int, int> forwards;  // iteration -> forwards so far
    for (size_t i = 0; i + 1 < whole.size(); ++i) {
      const Op& f = b_.op(whole[i]);
      if (f.kind != OpKind::kForward || forwards[f.iteration]++ < from) continue;
      size_t j = i + 1;
      if (b_.op(whole[j]).kind == OpKind::kRecompute && j + 1 < whole.size()) ++j;
      const Op& bwd = b_.op(whole[j]);
      if (bwd.kind != OpKind::kBackward) continue;
      if (j + 1 < whole.size()) {
        const Op& w = b_.op(whole[j + 1]);
        if (w.kind == OpKind::kWeightGrad && w.chunk == bwd.chunk &&
            w.micro_batch == bwd.micro_batch)
          ++j;
      }
      send_point_[whole[i]] = whole[j];
    }
  }

  void add_pipeline_transfers();

  // Gradient all-reduce among the devices of each position before each optimizer step.
  void add_allreduces();
  // overlap_param_gather: position p's weights gathered chunk by chunk after the step.
  void add_overlapped_gathers(int p, int it, const std::vector<OptimizerStep>& members,
                              const std::vector<OptimizerStep>* previous, AllReduceAlgo algo);

  // ZeRO-3: before each layer's part of F, R and B, the devices holding copies of its stage
  // all-gather the layer's weights (their tensor rank's share), each starting when its
  // device is ready.
  // Gathers are built in the order the slots issue them, so each can wait for the one
  // before it on the same device.
  void add_weight_gathers();

  const LoweringInput& in_;
  const Placement& placement_;  // *in_.placement
  TaskGraphBuilder b_;
  // Copies, and the first ones built (the others implicit, LoweringInput::built_copies).
  int copies_, built_, P_, G_, Mb_, blocks_;
  int max_r_ = 1;
  std::vector<OpId> fwd_, bwd_, wgt_, rec_;
  // (position, tensor rank, iteration) -> the optimizer steps of its devices (the rank's
  // data-parallel group), copy-major then replica.
  std::map<std::tuple<int, int, int>, std::vector<OptimizerStep>> optimizers_;
  // ZeRO-3 weight gathers: their members (copy-major, then replica), the gather each
  // member's device issued before, and once built, what each member's result waits for.
  struct Gather {
    int64_t params = 0;  // of the layers it gathers (all tensor ranks')
    std::vector<CollectiveMember> members;
    std::vector<std::optional<std::pair<GatherKey, size_t>>> after;
    std::vector<std::vector<OpId>> result;
  };
  std::map<GatherKey, Gather> gathers_;
  std::vector<GatherKey> gather_order_;
  std::unordered_map<OpId, OpId> last_part_;    // first part of a split backward -> its last
  std::vector<OpId> stream_next_, send_point_;  // index_streams(), without p2p overlap
  // ZeRO-3: first part of an op split per layer -> its parts and each one's parameters.
  struct LayerParts {
    std::vector<OpId> parts;
    std::vector<int64_t> params;
  };
  std::unordered_map<OpId, LayerParts> layer_parts_;
  struct TpParts {
    std::vector<OpId> parts;  // the op's segments (and a last empty part)
    // The collective after each segment (bytes 0: none); the segment after it waits for it,
    // or, where it has a `beside` > 0, the one after that.
    std::vector<TpCollective> collectives;
    // Parts that ran beside the all-gather feeding them (TensorOverlap::kFull), with that
    // gather's transfers: collectives issued when such a part ends wait for them as well.
    std::vector<std::pair<size_t, std::vector<OpId>>> gated;
  };
  std::vector<int> member_of_device_;  // [device] copy x lanes + lane (-1: in no copy; experts only)
  // With copies implicit: device -> (copy, position, lane), the built copies' devices alone.
  std::unordered_map<int, std::tuple<int, int, int>> where_;
  std::unordered_map<OpId, TpParts> tp_parts_;     // first part of a tensor-parallel op
};

}  // namespace pipesim::lowering
