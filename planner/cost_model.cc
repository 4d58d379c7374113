#include "planner/cost_model.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "planner/copy_layout.h"
#include "planner/layer_comm.h"
#include "scenario/setup.h"
#include "schedules/collective_estimates.h"
#include "schedules/lower.h"
#include "schedules/partition.h"
#include "schedules/zero.h"
#include "sim/copies.h"

namespace pipesim::planner {

namespace {
size_t u(int v) {
  return static_cast<size_t>(v);
}
}  // namespace

double CostModel::split(int replicas) const {
  const int64_t b = s_.training.micro_batch;
  if (replicas <= 1 || b % replicas == 0) return replicas;
  // The slowest replica's whole samples: ceil(b / r) of b.
  return static_cast<double>(b) / static_cast<double>((b + replicas - 1) / replicas);
}

const CostModel::SplitSums* CostModel::split_sums(int replicas) const {
  const int k = sample_shards(replicas, s_.training.micro_batch, false);
  return k >= 2 && static_cast<size_t>(k - 2) < splits_.size()
             ? &splits_[u(static_cast<int>(k - 2))]
             : nullptr;
}

double CostModel::forward_time(int first, int last, int replicas, bool take_turns) const {
  const SplitSums* at = take_turns ? nullptr : split_sums(replicas);
  const std::vector<double>& f = at ? at->f : f_;
  return (f[u(last) + 1] - f[u(first)]) / (split(replicas) * t_);
}
double CostModel::weight_time(int first, int last, int replicas, bool take_turns) const {
  const SplitSums* at = take_turns ? nullptr : split_sums(replicas);
  const std::vector<double>& w = at ? at->w : w_;
  return (w[u(last) + 1] - w[u(first)]) / (split(replicas) * t_);
}
double CostModel::optimizer_time(int first, int last, int ranks) const {
  return (opt_[u(last) + 1] - opt_[u(first)]) / std::max(1, ranks);
}

double CostModel::zero_gather_time(int g, int r, int stride, int first, int last,
                                   const ScheduleTraits& t) const {
  if (t.zero < 3 || r * t.data < 2) return 0;
  const int64_t weights = params(first, last) * pb_.gathered;
  const int passes = t.recompute == Recompute::kFull ? 3 : 2;
  return passes * 0.5 * allreduce_bytes_time(g, r, t.data, stride, weights, true);
}

double CostModel::compute_time(int first, int last, int replicas, const ScheduleTraits& t) const {
  const auto sum = [&](const std::vector<double>& v) { return v[u(last) + 1] - v[u(first)]; };
  // Replicas splitting the micro-batch run each layer at their share's speed (replicas that
  // take turns run whole micro-batches).
  const SplitSums* at = t.take_turns ? nullptr : split_sums(replicas);
  const double again = t.recompute == Recompute::kFull        ? sum(at ? at->rf : rf_)
                       : t.recompute == Recompute::kSelective ? sum(core_)
                                                              : 0.0;
  // Without sequence parallelism the ops outside the tensor-parallel region run whole.
  const double whole =
      t.sequence_parallel || t_ < 2
          ? 0.0
          : (t_ - 1) * (sum(whole_) + (t.recompute == Recompute::kFull        ? sum(whole_rf_)
                                       : t.recompute == Recompute::kSelective ? sum(whole_sel_)
                                                                              : 0.0));
  const double passes = at ? sum(at->f) + sum(at->b) + sum(at->w) : sum(f_) + sum(b_) + sum(w_);
  return (passes + again + whole) / (split(replicas) * t_);
}

double CostModel::stage_time(int first, int last, int replicas, const ScheduleTraits& t) const {
  // Tensor all-reduces are on the critical path of every op (a full recompute re-issues the
  // forward's). Replicas splitting the micro-batch each move their share of its bytes, beside
  // their share of the compute, and each pays every collective's latency (the split's sums;
  // replicas that take turns run whole micro-batches).
  const double r = split(replicas);
  const SplitSums* at = t.take_turns ? nullptr : split_sums(replicas);
  const CommSums& c = at ? at->comm : comm_;
  const auto sum = [&](const std::vector<double>& v) { return (v[u(last) + 1] - v[u(first)]) / r; };
  const auto one = [&](const std::vector<double>& v, int i) { return v[u(i)] / r; };
  // Under Strategy::tensor_overlap the backward's all-reduces run beside the dW GEMMs,
  // except where a zero-bubble schedule takes W out of the backward.
  const bool beside = s_.strategy.tensor_overlap == TensorOverlap::kBackward && t.w_fill == 0;
  // A selective recompute's modules issue some of the forward's collectives again.
  const bool selective = t.recompute == Recompute::kSelective;
  const double tp =
      sum(c.tp_fwd) + (t.recompute == Recompute::kFull ? sum(c.tp_rfwd) : 0.0) +
      (selective ? sum(t.sequence_parallel ? c.sel_split : c.sel_whole) + sum(c.a2a_sel) : 0.0) +
      sum(!beside               ? c.tp_bwd
          : t.sequence_parallel ? c.beside_sp
                                : c.beside);
  const double compute = compute_time(first, last, replicas, t);
  if (s_.strategy.tensor_overlap == TensorOverlap::kFull) {
    // With sequence parallelism, what each collective leaves past the GEMM it is paired with;
    // without, the collectives run beside the compute: what it cannot hide.
    const bool again = t.recompute == Recompute::kFull;
    if (t.sequence_parallel) {
      return compute + sum(c.full_fwd) + (again ? sum(c.full_rfwd) + one(c.edge_fwd, first) : 0.0) +
             (selective ? sum(c.full_sel) + sum(c.a2a_sel) : 0.0) +
             sum(t.w_fill == 0 ? c.full_bwd : c.full_bwd_split) + one(c.edge_fwd, first) +
             one(c.edge_bwd, last);
    }
    // (Expert all-to-alls wait for the router and hold up the experts: never hidden.)
    const double a2a =
        2 * sum(c.a2a) + (again ? sum(c.a2a_rf) : 0.0) + (selective ? sum(c.a2a_sel) : 0.0);
    return std::max(compute + slow_ * (tp - a2a), tp - a2a) + a2a;
  }
  return compute + tp;
}

double CostModel::cut_time(int g0, int r0, int g1, int r1, int64_t bytes) const {
  if (bytes <= 0) return 0;
  // Tensor groups: rank to rank between groups, i.e. lanes of t per group.
  const auto [latency, per_byte] = net_->cut_rate(g0 * t_, r0 * t_, g1 * t_, r1 * t_);
  return latency + per_byte * static_cast<double>(bytes);
}

int64_t CostModel::params(int first, int last) const {
  int64_t p = params_[u(last) + 1] - params_[u(first)];
  // (Model::tied_copy, over the tied layers alone: one copy a stage per owner.)
  for (size_t i = 0; i < tied_.size(); ++i) {
    const int l = tied_[i];
    if (l < first || l > last) continue;
    const Layer& x = s_.model.layers[u(l)];
    if (x.tied_to >= first && x.tied_to <= last) continue;
    bool held = false;
    for (size_t j = 0; j < i && !held; ++j)
      held = tied_[j] >= first && s_.model.layers[u(tied_[j])].tied_to == x.tied_to;
    if (!held) p += x.tied_params;
  }
  return p;
}

int64_t CostModel::gradient_bytes(int first, int last) const {
  return params(first, last) * pb_.gradients;
}

double CostModel::allreduce_bytes_time(int g, int r, int data, int stride, int64_t bytes,
                                       bool ring) const {
  return net_->allreduce(g, r, data, stride, t_, bytes, ring);
}

double CostModel::cut_terms(const PlanPoint& p, const Placement* placed,
                            std::vector<double>& out) const {
  const int G = static_cast<int>(p.stages.size()), P = p.positions();
  const CopyLayout layout(s_.cluster, p, t_, placed);
  // [position]: its devices in every copy near copy 0 in a row, copy k's replicas pairing
  // with copy k's (their samples are the k-th share of the row), as the copies send their
  // cuts at once.
  thread_local std::vector<std::vector<int>> row;  // scratch reused across calls
  thread_local std::vector<int> near;
  row.assign(u(P), {});
  layout.near_copies(near);
  for (const int k : near)
    for (int q = 0; q < P; ++q) layout.append(k, q, true, row[u(q)]);
  const auto kept = static_cast<double>(near.size());
  thread_local std::vector<NetworkCosts::Cut> all;
  all.clear();
  out.assign(u(std::max(0, G - 1)), 0.0);
  for (int g = 0; g + 1 < G; ++g) {
    const StageSpec& st = p.stages[u(g)];
    const StageSpec& nx = p.stages[u(g) + 1];
    const int64_t bytes = output_bytes(st.last_layer);
    const int q = p.position_of(g), qn = p.position_of(g + 1);
    if (qn == q || bytes <= 0) continue;  // zb-v's turn: both chunks on the same devices
    const double total = kept * static_cast<double>(bytes);
    all.push_back({&row[u(q)], &row[u(qn)], total});
    if (placed == nullptr && near.size() == 1) {
      out[u(g)] = cut_time(layout.start(q), st.replicas, layout.start(qn), nx.replicas, bytes);
    } else {
      // Copies that cross the same server's NIC share it (fresh- and scatter-first).
      const auto [latency, per_byte] = net_->cut_rate(row[u(q)], row[u(qn)]);
      out[u(g)] = latency + per_byte * total;
    }
  }
  return net_->cut_load(all);
}

void CostModel::stage_group_terms(const PlanPoint& p, const Placement* placed, bool ring,
                                  const std::function<int64_t(const StageSpec&)>& bytes,
                                  std::vector<double>& out, std::vector<double>* share_out) const {
  // The positions' groups all-reduce at about the same time (the drain is short beside
  // them): those that leave their servers through the same network port share it.
  const CopyLayout layout(s_.cluster, p, t_, placed);
  const int P = p.positions();
  thread_local std::vector<std::vector<int>> ports;
  thread_local std::vector<double> load, shares;  // [position]
  load.assign(u(P), 0.0);
  for (size_t g = 0; g < p.stages.size(); ++g)
    load[u(p.position_of(static_cast<int>(g)))] += static_cast<double>(bytes(p.stages[g]));
  layout.group_ports(ports);
  port_shares(ports, load, shares);
  out.assign(p.stages.size(), 0.0);
  if (share_out != nullptr) share_out->assign(p.stages.size(), 1.0);
  thread_local std::vector<int> group;
  for (size_t g = 0; g < p.stages.size(); ++g) {
    const StageSpec& st = p.stages[g];
    const int q = p.position_of(static_cast<int>(g));
    const double share = shares[u(q)];
    if (share_out != nullptr) (*share_out)[g] = share;
    const int64_t b = bytes(st);
    if (placed == nullptr) {
      out[g] = net_->allreduce(layout.start(q), st.replicas, p.data, layout.per_copy(), t_, b, ring,
                               share);
      continue;
    }
    group.clear();  // rank 0 of each tensor group of the position, every copy
    for (int k = 0; k < layout.copies(); ++k) layout.append(k, q, false, group);
    out[g] = net_->allreduce(group, b / t_, ring, net_->tensor_ways(t_) * share);
  }
}

void CostModel::gather_terms(const PlanPoint& p, const Placement* placed,
                             std::vector<double>& out) const {
  stage_group_terms(
      p, placed, true,
      [&](const StageSpec& st) { return params(st.first_layer, st.last_layer) * pb_.gathered; },
      out);
}

// Each stage's gradients on its position's group: the lowering all-reduces every stage
// (each chunk of an interleaved position) once its last backward is done.
void CostModel::allreduce_terms(const PlanPoint& p, const Placement* placed, bool ring,
                                std::vector<double>& out, std::vector<double>* share) const {
  stage_group_terms(
      p, placed, ring,
      [&](const StageSpec& st) { return gradient_bytes(st.first_layer, st.last_layer); }, out,
      share);
}

Estimate CostModel::estimate(const PlanPoint& p, int64_t M, const Placement* placed,
                             int64_t memory) const {
  // Scratch reused across calls (the search costs millions of plans).
  thread_local std::vector<double> cut, gather, allreduce, share;
  const ScheduleTraits t = traits(p);
  const double load = cut_terms(p, placed, cut);
  if (t.zero == 3) gather_terms(p, placed, gather);
  allreduce_terms(p, placed, t.zero > 0, allreduce, &share);
  return estimate(
      p, M,
      {cut.data(), gather.data(), allreduce.data(), simulation_work(p, M), load, share.data()},
      memory);
}

// Per position (its chunks together) for one micro-batch, and over the global cuts.
struct CostModel::PositionTerms {
  // dev_t: time per micro-batch; dev_a: the same with the groups' NIC steps unshared
  // (PlanTerms::share), as in the fill and drain, where only some positions run; W; F.
  std::vector<double> dev_t, dev_a, dev_w, dev_f;
  double cuts = 0;   // the cuts' sum
  double block = 0;  // the largest cut
  double stall = 0;  // 1F1B's shallow warm-up: a stage and its hops not hidden
};

void CostModel::position_terms(const PlanPoint& p, const ScheduleTraits& t, const PlanTerms& terms,
                               PositionTerms& out) const {
  const int G = static_cast<int>(p.stages.size()), P = p.positions();
  for (auto* d : {&out.dev_t, &out.dev_w, &out.dev_f, &out.dev_a}) d->assign(u(P), 0.0);
  out.cuts = out.block = out.stall = 0;
  const int passes = t.recompute == Recompute::kFull ? 3 : 2;
  for (int g = 0; g < G; ++g) {
    const StageSpec& st = p.stages[u(g)];
    const int q = p.position_of(g);
    // One communication stream per device: ZeRO-3's weight gathers and, under ZeRO-2 and 3,
    // each micro-batch's gradient reduce-scatter (half an all-reduce) run beside the work.
    const double gather = (t.zero == 3 ? passes * 0.5 * terms.gather[g] : 0.0) +
                          (t.zero >= 2 ? 0.5 * terms.allreduce[g] : 0.0);
    const double work = stage_time(st.first_layer, st.last_layer, st.replicas, t);
    double step = std::max(work, gather);
    // Per micro-batch: each step's launch overhead (F, B, an R, a zero-bubble W of its own),
    // and without p2p overlap the sends that hold the stage (its output, its gradient).
    const bool any_r = t.recompute != Recompute::kNone;
    step += launch_ * (2 + (any_r ? 1 : 0) + (t.w_fill > 0 ? 1 : 0));
    if (!s_.strategy.p2p_overlap) {
      if (g + 1 < G) step += terms.cut[g];
      if (g > 0) step += terms.cut[g - 1];
    }
    out.dev_t[u(q)] += step;
    out.dev_a[u(q)] += step - std::max(work, gather) +
                       std::max(work, gather / (terms.share != nullptr ? terms.share[g] : 1.0));
    out.dev_w[u(q)] += weight_time(st.first_layer, st.last_layer, st.replicas, t.take_turns);
    out.dev_f[u(q)] += forward_time(st.first_layer, st.last_layer, st.replicas, t.take_turns);
    if (g + 1 < G) {
      const StageSpec& nx = p.stages[u(g) + 1];
      const double c = terms.cut[g];
      out.cuts += c;
      out.block = std::max(out.block, c);
      if (t.exposed_hops) {
        out.stall =
            std::max(out.stall, stage_time(nx.first_layer, nx.last_layer, nx.replicas, t) + 2 * c);
      }
    }
  }
}

double CostModel::allreduce_tail(const PlanPoint& p, const ScheduleTraits& t,
                                 const PlanTerms& terms, double block) const {
  const int G = static_cast<int>(p.stages.size()), P = p.positions(), v = p.virtual_stages;
  // All-reduce of each position's gradients (its chunks together) with its optimizer step,
  // overlapping the drain of the positions before it (q blocks, or q / v chunk blocks).
  thread_local std::vector<double> opt;
  opt.assign(u(P), 0.0);
  for (int g = 0; g < G; ++g) {
    const StageSpec& st = p.stages[u(g)];
    opt[u(p.position_of(g))] +=
        optimizer_time(st.first_layer, st.last_layer, t.zero > 0 ? st.replicas * p.data : 1);
  }
  // Stage g's gradients are complete about g chunk blocks before the end (the last
  // micro-batch's backward passes the stages after it first); a position's all-reduces run
  // one after another on its devices, in that order. Zero-bubble schedules defer W to fill
  // the drain, so their stages' gradients are taken as complete with the position's last.
  thread_local std::vector<double> comm_end;  // per position, relative to the last backward
  comm_end.assign(u(P), -std::numeric_limits<double>::infinity());
  // With overlap_grad_reduce the gradients go in buckets (strategy.bucket_bytes, at most a
  // layer each), each all-reduced once the last backward has produced it: the all-reduce
  // may start when the first bucket is done and ends at least its last bucket after the
  // pass (ZeRO 2 and 3 reduce every micro-batch's as it comes, in the block already).
  const bool buckets = s_.strategy.overlap_grad_reduce && t.zero < 2;
  for (int g = G - 1; g >= 0; --g) {
    const StageSpec& st = p.stages[u(g)];
    const int q = p.position_of(g);
    const double ready = -(t.w_fill > 0 ? q : g) * block / v;
    double nb = 1, early = 0;
    if (buckets && s_.strategy.bucket_bytes > 0) {
      const double bytes = static_cast<double>(gradient_bytes(st.first_layer, st.last_layer));
      nb = std::clamp(std::ceil(bytes / static_cast<double>(s_.strategy.bucket_bytes)), 1.0,
                      static_cast<double>(st.last_layer - st.first_layer + 1));
      const double pass = stage_time(st.first_layer, st.last_layer, st.replicas, t) -
                          forward_time(st.first_layer, st.last_layer, st.replicas, t.take_turns);
      early = std::max(0.0, pass) * (1 - 1 / nb);
    }
    comm_end[u(q)] = std::max(std::max(comm_end[u(q)], ready - early) + terms.allreduce[g],
                              ready + terms.allreduce[g] / nb);
  }
  double exposed = 0;
  for (int q = 0; q < P; ++q) exposed = std::max(exposed, comm_end[u(q)] + opt[u(q)]);
  return exposed;
}

double CostModel::busiest_position(const PlanPoint& p) const {
  const ScheduleTraits t = traits(p);
  thread_local std::vector<double> dev;
  dev.assign(u(p.positions()), 0.0);
  for (size_t g = 0; g < p.stages.size(); ++g) {
    const StageSpec& st = p.stages[g];
    dev[u(p.position_of(static_cast<int>(g)))] +=
        stage_time(st.first_layer, st.last_layer, st.replicas, t);
  }
  return *std::max_element(dev.begin(), dev.end());
}

int CostModel::stage_time_key(const ScheduleTraits& t) {
  return static_cast<int>(t.recompute) * 8 + (t.w_fill > 0 ? 4 : 0) +
         (t.sequence_parallel ? 2 : 0) + (t.take_turns ? 1 : 0);
}

double CostModel::time_bound(const PlanPoint& p, int64_t M) const {
  return static_cast<double>(std::max<int64_t>(0, M - 2)) * busiest_position(p);
}

Estimate CostModel::estimate(const PlanPoint& p, int64_t M, const PlanTerms& terms,
                             int64_t memory) const {
  const ScheduleTraits t = traits(p);
  const int P = p.positions(), v = p.virtual_stages;
  thread_local PositionTerms pt;  // scratch reused across calls
  position_terms(p, t, terms, pt);
  double max_t = 0, fill_zb = 0, sum_a = 0, max_a = 0;
  int pivot = 0;
  for (int q = 0; q < P; ++q) {
    sum_a += pt.dev_a[u(q)];
    max_a = std::max(max_a, pt.dev_a[u(q)]);
    if (pt.dev_t[u(q)] > max_t) {
      max_t = pt.dev_t[u(q)];
      pivot = q;
    }
  }
  const double without_link = std::max({pt.block, max_t, pt.stall});
  const double block = std::max(without_link, terms.link_load);
  for (int q = 0; q < P; ++q) {
    if (q == pivot) continue;
    const double fb = pt.dev_a[u(q)] - pt.dev_w[u(q)] * (1 + t.w_fill);
    const double f = pt.dev_f[u(q)];
    fill_zb += t.w_fill == 2 ? f + std::max(0.0, fb - f) : std::max(0.0, fb);
  }
  Estimate e;
  const auto Md = static_cast<double>(M);
  e.block_s = block;
  if (t.async) {
    e.fill_s = 0;
  } else if (v > 1 && t.w_fill == 0) {
    // Each of the P - 1 fill steps is a chunk's own work (without the ports' pace: the
    // hops that load the ports are the 2 cuts, and the chunks' hops alternate directions).
    e.fill_s = (P - 1) * (without_link - max_t + max_a) / v + 2 * pt.cuts;
  } else if (t.w_fill > 0) {
    e.fill_s = fill_zb / v + 2 * pt.cuts;
  } else {
    e.fill_s = sum_a - block + max_t - max_a + 2 * pt.cuts;
  }
  double steady = t.async || t.w_fill > 0 || v > 1 ? Md * block : (Md - 1) * block + block;
  // Where the ports set the pace, the first micro-batch's transfers are both the fill's
  // hops (2 cuts) and part of its block's port load: counted once.
  if (!t.async) steady -= std::min(block - without_link, 2 * pt.cuts);
  e.allreduce_s = allreduce_tail(p, t, terms, block);
  e.iteration_s = steady + e.fill_s + e.allreduce_s;
  e.peak_memory = memory >= 0 ? memory : peak_memory(p, M, t);
  e.fits = e.peak_memory <= capacity_;
  e.work = terms.work;
  e.folded_copies = folded_copies(p);
  return e;
}

const std::vector<StageSpec>& CostModel::balanced(int stages) const {
  auto it = balanced_.find(stages);
  if (it == balanced_.end()) it = balanced_.emplace(stages, even_partition(s_.model, stages)).first;
  return it->second;
}

double CostModel::simulation_work(const PlanPoint& p, int64_t M) const {
  return simulation_work_per_copy(p, M) / folded_copies(p);
}

int CostModel::folded_copies(const PlanPoint& p) const {
  // Identical copies (data-parallel copies x context ranks) are lowered and simulated g at
  // a time (sim/copies.h) where nothing tells them apart: one kind of GPU, no slowdown,
  // servers alike under one fabric switch (Cluster::nodes_interchangeable), and no tree
  // all-reduce (its sends do not rotate with the copies; under ZeRO the reduce-scatter is
  // a ring, but no group is built, so only copies the engine folds in the full graph
  // count). g is the fewest of fold_groups that holds whole context groups (or one group
  // spanning every copy, which rotates into itself) and whole expert groups on every
  // position (or, at expert tensor parallelism 1, one expert group holding every copy's
  // members, whose all-to-alls reach the others through their images where each group of
  // copies fills whole servers in cyclic order: may_build_copies), and whose copies sit
  // where they map onto each other a server at a time: for copies placed one after another
  // by count (copies_folded_in_order), otherwise from where the plan's placement puts them
  // (copies_folded). tests/planner_test.cc checks this against the simulator's own count
  // on fixed and random layouts. (Not predicted: an `auto` all-reduce that picks a tree
  // for some position.)
  const int copies = p.data * std::max(1, p.context);
  const bool tree = s_.strategy.allreduce == AllReduceAlgo::kTree && p.zero == 0;
  if (copies < 2 || per_node_ < 1 || tree || !s_.kind_layer_time.empty() ||
      !s_.cluster.slowdowns().empty() || !s_.cluster.nodes_interchangeable())
    return 1;
  if (p.placement == PlacementPolicy::kAppendFirst && p.stage_placement.empty())
    return copies_folded_in_order(p, copies);
  // Where a plan's copies sit depends on its layout and placement alone: worked out once.
  std::vector<int> key{
      p.tensor, p.data, p.context, p.expert, p.expert_tensor, static_cast<int>(p.placement), t_};
  key.push_back(p.positions());
  for (int q = 0; q < p.positions(); ++q) key.push_back(p.stages[u(q)].replicas);
  key.push_back(static_cast<int>(p.stage_placement.size()));
  for (const PlacementPolicy x : p.stage_placement) key.push_back(static_cast<int>(x));
  {
    const std::lock_guard<std::mutex> lock(folds_->mutex);
    const auto it = folds_->counts.find(key);
    if (it != folds_->counts.end()) return it->second;
  }
  const int counted = copies_folded(p, copies);
  const std::lock_guard<std::mutex> lock(folds_->mutex);
  folds_->counts.emplace(std::move(key), counted);
  return counted;
}

namespace {

// What moving every copy `group` copies on (placement [copy][position][lane] -> device) does
// to the plan's GPUs: whether each stays on its server, and whether the GPUs of each network
// port land on one port, a different one for each: the symmetry of the ports fold_copies
// needs besides the servers' (fills_whole_servers, or the servers staying put).
struct CopyShift {
  bool stays_on_servers = true;
  bool whole_ports = true;
};

CopyShift shift_copies(const Placement& placement, const std::vector<int>& nodes,
                       const std::vector<int>& ports, int group) {
  CopyShift out;
  std::unordered_map<int, int> image, preimage;  // port -> port, both ways
  const auto copies = placement.size();
  for (size_t c = 0; c < copies && out.whole_ports; ++c) {
    const auto& here = placement[c];
    const auto& there = placement[(c + static_cast<size_t>(group)) % copies];
    for (size_t q = 0; q < here.size(); ++q) {
      for (size_t lane = 0; lane < here[q].size(); ++lane) {
        const int a = here[q][lane], b = there[q][lane];
        if (nodes[u(a)] != nodes[u(b)]) out.stays_on_servers = false;
        const int from = ports[u(a)], to = ports[u(b)];
        if (image.try_emplace(from, to).first->second != to ||
            preimage.try_emplace(to, from).first->second != from)
          out.whole_ports = false;
      }
    }
  }
  return out;
}

}  // namespace

// Whether copies taken g at a time hold whole context groups and whole expert groups on
// every position (or, at expert tensor parallelism 1, one expert group over every copy's
// members: `spans`), as may_build_copies asks of a group built.
bool CostModel::whole_groups(const PlanPoint& p, int copies, int g, bool& spans) const {
  // (Expert groups fold where copies are left implicit, which a tree all-reduce rules
  // out, ZeRO or not.)
  const bool tree = s_.strategy.allreduce == AllReduceAlgo::kTree;
  const int cp = std::max(1, p.context);
  const int experts = std::max(1, p.expert) * std::max(1, p.expert_tensor);
  spans = false;
  if (g % cp != 0 && cp != copies) return false;  // (or one context group over every copy)
  for (int q = 0; q < p.positions() && experts > 1; ++q) {
    const int lanes = p.stages[u(q)].replicas * t_;
    if (g % cp != 0 || tree) return false;
    if (expert_group_spans_copies(p.expert, p.expert_tensor, copies, lanes)) {
      spans = true;
    } else if ((g * lanes) % experts != 0) {
      return false;
    }
  }
  return true;
}

int CostModel::copies_folded_in_order(const PlanPoint& p, int copies) const {
  // Copies placed one after another (append-first) fill whole servers where their GPUs do;
  // in Megatron-Core's rank order (context or expert groups) each position's GPUs are a
  // block of their own, so each position's share of a group must.
  int per_copy = 0;  // each position's GPUs (an interleaved plan's chunks share them)
  for (int q = 0; q < p.positions(); ++q) per_copy += p.stages[u(q)].replicas * t_;
  const auto whole_servers = [&](int g) {
    if (!p.rank_groups()) return (g * per_copy) % per_node_ == 0;
    for (int q = 0; q < p.positions(); ++q) {
      if ((g * p.stages[u(q)].replicas * t_) % per_node_ != 0) return false;
    }
    return true;
  };
  bool spans = false;
  for (const int g : fold_groups(copies)) {
    if (whole_groups(p, copies, g, spans) && whole_servers(g)) return copies / g;
  }
  return 1;
}

int CostModel::copies_folded(const PlanPoint& p, int copies) const {
  const Cluster& cluster = s_.cluster;
  {
    const std::lock_guard<std::mutex> lock(folds_->mutex);  // (written once, then read)
    if (folds_->ports.empty()) {
      folds_->ports.resize(static_cast<size_t>(cluster.num_devices()));
      for (int d = 0; d < cluster.num_devices(); ++d) folds_->ports[u(d)] = cluster.nic_of(d);
    }
  }
  Placement placement;
  try {
    placement = p.devices(cluster);
  } catch (const InputError&) {
    return 1;  // (a plan that does not fit the cluster is not simulated)
  }
  const std::vector<int>& nodes = cluster.device_nodes();
  const bool hierarchical = s_.strategy.allreduce == AllReduceAlgo::kHierarchical;
  bool spans = false;
  for (const int g : fold_groups(copies)) {
    if (!whole_groups(p, copies, g, spans)) continue;
    const bool whole = fills_whole_servers(placement, nodes, g, spans);
    if (spans && !whole) continue;
    // (Copies that share servers fold where the move keeps every GPU on its server, but not
    // under a hierarchical all-reduce.)
    const CopyShift shift = shift_copies(placement, nodes, folds_->ports, g);
    if (!whole && (hierarchical || !shift.stays_on_servers)) continue;
    if (shift.whole_ports) return copies / g;
  }
  return 1;
}

double CostModel::simulation_work_per_copy(const PlanPoint& p, int64_t M) const {
  double work = 0;
  for (int g = 0; g < static_cast<int>(p.stages.size()); ++g) {
    const StageSpec& st = p.stages[u(g)];
    const double n = static_cast<double>(st.replicas) * p.data;
    // F, B, W per micro-batch on each GPU, the transfers to the next stage, and the tensor
    // groups' ring collectives. The judge simulates with phases (SimOptions::fold): a
    // tensor group's members become ready at one moment on their node's idle links, so
    // each ring runs as one phase, t member ops and its timer (step by step it would be
    // 2(t - 1) t transfers).
    // Each context rank runs its own; its exchanges with the others are counted as the
    // simulation stores them.
    const double lanes = static_cast<double>(M) * n * cp_;
    work += 4.0 * lanes * t_;
    work += lanes * t_ * (exchange_ops_[u(st.last_layer) + 1] - exchange_ops_[u(st.first_layer)]);
    if (t_ > 1) {
      const auto rings =
          static_cast<double>(rings_[u(st.last_layer) + 1] - rings_[u(st.first_layer)]);
      work += lanes * rings * (t_ + 2.0);
    }
    const double group = n * cp_;  // the gradients' group: replicas, copies, context ranks
    if (group < 2) continue;
    const double bytes = static_cast<double>(params(st.first_layer, st.last_layer)) *
                         static_cast<double>(pb_.gradients);
    const double bucket =
        s_.strategy.bucket_bytes > 0 ? static_cast<double>(s_.strategy.bucket_bytes) : bytes;
    const double buckets = std::clamp(std::ceil(bytes / std::max(1.0, bucket)), 1.0,
                                      static_cast<double>(st.last_layer - st.first_layer + 1));
    work += buckets * 4 * group * std::max(1.0, group / 8);
  }
  return work * s_.training.iterations * (uneven_speed_ ? 2 : 1);
}

}  // namespace pipesim::planner
