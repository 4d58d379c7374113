#include "planner/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "planner/uneven_chunked.h"

namespace pipesim::planner {
namespace {

size_t u(int v) {
  return static_cast<size_t>(v);
}

bool split_backward(const Model& m) {
  return std::all_of(m.layers.begin(), m.layers.end(),
                     [](const Layer& l) { return l.split_backward; });
}

// A label of the DP: the estimate's terms for the stages placed so far.
struct Node {
  double block = 0, sum = 0, expo = 0;
  int parent = -1;
  int first = 0, last = 0, replicas = 1;
};

constexpr size_t kMaxLabels = 12;
constexpr int kMaxR = 64;  // replicas per stage the DP considers (kUnevenLimit GPUs per copy)
constexpr int kKeepPerDepth = 3;
constexpr int kKeepPlacedPerDepth = 24;  // the placement-blind DP: its ranking is rougher

ScheduleTraits with_choice(ScheduleTraits t, const ScheduleChoice& sc, int data, int tensor) {
  t.zero = sc.zero;
  t.data = data;
  t.sequence_parallel = sc.sequence_parallel && tensor > 1;
  return t;
}

class Dp {
 public:
  // `optimistic`: each cut costs the less of its contiguous placement and the two stages
  // side by side at the start of the cluster (inside one node where they fit), each
  // gradient all-reduce the less of its contiguous group and the replicas from the start
  // of the cluster, so plans that another placement policy serves well are not ranked out
  // by the contiguous one.
  Dp(const CostModel& cm, const ScheduleChoice& sc, int data, int64_t M, int max_gpus,
     int max_replicas, int stride, double bound, SearchStats& stats, bool optimistic = false)
      : cm_(cm),
        t_(with_choice(traits(sc.kind, sc.warmup, sc.recompute), sc, data, cm.tensor())),
        data_(data),
        M_(M),
        G_(max_gpus),
        R_(max_replicas),
        stride_(stride),
        L_(cm.layers()),
        bound_(bound),
        stats_(stats),
        optimistic_(optimistic) {}

  // Best few (by objective) pipelines of exactly S stages, as stage lists.
  std::vector<std::vector<StageSpec>> run(int S, int keep = kKeepPerDepth) {
    nodes_.clear();
    for (Cells* x : {&cur_, &next_}) x->reset(cells(), u(R_ + 1));
    nodes_.push_back({});
    cur_.push(cell(0, 0, 0), 0);
    for (int s = 0; s < S; ++s) {
      next_.reset(cells(), u(R_ + 1));
      for (int j = 0; j < L_; ++j) {
        for (int g = 0; g <= G_; ++g)
          if (cur_.live[u(j) * u(G_ + 1) + u(g)]) extend(s, S, j, g);
      }
      std::swap(cur_, next_);
    }
    // Complete plans: every layer placed.
    std::vector<std::pair<double, int>> done;
    for (int g = 0; g <= G_; ++g) {
      for (int rl = 0; rl <= R_; ++rl) {
        for (int id : cur_.cells[cell(L_, g, rl)]) done.emplace_back(objective(nodes_[u(id)]), id);
      }
    }
    std::sort(done.begin(), done.end());
    std::vector<std::vector<StageSpec>> out;
    for (const auto& [obj, id] : done) {
      if (static_cast<int>(out.size()) >= keep) break;
      std::vector<StageSpec> stages;
      for (int n = id; nodes_[u(n)].parent >= 0; n = nodes_[u(n)].parent) {
        const Node& x = nodes_[u(n)];
        stages.push_back({x.first, x.last, x.replicas, std::nullopt});
      }
      std::reverse(stages.begin(), stages.end());
      out.push_back(std::move(stages));
    }
    return out;
  }

