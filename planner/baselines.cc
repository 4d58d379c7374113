// Baseline planners (see baselines.h). Both papers' planners work on a chain of layers
// through prefix sums of time, activation, parameter and output bytes. The comments name
// what the public code does where it differs from the papers' formulas: the baselines
// reproduce the code, since that is what produced the published plans.
#include "planner/baselines.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

namespace pipesim {
namespace {

// Both planners read PipeDream's profiles, which count fp32 weights.
constexpr double kParamBytes = 4;
constexpr double kUnlimited = std::numeric_limits<double>::infinity();

// Per-layer costs with prefix sums: sums over layers i..j (inclusive) in O(1).
class Chain {
 public:
  // `scale` multiplies times, activations and outputs (DAPPLE's Model::normalize from
  // the profiled batch to the global batch); parameters do not grow with the batch.
  Chain(const Model& m, double scale) {
    for (const Layer& l : m.layers) {
      time_.push_back(time_.back() + scale * (l.forward + l.backward()).seconds());
      act_.push_back(act_.back() + scale * static_cast<double>(l.activation_bytes));
      par_.push_back(par_.back() + kParamBytes * static_cast<double>(l.params));
      out_.push_back(scale * static_cast<double>(l.output_bytes));
    }
  }
  int size() const { return static_cast<int>(out_.size()); }
  double time(int i, int j) const { return at(time_, j + 1) - at(time_, i); }
  double act(int i, int j) const { return at(act_, j + 1) - at(act_, i); }
  double par(int i, int j) const { return at(par_, j + 1) - at(par_, i); }
  double out(int k) const { return at(out_, k); }