 private:
  size_t cells() const { return u(L_ + 1) * u(G_ + 1) * u(R_ + 1); }
  size_t cell(int j, int g, int rl) const { return (u(j) * u(G_ + 1) + u(g)) * u(R_ + 1) + u(rl); }
  double objective(const Node& n) const {
    return static_cast<double>(M_ - 1) * n.block + n.sum + std::max(0.0, n.expo);
  }

  // Every next stage from the states with j layers and g GPUs placed (any last-stage
  // replica count rl): its cost terms depend on (j, k, r) only, its cut on (rl, r) only.
  void extend(int s, int S, int j, int g) {
    const int stages_after = S - s - 1;
    int rls[kMaxR + 1];
    int n_rl = 0;
    for (int rl = 0; rl <= R_; ++rl)
      if (!cur_.cells[cell(j, g, rl)].empty()) rls[n_rl++] = rl;
    if (n_rl == 0) return;
    const int max_r = std::min(R_, G_ - g - stages_after);
    double cut[kMaxR + 1];
    for (int r = 1; r <= max_r; ++r) {
      for (int i = 0; i < n_rl; ++i) {
        const int rl = rls[i];
        if (s == 0) {
          cut[i] = 0.0;
          continue;
        }
        const int64_t bytes = cm_.output_bytes(j - 1);
        cut[i] = cm_.cut_time(g - rl, rl, g, r, bytes);
        if (optimistic_) cut[i] = std::min(cut[i], cm_.cut_time(0, rl, rl, r, bytes));
      }
      // The layers after this stage need at least their compute spread over the GPUs left.
      const int gpus_after = G_ - g - r;
      for (int k = stages_after == 0 ? L_ - 1 : j; k < L_ - stages_after; ++k) {
        const int64_t mem = cm_.stage_memory(bytes(j, r, k), s, S, M_, t_);
        if (mem > cm_.capacity()) {  // more layers only need more memory
          // A lower-memory level can only help if this stage could beat the incumbent.
          if (static_cast<double>(M_) * cm_.compute_time(j, k, r, t_) < stats_.incumbent)
            stats_.memory_bound = true;
          break;
        }
        const auto [t, fill, ar] = move(j, g, r, k);
        const double rest = stages_after > 0 && gpus_after > 0 ? after_[u(k)] / gpus_after : 0.0;
        for (int i = 0; i < n_rl; ++i) {
          const double c = cut[i];
          double block = std::max(t, c);
          if (t_.exposed_hops && s > 0) block = std::max(block, t + 2 * c);
          const size_t to = cell(k + 1, g + r, r);
          for (int id : cur_.cells[cell(j, g, rls[i])]) {
            ++stats_.costed;
            const Node& p = nodes_[u(id)];
            Node n;
            n.block = std::max(p.block, block);
            n.sum = p.sum + fill + 2 * c;
            n.expo = std::max(p.expo, ar - s * t);
            // Completions only raise each term: past the bound, no completion can be kept.
            if (static_cast<double>(M_ - 1) * std::max(n.block, rest) + n.sum +
                    std::max(0.0, n.expo) >
                bound_)
              continue;
            n.parent = id;
            n.first = j;
            n.last = k;
            n.replicas = r;
            insert(to, n);
          }
        }
      }
    }
  }

  // A stage of layers [j, k] on r replicas from GPU g: its time per micro-batch, its share of
  // the fill and drain, its gradient all-reduce with the optimizer step. They depend on
  // neither the stage's index nor the depth, so each is computed once per search (every
  // depth's DP meets the same states again) and kept per (j, g) state in `moves_`.
  struct Move {
    double t = -1, fill = 0, ar = 0;
  };
  Move move(int j, int g, int r, int k) {
    std::vector<Move>& row = moves_[u(j) * u(G_ + 1) + u(g)];
    if (row.empty()) row.resize(u(R_) * u(L_));
    Move& m = row[u(r - 1) * u(L_) + u(k)];
    if (m.t >= 0) return m;
    m.t = std::max(cm_.stage_time(j, k, r, t_), cm_.zero_gather_time(g, r, stride_, j, k, t_));
    m.fill = m.t;
    if (t_.w_fill > 0) {
      const double w = cm_.weight_time(j, k, r, t_.take_turns),
                   f = cm_.forward_time(j, k, r, t_.take_turns);
      const double fb = m.t - w * (1 + t_.w_fill);
      m.fill = t_.w_fill == 2 ? f + std::max(0.0, fb - f) : std::max(0.0, fb);
    }
    m.ar = cm_.allreduce_time(g, r, data_, stride_, j, k, t_.zero > 0);
    if (optimistic_)  // the replicas side by side from the start of a node
      m.ar = std::min(m.ar, cm_.allreduce_time(0, r, data_, stride_, j, k, t_.zero > 0));
    m.ar += cm_.optimizer_time(j, k, t_.zero > 0 ? r * data_ : 1);
    return m;
  }

  // What one GPU of that stage holds whatever its place (CostModel::stage_bytes), per (j, r, k).
  const CostModel::StageBytes& bytes(int j, int r, int k) {
    std::vector<std::optional<CostModel::StageBytes>>& row = bytes_[u(j)];
    if (row.empty()) row.resize(u(R_) * u(L_));
    std::optional<CostModel::StageBytes>& b = row[u(r - 1) * u(L_) + u(k)];
    if (!b) b = cm_.stage_bytes(j, k, r, t_);
    return *b;
  }

  // Pareto insertion over (block, sum, expo); at most kMaxLabels, the worst objective out.
  void insert(size_t to, const Node& n) {
    std::vector<int>& cellv = next_.cells[to];
    for (int id : cellv) {
      const Node& o = nodes_[u(id)];
      if (o.block <= n.block && o.sum <= n.sum && o.expo <= n.expo) return;
    }
    std::erase_if(cellv, [&](int id) {
      const Node& o = nodes_[u(id)];
      return n.block <= o.block && n.sum <= o.sum && n.expo <= o.expo;
    });
    nodes_.push_back(n);
    next_.push(to, static_cast<int>(nodes_.size()) - 1);
    if (cellv.size() > kMaxLabels) {
      auto worst = std::max_element(cellv.begin(), cellv.end(), [&](int a, int b) {
        return objective(nodes_[u(a)]) < objective(nodes_[u(b)]);
      });
      cellv.erase(worst);
    }
  }

  const CostModel& cm_;
  ScheduleTraits t_;
  int data_;
  int64_t M_;
  int G_, R_, stride_, L_;
  double bound_;
  SearchStats& stats_;
  bool optimistic_;
  std::vector<Node> nodes_;
  std::vector<std::vector<Move>> moves_ = std::vector<std::vector<Move>>(u(L_ + 1) * u(G_ + 1));
  std::vector<std::vector<std::optional<CostModel::StageBytes>>> bytes_ =
      std::vector<std::vector<std::optional<CostModel::StageBytes>>>(u(L_));
  // [k]: the compute of the layers after k on one GPU.
  std::vector<double> after_ = [this] {
    std::vector<double> a(u(L_), 0.0);
    for (int k = 0; k + 1 < L_; ++k) a[u(k)] = cm_.compute_time(k + 1, L_ - 1, 1, t_);
    return a;
  }();
  // Label ids per cell, for the stages placed so far and the next; `live` marks the
  // (layers, GPUs) states with a label at any last-stage replica count, `touched` the
  // cells to clear (a cell, once given a label, keeps at least one).
  struct Cells {
    std::vector<std::vector<int>> cells;
    std::vector<char> live;
    std::vector<size_t> touched;
    size_t per_state = 1;  // cells per (layers, GPUs) state