 private:
  static double at(const std::vector<double>& v, int i) { return v[static_cast<size_t>(i)]; }
  std::vector<double> time_{0}, act_{0}, par_{0}, out_;
};

// The cluster as both planners see it: nodes of GPUs, one bandwidth per level.
struct Layout {
  std::vector<std::vector<int>> nodes;  // device indices per node, in index order
  std::vector<int> node_of;             // device -> position in `nodes`
  int per_node = 0;                     // GPUs of the smallest node
  double intra = kUnlimited;            // bytes/s between GPUs 0 and 1 of a node
  double inter = kUnlimited;            // bytes/s between the first GPUs of nodes 0 and 1
  double memory = 0;                    // the smallest GPU's memory
};

Layout layout_of(const Cluster& c) {
  Layout l;
  std::map<int, std::vector<int>> by_node;
  for (int d = 0; d < c.num_devices(); ++d) by_node[c.device(d).node].push_back(d);
  l.node_of.resize(static_cast<size_t>(c.num_devices()));
  l.memory = kUnlimited;
  for (auto& [id, gpus] : by_node) {
    for (int d : gpus) {
      l.node_of[static_cast<size_t>(d)] = static_cast<int>(l.nodes.size());
      l.memory = std::min(l.memory, static_cast<double>(c.device(d).gpu.memory_bytes));
    }
    l.nodes.push_back(gpus);
  }
  l.per_node = static_cast<int>(l.nodes[0].size());
  for (const auto& g : l.nodes) l.per_node = std::min(l.per_node, static_cast<int>(g.size()));
  for (const auto& g : l.nodes) {
    if (g.size() < 2) continue;
    l.intra = c.route(g[0], g[1]).bottleneck_bytes_per_s;
    break;
  }
  if (l.nodes.size() > 1) l.inter = c.route(l.nodes[0][0], l.nodes[1][0]).bottleneck_bytes_per_s;
  return l;
}

std::string shape(const std::vector<StageSpec>& stages) {
  std::vector<int> r;
  for (const StageSpec& s : stages) r.push_back(s.replicas);
  return fmt::format("{}", fmt::join(r, "-"));
}

// The loader's rules (SPEC section 3): a replicated stage splits a micro-batch into whole
// samples, copies x replicas fit the cluster, and the copies divide the global batch.
StagePlan make_loadable(StagePlan p, const Scenario& s) {
  const int64_t mb = s.training.micro_batch, gb = s.training.global_batch;
  const int gpus = s.cluster.num_devices();
  std::vector<std::string> fixes;
  int widest = 0, common = 0;
  for (const StageSpec& st : p.stages) {
    widest = std::max(widest, st.replicas);
    common = std::gcd(common, st.replicas);
  }
  // Too many replicas for the micro-batch: first move a factor common to every stage into
  // data copies (each stage keeps its GPUs and its all-reduce group), where the batch splits.
  for (int d = 2; widest > mb && d <= common; ++d) {
    if (common % d != 0 || widest / d > mb || gb % (mb * p.data * d) != 0) continue;
    const std::string before = shape(p.stages);
    for (StageSpec& st : p.stages) st.replicas /= d;
    p.data *= d;
    fixes.push_back(fmt::format("{} as {} copies of {}", before, d, shape(p.stages)));
    break;
  }
  int clamped = 0;
  std::string which;
  for (StageSpec& st : p.stages) {
    if (st.replicas <= mb) continue;
    which = fmt::format("layers {}-{} cut from {} to", st.first_layer, st.last_layer, st.replicas);
    st.replicas = static_cast<int>(mb);
    ++clamped;
  }
  if (clamped == 1) fixes.push_back(fmt::format("{} micro_batch = {} replicas", which, mb));
  if (clamped > 1)
    fixes.push_back(fmt::format("{} stages cut to micro_batch = {} replicas", clamped, mb));
  auto used = [&] {
    int n = 0;
    for (const StageSpec& st : p.stages) n += st.replicas;
    return n;
  };
  // No baseline gives one copy more GPUs than the cluster has; shave the widest if one did.
  for (bool shaved = false; used() > gpus; shaved = true) {
    auto it = std::max_element(p.stages.begin(), p.stages.end(), [](const auto& a, const auto& b) {
      return a.replicas < b.replicas;
    });
    if (it->replicas == 1) break;  // more stages than GPUs: no baseline builds that
    --it->replicas;
    if (!shaved) fixes.push_back("replicas shaved to fit the cluster");
  }
  int d = p.data;
  while (d > 1 && (d * used() > gpus || gb % (mb * d) != 0)) --d;
  if (d != p.data) fixes.push_back(fmt::format("data copies cut from {} to {}", p.data, d));
  p.data = d;
  if (!fixes.empty()) p.note += fmt::format("; made loadable: {}", fmt::join(fixes, ", "));
  return p;
}

// ---- PipeDream: optimizer_graph_hierarchical.py ----

struct PdEntry {
  double time = 0;   // seconds per minibatch at the bottleneck stage
  int split = -1;    // last layer before the last stage; -1: a single replicated stage
  int rest = -1;     // machines (0-based) of the layers before the split
  int machines = 1;  // replication of the last stage
};

// A[i][j][m]: layers i..j on m + 1 machines of one level; empty where memory rules it out.
class PdTable {
 public:
  PdTable(int layers, int machines)
      : L_(layers), M_(machines), v_(static_cast<size_t>(layers) * layers * machines) {}
  std::optional<PdEntry>& at(int i, int j, int m) { return v_[index(i, j, m)]; }
  const std::optional<PdEntry>& at(int i, int j, int m) const { return v_[index(i, j, m)]; }
  int machines() const { return M_; }