    void reset(size_t n, size_t replica_counts) {
      per_state = replica_counts;
      if (cells.size() != n) {
        cells.assign(n, {});
        live.assign(n / per_state, 0);
        touched.clear();
      }
      for (size_t c : touched) {
        cells[c].clear();
        live[c / per_state] = 0;
      }
      touched.clear();
    }
    void push(size_t c, int id) {
      if (cells[c].empty()) {
        touched.push_back(c);
        live[c / per_state] = 1;
      }
      cells[c].push_back(id);
    }
  };
  Cells cur_, next_;
};

PlanPoint point(std::vector<StageSpec> stages, const ScheduleChoice& sc, int data,
                int64_t micro_batch, int v, int tensor) {
  PlanPoint p;
  p.tensor = tensor;
  p.stages = std::move(stages);
  p.data = data;
  p.micro_batch = micro_batch;
  p.schedule = sc.kind;
  p.warmup = sc.warmup;
  p.recompute = sc.recompute;
  p.zero = sc.zero;
  p.sequence_parallel = sc.sequence_parallel && tensor > 1;
  p.virtual_stages = v;
  p.context = sc.context;
  p.expert = sc.expert;
  p.expert_tensor = sc.expert_tensor;
  return p;
}

}  // namespace

std::vector<ScheduleChoice> schedule_choices(const Scenario& s) {
  if (is_async(s.strategy.schedule))
    return {{ScheduleKind::kPipeDream}, {ScheduleKind::kPipeDream2BW}};
  std::vector<ScheduleChoice> base{{ScheduleKind::kDapple, Warmup::kSchedule},
                                   {ScheduleKind::kDapple, Warmup::kAuto},
                                   {ScheduleKind::kGpipe},
                                   {ScheduleKind::kInterleaved}};
  if (split_backward(s.model)) {
    base.push_back({ScheduleKind::kZbH1});
    base.push_back({ScheduleKind::kZbH2});
    base.push_back({ScheduleKind::kZb1p});
    base.push_back({ScheduleKind::kZb2p});
    base.push_back({ScheduleKind::kZbV});
  }
  const bool cores = std::any_of(
      s.model.layers.begin(), s.model.layers.end(),
      [&s](const Layer& l) { return l.selective(s.strategy.recompute_modules).bytes > 0; });
  std::vector<ScheduleChoice> out;
  for (const ScheduleChoice& c : base) {
    out.push_back(c);
    // Recompute trades time for memory: tried with the schedules that keep the most
    // activations in flight for their speed (1F1B with the auto warm-up, GPipe, ZB-H1).
    const bool trades = (c.kind == ScheduleKind::kDapple && c.warmup == Warmup::kAuto) ||
                        c.kind == ScheduleKind::kGpipe || c.kind == ScheduleKind::kZbH1;
    if (!trades) continue;
    // gpipe with full recompute is what `gpipe-recompute` names.
    out.push_back(c.kind == ScheduleKind::kGpipe
                      ? ScheduleChoice{ScheduleKind::kGpipeRecompute}
                      : ScheduleChoice{c.kind, c.warmup, Recompute::kFull});
    if (cores) out.push_back({c.kind, c.warmup, Recompute::kSelective});
  }
  return out;
}

// Micro-batch sizes worth trying: every divisor of the global batch when the model's costs
// follow from the micro-batch (generated and shape-described layers), else the scenario's.
std::vector<int64_t> micro_batch_sizes(const Scenario& s) {
  const bool analytic = std::all_of(s.model.layers.begin(), s.model.layers.end(),
                                    [](const Layer& l) { return l.source == "analytic"; });
  if (!analytic) return {s.training.micro_batch};
  // Beyond a server, large micro-batches only lengthen the fill and drain of pipelines
  // that need many micro-batches: keep to 1-16 samples (and the scenario's own).
  const int64_t cap = s.cluster.num_devices() > 64 ? 16 : s.training.global_batch;
  std::vector<int64_t> out;
  for (int64_t b = 1; b <= std::min(cap, s.training.global_batch) && out.size() < 64; ++b)
    if (s.training.global_batch % b == 0) out.push_back(b);
  if (std::find(out.begin(), out.end(), s.training.micro_batch) == out.end())
    out.push_back(s.training.micro_batch);
  return out;
}

// Tensor-parallel degrees worth trying: powers of two up to a server's GPUs when every
// layer can be split (generated transformers), else none.
std::vector<int> tensor_degrees(const Scenario& s) {
  const bool splittable = std::all_of(s.model.layers.begin(), s.model.layers.end(),
                                      [](const Layer& l) { return l.tensor_parallel; });
  const int per_node = s.cluster.gpus_of_node(0);
  std::vector<int> out{1};
  for (int t = 2; splittable && t <= per_node; t *= 2) out.push_back(t);
  return out;
}

std::vector<int> context_degrees(const Scenario& s) {
  const bool attention = std::any_of(s.model.layers.begin(), s.model.layers.end(),
                                     [](const Layer& l) { return l.attention.has_value(); });
  std::vector<int> out{1};
  const int64_t seq = s.model.tokens_per_sample;
  for (int c = 2; attention && seq >= 8192 && c <= 8; c *= 2)
    if (seq % (2 * c) == 0) out.push_back(c);
  return out;
}

std::vector<int> expert_degrees(const Scenario& s) {
  int experts = 0;
  for (const Layer& l : s.model.layers)
    if (l.moe) experts = std::max(experts, l.moe->experts);
  std::vector<int> out{1};
  const int per_node = s.cluster.gpus_of_node(0);
  for (const int cap : {per_node, 64}) {
    int best = 1;
    for (int e = 2; e <= std::min(experts, cap); ++e)
      if (experts % e == 0) best = e;
    if (std::find(out.begin(), out.end(), best) == out.end()) out.push_back(best);
  }
  return out;
}

std::vector<MemoryLevel> memory_levels(const Scenario& s, int tensor) {
  std::vector<MemoryLevel> out{{0, false}};
  if (tensor > 1) out.push_back({0, true});
  if (is_async(s.strategy.schedule) || s.cluster.num_devices() < 2) return out;
  for (const int z : {1, 2, 3}) {
    out.push_back({z, false});
    if (tensor > 1) out.push_back({z, true});
  }
  return out;
}

void search(const CostModel& cm, const ScheduleChoice& sc, int data, int64_t micro_batch, int64_t M,
            int max_gpus, SearchStats& stats, UniformGrid& grid, Shortlist& out) {
  const int L = cm.layers();
  // (Context and expert parallelism take whole stages: one replica each.)
  const int max_r = sc.context > 1 || sc.expert > 1 || sc.expert_tensor > 1
                        ? 1
                        : static_cast<int>(std::min<int64_t>(micro_batch, max_gpus));
  // A costed plan: the incumbent, whether memory bounded the search, the shortlist.
  auto offer = [&](const PlanPoint& p, const Estimate& e) {
    if (!e.fits && e.iteration_s < stats.incumbent) stats.memory_bound = true;
    if (e.fits) stats.incumbent = std::min(stats.incumbent, e.iteration_s);
    out.offer(p, e);
  };
  // Whether a plan that takes at least `bound` need not be costed in full, counted then as
  // the shortlist would have dropped it (nothing chosen changes): where it could neither
  // lower the incumbent nor set memory_bound (offer above; a `lean` plan, offer_lean, does
  // neither) and the shortlist has no place for it. Sets `memory` where it computed it
  // (kept where the caller has it already).
  auto ruled_out = [&](const PlanPoint& p, bool fits, bool lean, double bound, double work,
                       int64_t& memory) {
    if (!lean && bound < stats.incumbent) return false;
    // Most plans of a large grid do not fit: their memory counts only where the kept order
    // still takes such plans.
    if (fits || out.may_keep_unfit(work)) {
      if (memory < 0) memory = cm.memory(p, M);
      if (out.wanted(fits, bound, memory, work, p.schedule, p.virtual_stages, lean)) return false;
    }
    ++stats.bounded;
    if (!lean) out.passed(work);
    return true;
  };
  // A plan's placement variants, costed in full only where they could matter, as `add`
  // below does for the grid's plans. Their time bound, fit, simulation work and memory are
  // the same wherever they run (computed once, the fit and work only once the bound reaches
  // the incumbent); their network terms are what a placement changes.
  auto offer_placed = [&](const std::vector<PlacedPoint>& variants) {
    if (variants.empty()) return;
    const PlanPoint& first = variants.front().plan;
    const double bound = cm.time_bound(first, M);
    std::optional<std::pair<bool, double>> fit_work;
    int64_t memory = -1;
    for (const auto& [n, devices] : variants) {
      ++stats.costed;
      if (bound >= stats.incumbent) {
        if (!fit_work) fit_work.emplace(cm.fits(first, M), cm.simulation_work(first, M));
        if (ruled_out(n, fit_work->first, false, bound, fit_work->second, memory)) continue;
      }
      offer(n, cm.estimate(n, M, &devices, memory));
    }
  };
  // One plan: kept where ZeRO and SP are needed, costed (from a grid point's shared terms
  // when it has one), offered to `out`. `p` is the caller's scratch, restored as it was.
  auto add = [&](PlanPoint& p, UniformGrid::Point* layout) {
    ++stats.costed;
    // ZeRO and sequence parallelism are kept where they are needed: a plan that fits under
    // a lower ZeRO stage, or without SP, runs that way (the simulator's reduce-scatters and
    // gathers cost more than the estimate's ring). A ZeRO stage the user fixed stays.
    // (Memory only grows at a lower stage or without SP: a plan that does not fit as it is
    // fits at none of them.)
    const int zero = p.zero;
    const bool sp = p.sequence_parallel;
    const bool lowers = (zero > 0 && !sc.zero_fixed) || sp;
    const bool fits = lowers || layout != nullptr ? cm.fits(p, M) : true;  // (else unused)
    bool lower_fits = false;
    for (int z = zero - 1; fits && z >= 0 && !lower_fits && !sc.zero_fixed; --z) {
      p.zero = z;
      lower_fits = cm.fits(p, M);
    }
    p.zero = zero;
    if (fits && sp && !lower_fits) {
      p.sequence_parallel = false;
      lower_fits = cm.fits(p, M);
      p.sequence_parallel = sp;
    }
    if (layout == nullptr) {
      const Estimate e = cm.estimate(p, M);
      // (Leaner than the level below that fits, it may still belong on the time/memory front.)
      if (lower_fits) return out.offer_lean(p, e);
      return offer(p, e);
    }
    // A grid plan's bound and work come from its grid point (no network terms).
    int64_t memory = -1;
    if (ruled_out(p, fits, lower_fits, grid.time_bound(*layout, p), grid.work(*layout), memory))
      return;
    const Estimate e = cm.estimate(p, M, grid.terms(*layout, zero), memory);
    if (lower_fits) return out.offer_lean(p, e);
    offer(p, e);
  };
  // The DP's work: depths x (layers x GPUs x replicas) states x (layers x replicas) moves.
  const double dp_work = static_cast<double>(std::min(L, max_gpus)) * L * L * max_gpus * max_r *
                         static_cast<double>(max_r);
  const bool inter = sc.kind == ScheduleKind::kInterleaved, vee = sc.kind == ScheduleKind::kZbV;
  // Lower-memory levels (ZeRO, sequence parallelism) search the uniform grid: the DP's
  // uneven cuts there cost as much again as the whole level-0 search.
  const bool level = sc.zero > 0 || sc.sequence_parallel;
  if (inter || vee || level || max_gpus > kUnevenLimit || dp_work > kDpBudget) {
    // Uniform replicas, compute-balanced cut; interleaved with 2, 4, ... chunks per device,
    // zb-v with its two (at least as many micro-batches as devices to fill the V).
    const bool large = max_gpus > kUnevenLimit || dp_work > kDpBudget;
    PlanPoint p = point({}, sc, data, micro_batch, 1, cm.tensor());
    for (int r = 1; r <= max_r; ++r) {
      if (large && (r & (r - 1)) != 0 && max_gpus % r != 0) continue;
      for (int S = 1; S * r <= max_gpus && S <= L; ++S) {
        // Large clusters: depths that cut the layers evenly (with or without the embedding
        // and head layers) or powers of two, as Megatron-style runs use.
        if (large && (S & (S - 1)) != 0 && L % S != 0 && (L - 2) % S != 0) continue;
        // Interleaved: 2, 4, 8... chunks per device, and any count that splits each
        // device's layers (with or without the embedding and head layers) evenly, as
        // Megatron-style runs choose it (12 layers a device in 6 chunks of 2).
        for (int v = inter || vee ? 2 : 1; S * v <= L; v = inter ? v + 1 : v * 2) {
          if (inter && (S < 2 || M % S != 0)) break;
          if (vee && (S < 2 || M < S)) break;
          if (inter && (v & (v - 1)) != 0 && L % (S * v) != 0 && (L - 2) % (S * v) != 0)
            continue;
          UniformGrid::Point& layout = grid.point(r, S, v, vee);
          p.stages = layout.plan.stages;  // into the scratch's storage
          p.virtual_stages = v;
          add(p, &layout);
          if (!inter) break;
        }
      }
    }
    // Small clusters: interleaved and zb-v with uneven replicas per position too.
    if ((inter || vee) && !large && !level && dp_work <= kSmallDpWork) {
      const ScheduleTraits tr =
          with_choice(traits(sc.kind, sc.warmup, sc.recompute), sc, data, cm.tensor());
      // Each under every placement policy, on its own devices: which GPUs share a node
      // decides whether a position's gradients cross the slow link.
      auto add_placed = [&](const PlanPoint& n, UniformGrid::Point*) {
        offer_placed(placement_variants(n, cm.scenario().cluster, true));
      };
      for (int P = 2; P <= std::min(max_gpus, L); ++P) {
        if (inter && M % P != 0) continue;
        if (vee && M < P) continue;
        for (int v = 2; P * v <= L; v *= 2) {
          if (!uneven_chunked(cm, tr, p, P, v, max_r, max_gpus, kSmallDpWork, add_placed)) break;
          if (vee) break;
        }
      }
    }
    return;
  }
  Dp dp(cm, sc, data, M, max_gpus, max_r, max_gpus, kBoundFactor * stats.incumbent, stats);
  for (int S = 1; S <= std::min(L, max_gpus); ++S) {
    for (auto& stages : dp.run(S)) {
      PlanPoint p = point(std::move(stages), sc, data, micro_batch, 1, cm.tensor());
      add(p, nullptr);
    }
  }
  // Several nodes: the DP again with optimistic cuts (placement-blind), each of its plans
  // under every placement policy, estimated on the devices the policy gives (a big
  // activation kept inside a node by fresh-first, say, which the contiguous placement
  // sends over the slow link). Small spaces only: it doubles the DP's work.
  const Cluster& cluster = cm.scenario().cluster;
  if (cluster.num_nodes() < 2 || dp_work > kSmallDpWork) return;
  Dp placed_dp(cm, sc, data, M, max_gpus, max_r, max_gpus, kBoundFactor * stats.incumbent, stats,
               true);
  for (int S = 2; S <= std::min(L, max_gpus); ++S) {
    for (auto& stages : placed_dp.run(S, kKeepPlacedPerDepth)) {
      const PlanPoint p = point(std::move(stages), sc, data, micro_batch, 1, cm.tensor());
      offer_placed(placement_variants(p, cluster, false));
    }
  }
}

}  // namespace pipesim::planner