 private:
  size_t index(int i, int j, int m) const {
    return (static_cast<size_t>(i) * static_cast<size_t>(L_) + static_cast<size_t>(j)) *
               static_cast<size_t>(M_) +
           static_cast<size_t>(m);
  }
  int L_, M_;
  std::vector<std::optional<PdEntry>> v_;
};

// One level (compute_partitioning). A machine of this level costs the profile at the
// bottom and the level below's optimum above. `fanout` is the previous level's machine
// count (not the product, as in the code). The final level fills only prefixes (row 0);
// lower levels fill every segment, which the level above asks for.
PdTable pd_level(const Chain& c, const PdTable* below, int M, int fanout, double bw,
                 bool final_level, double memory) {
  const int L = c.size();
  PdTable A(L, M);
  auto cost = [&](int i, int j) -> std::optional<double> {
    if (below == nullptr) return c.time(i, j);
    const auto& e = below->at(i, j, below->machines() - 1);
    return e ? std::optional(e->time) : std::nullopt;
  };
  // A stage of r replicas with M - (m+1) machines downstream stashes about that many
  // minibatches per replica (the code's stashed_data_size).
  auto fits = [&](int i, int j, int m, int r) {
    return std::ceil(static_cast<double>(M - (m + 1)) / r) * (c.act(i, j) + c.par(i, j)) <= memory;
  };
  const int rows = final_level ? 1 : L;
  for (int i = 0; i < rows; ++i) {
    for (int j = i; j < L; ++j) {
      const auto t = cost(i, j);
      for (int m = 0; m < M && t; ++m) {
        if (!fits(i, j, m, m + 1)) continue;
        // The all-reduce is added to compute, not overlapped, with a 4(r-1)/r factor.
        const double ar = 4.0 * m * c.par(i, j) / (bw * (m + 1)) / fanout;
        A.at(i, j, m) = PdEntry{(*t + ar) / (m + 1), -1, -1, m + 1};
      }
    }
  }
  for (int i = 0; i < rows; ++i) {
    for (int m = 1; m < M; ++m) {
      for (int j = i + 1; j < L; ++j) {
        std::optional<PdEntry> best = A.at(i, j, m);
        for (int k = i; k < j; ++k) {
          const auto last_cost = cost(k + 1, j);
          if (!last_cost) continue;
          for (int r = 1; r <= m; ++r) {
            const auto& prev = A.at(i, k, m - r);
            if (!prev || !fits(k + 1, j, m, r)) continue;
            // Here the code does not divide the all-reduce by the fan-out.
            const double last = (*last_cost + 4.0 * (r - 1) * c.par(k + 1, j) / (bw * r)) / r;
            // Activations forward and gradients back, overlapped with compute: the term
            // the code adds under --activation_compression_ratio 1 (its README's runs).
            double t = std::max({prev->time, last, 2 * c.out(k) / (bw * r)});
            if (j + 1 < L) t = std::max(t, 2 * c.out(j) / (bw * r));
            if (!best || t < best->time) best = PdEntry{t, k, m - r, r};
          }
        }
        A.at(i, j, m) = best;
      }
    }
  }
  return A;
}

struct Segment {
  int first, last, replicas;
};

// analyze_partitioning: layers first..last over all the level's machines.
std::vector<Segment> pd_split(const PdTable& A, int first, int last) {
  std::vector<Segment> out;
  const PdEntry* e = &A.at(first, last, A.machines() - 1).value();
  while (e->split >= 0) {
    out.push_back({e->split + 1, last, e->machines});
    last = e->split;
    e = &A.at(first, last, e->rest).value();
  }
  out.push_back({first, last, e->machines});
  std::reverse(out.begin(), out.end());
  return out;
}

// ---- DAPPLE: HPGO's orchestrate.rs ----

// DAPPLE's cost models (data_parallel.rs, split_concat.rs) with the cluster's bandwidths in
// place of its constants (25e9 NVLink, 3e9 NCCL and 1e9 P2P over Ethernet). Stages take
// GPUs in index order, stage after stage: what its fresh-first and append-first policies
// give stages that fill nodes in turn. GPU ranges are [lo, hi).
class DappleNet {
 public:
  explicit DappleNet(const Layout& l) : l_(l) {}
  double all_reduce(int lo, int hi, double bytes) const {
    const int n = hi - lo;
    if (n <= 1) return 0;
    const double ring = bytes * 2 * (n - 1) / n;
    if (spans(lo, hi)) return ring / l_.inter;
    return ring / l_.intra / (n / 2);  // the code credits n/2 NVLink rings
  }
  // Moving `bytes` from the GPUs [flo, fhi) to [tlo, thi).
  double transfer(int flo, int fhi, int tlo, int thi, double bytes) const {
    if (spans(tlo, thi)) return bytes / l_.inter;
    // Sources off the destination's node send their share over the network. Nodes hold
    // consecutive device indices (as the shorthand builds them).
    const auto& node = l_.nodes[static_cast<size_t>(node_of(tlo))];
    const int local = std::max(0, std::min(fhi, node.back() + 1) - std::max(flo, node.front()));
    const int remote = fhi - flo - local;
    if (remote == 0) return bytes / l_.intra;
    return bytes / (fhi - flo) * remote / l_.inter;
  }

 private:
  int node_of(int d) const { return l_.node_of[static_cast<size_t>(d)]; }
  bool spans(int lo, int hi) const { return node_of(lo) != node_of(hi - 1); }
  const Layout& l_;
};

struct DappleStage {
  int first, last, units;
};
struct DapplePlan {
  std::vector<DappleStage> stages;
  int rp = 1;                // pipeline copies; a stage of `units` runs on units x rp GPUs
  double pipeline_time = 0;  // the bottleneck stage's time for the global batch
};

// compute_plan_sync: prefixes 0..j on m + 1 units, each unit rp GPUs. Stages of more units
// than micro_batch samples are left out (our loader's rule). `straight`: one unit a stage.
// No cell looks at the number of units in all: cell (j, m) reads cells of fewer units and
// stages of at most min(m, widest) units, and widest = min(units, micro_batch) only caps
// stages that cells below `units` could not hold anyway. So the table for the most units
// of an rp holds the table of every fewer, and one serves every unit count of that rp.
class DappleTable {
 public:
  DappleTable(const Chain& c, const DappleNet& net, int units, int rp, bool straight,
              int64_t micro_batch)
      : L_(c.size()), units_(units), rp_(rp),
        cells_(static_cast<size_t>(L_) * static_cast<size_t>(units)) {
    const int widest = straight ? 1 : static_cast<int>(std::min<int64_t>(units, micro_batch));
    // One stage: the code leaves its all-reduce to the latency estimate.
    for (int j = 0; j < L_; ++j)
      for (int m = 0; m < widest; ++m)
        at(j, m) = Cell{c.time(0, j) / ((m + 1) * rp), -1, -1, m + 1};
    for (int m = 1; m < units; ++m) {
      for (int j = 1; j < L_; ++j) {
        std::optional<Cell>& cell = at(j, m);
        for (int k = 0; k < j; ++k) {
          for (int mp = 1; mp <= std::min(m, widest); ++mp) {
            const std::optional<Cell>& prev = at(k, m - mp);
            if (!prev) continue;
            const int start = m - mp + 1;  // units before the new stage
            // Activations and gradients of the whole batch, not overlapped away.
            const double comm = net.transfer((start - prev->units) * rp, start * rp, start * rp,
                                             (start + mp) * rp, 2 * c.out(k));
            const double t = std::max({prev->time, c.time(k + 1, j) / (mp * rp), comm});
            if (!cell || t < cell->time) cell = Cell{t, k, m - mp, mp};
          }
        }
      }
    }
  }

  // The best pipeline of every layer on `units` units (at most the table's).
  std::optional<DapplePlan> plan(int units) const {
    const std::optional<Cell>& end = at(L_ - 1, units - 1);
    if (!end) return std::nullopt;
    DapplePlan p{{}, rp_, end->time};
    int last = L_ - 1;
    for (const Cell* e = &*end;; e = &at(last, e->rest).value()) {
      p.stages.push_back({e->split + 1, last, e->units});
      if (e->split < 0) break;
      last = e->split;
    }
    std::reverse(p.stages.begin(), p.stages.end());
    return p;
  }

 private:
  struct Cell {
    double time;
    int split = -1, rest = -1, units = 1;
  };
  std::optional<Cell>& at(int j, int m) {
    return cells_[static_cast<size_t>(j) * static_cast<size_t>(units_) + static_cast<size_t>(m)];
  }
  const std::optional<Cell>& at(int j, int m) const {
    return cells_[static_cast<size_t>(j) * static_cast<size_t>(units_) + static_cast<size_t>(m)];
  }
  int L_, units_, rp_;
  std::vector<std::optional<Cell>> cells_;
};

// sync_pipeline_speedup_analytical: (M-1) blocks of the bottleneck stage, one micro-batch
// through every stage, one forward transfer per cut, and the all-reduce that the drain of
// the s stages after stage s does not hide. Stages are inclusive here; the code's non-last
// stages also count the next stage's first layer, an off-by-one not copied.
double dapple_speedup(const Chain& c, const DappleNet& net, const DapplePlan& p, int64_t M) {
  const double total = c.time(0, c.size() - 1);
  const double block = p.pipeline_time / static_cast<double>(M);
  const double per_micro = static_cast<double>(p.rp) * static_cast<double>(M);
  double latency = block * static_cast<double>(M - 1) + total / per_micro;
  double delta = 0;
  int lo = 0;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const DappleStage& st = p.stages[s];
    const int hi = lo + st.units * p.rp;
    if (s + 1 < p.stages.size())
      latency +=
          net.transfer(lo, hi, hi, hi + p.stages[s + 1].units * p.rp, c.out(st.last) / per_micro);
    delta = std::max(
        delta, net.all_reduce(lo, hi, c.par(st.first, st.last)) - static_cast<double>(s) * block);
    lo = hi;
  }
  return total / (latency + delta);
}

}  // namespace

StagePlan pipedream_baseline(const Scenario& s, const Deadline& deadline) {
  const Layout lay = layout_of(s.cluster);
  // PipeDream profiles one minibatch: our micro-batch. Options as its README's runs: no
  // straight pipelines, no fewer machines, --activation_compression_ratio 1, and
  // --use_memory_constraint with the smallest GPU's memory.
  const Chain chain(s.model, 1.0);
  const int L = chain.size();
  struct Level {
    int machines;
    double bw;
    const char* what;
  };
  std::vector<Level> levels;  // bottom-up, as -n n1 n2 -b B1 B2
  if (lay.per_node > 1) levels.push_back({lay.per_node, lay.intra, "GPUs"});
  if (lay.nodes.size() > 1)
    levels.push_back({static_cast<int>(lay.nodes.size()), lay.inter, "nodes"});
  if (levels.empty()) {
    return make_loadable({{{0, L - 1, 1, std::nullopt}}, 1, "PipeDream DP: one GPU, one stage"}, s);
  }
  std::vector<PdTable> tables;
  tables.reserve(levels.size());
  int fanout = 1;
  for (size_t k = 0; k < levels.size(); ++k) {
    check(deadline);
    tables.push_back(pd_level(chain, k == 0 ? nullptr : &tables.back(), levels[k].machines, fanout,
                              levels[k].bw, k + 1 == levels.size(), lay.memory));
    fanout = levels[k].machines;
  }
  const auto& top = tables.back().at(0, L - 1, levels.back().machines - 1);
  if (!top) {
    StagePlan p = data_parallel_baseline(s);
    p.note = "PipeDream DP: no plan fits in GPU memory; fell back to " + p.note;
    return p;
  }
  // Top-down: each level re-partitions every segment of the level above on its machines;
  // a stage's GPUs are the product of its replication at every level.
  std::vector<Segment> segments{{0, L - 1, 1}};
  for (size_t k = levels.size(); k-- > 0;) {
    std::vector<Segment> next;
    for (const Segment& seg : segments)
      for (const Segment& sub : pd_split(tables[k], seg.first, seg.last))
        next.push_back({sub.first, sub.last, seg.replicas * sub.replicas});
    segments = std::move(next);
  }
  StagePlan p;
  for (const Segment& seg : segments)
    p.stages.push_back({seg.first, seg.last, seg.replicas, std::nullopt});
  std::vector<std::string> how;
  for (const Level& l : levels)
    how.push_back(fmt::format("{} {} at {:.3g} GB/s", l.machines, l.what, l.bw / 1e9));
  p.note =
      fmt::format("PipeDream DP: {} ({}), predicted {:.4g} ms/minibatch of {}", shape(p.stages),
                  fmt::join(how, " x "), top->time * 1e3, s.training.micro_batch);
  return make_loadable(std::move(p), s);
}

StagePlan dapple_baseline(const Scenario& s, const Deadline& deadline) {
  const int N = s.cluster.num_devices();
  const int64_t mb = s.training.micro_batch, gb = s.training.global_batch;
  const Layout lay = layout_of(s.cluster);
  const DappleNet net(lay);
  const Chain c(s.model, static_cast<double>(gb) / static_cast<double>(mb));
  const int L = c.size();
  std::optional<DapplePlan> best;
  double best_speedup = 0;
  std::string best_how;
  auto consider = [&](std::optional<DapplePlan> p, const std::string& how) {
    if (!p) return;
    const double speedup = dapple_speedup(c, net, *p, gb / (mb * p->rp));
    if (best && speedup <= best_speedup) return;
    best = std::move(p);
    best_speedup = speedup;
    best_how = how;
  };
  // i units of floor(N / i) GPUs each; copies that do not divide the batch are not tried.
  // Every i is searched: the code's occupancy check (bitsets of length N against i * rp)
  // drops the multi-stage plans of an i that does not divide N, a mismatch not copied.
  // The i of one rp share one table, built for the largest of them (N / rp).
  std::map<std::pair<int, bool>, DappleTable> tables;
  auto plan_for = [&](int units, bool straight) {
    const int rp = N / units;
    if (gb % (mb * rp) != 0) return;
    check(deadline);
    auto it = tables.find({rp, straight});
    if (it == tables.end())
      it = tables.try_emplace({rp, straight}, c, net, N / rp, rp, straight, mb)
               .first;
    consider(it->second.plan(units),
             fmt::format("{}DP over {} units", straight ? "straight " : "", units));
  };
  for (int i = 2; i <= N; ++i) plan_for(i, false);
  if (N > 2 && N % 2 == 0) {
    plan_for(2, true);
    plan_for(N, true);
  } else {
    plan_for(N, true);
  }
  // compute_bipartition: every cut and GPU split of two stages, one copy; uneven splits
  // such as 15:1 come from here. The transfer counts the activations once, as the code.
  for (int l = 0; l + 1 < L; ++l) {
    for (int g = 1; g < N; ++g) {
      if (g > mb || N - g > mb) continue;
      const double comp = std::max(c.time(0, l) / g, c.time(l + 1, L - 1) / (N - g));
      consider(DapplePlan{{{0, l, g}, {l + 1, L - 1, N - g}},
                          1,
                          std::max(comp, net.transfer(0, g, g, N, c.out(l)))},
               "bipartition");
    }
  }
  if (!best) {
    StagePlan p = data_parallel_baseline(s);
    p.note = "DAPPLE planner: no pipeline plan; fell back to " + p.note;
    return p;
  }
  StagePlan p;
  p.data = best->rp;
  for (const DappleStage& st : best->stages)
    p.stages.push_back({st.first, st.last, st.units, std::nullopt});
  if (p.data > 1 && p.stages.size() > 1) p.placement = PlacementPolicy::kFreshFirst;
  p.note = fmt::format(
      "DAPPLE planner: {} x {} copies ({}), estimated speedup {:.4g}, {:.4g} ms/iteration",
      shape(p.stages), p.data, best_how, best_speedup, c.time(0, L - 1) / best_speedup * 1e3);
  return make_loadable(std::move(p), s);
}

StagePlan data_parallel_baseline(const Scenario& s, const Deadline&) {
  const int N = s.cluster.num_devices();
  const int64_t mb = s.training.micro_batch, gb = s.training.global_batch;
  int best_d = 1, best_r = 1;
  for (int d = 1; d <= N; ++d) {
    if (gb % (mb * d) != 0) continue;
    const int r = static_cast<int>(std::min<int64_t>(N / d, mb));
    if (d * r >= best_d * best_r) {  // ties: more copies, whole micro-batches each
      best_d = d;
      best_r = r;
    }
  }
  StagePlan p{{{0, static_cast<int>(s.model.layers.size()) - 1, best_r, std::nullopt}},
              best_d,
              fmt::format("data parallel: {} copies x {} replicas of one stage on {} of {} GPUs",
                          best_d, best_r, best_d * best_r, N)};
  return make_loadable(std::move(p), s);
}

}  // namespace pipesim
