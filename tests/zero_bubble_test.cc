// Zero Bubble's profile-driven schedules (Qi et al. 2024, arXiv 2401.10241): ZB-1p and
// ZB-2p (the automatic schedule under p M_B and 2p M_B of activations) and ZB-V (two chunks
// per device in a V), against the paper's published bubble rates, its ZB-V figure, their
// memory limits and the CLI.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <tuple>

#include "schedules/zero_bubble_auto.h"
#include "schedules/zero_bubble_v.h"
#include "tests/support.h"

namespace pipesim {
namespace {

using test::PipeSpec;
using test::SimRun;

constexpr int64_t kMiB = 1024 * 1024;

// One row of the paper's tables: p stages, m micro-batches, per-stage (Table 5) or
// per-chunk (Table 8) times in microseconds, T_comm the latency of each cross-stage edge,
// and the published bubble rate.
struct Row {
  int p, m;
  double f, b, w, comm;
  double published;
};

// The scenario shape of docs/validation.md: p single-GPU stages (2p chunks for zb-v), the
// paper's times, T_comm as the link latency, nothing sent (transfers cost the latency only).
PipeSpec table_pipe(const Row& r, const std::string& schedule) {
  PipeSpec p;
  p.schedule = schedule;
  p.stages = r.p;
  p.micro_batches = r.m;
  p.virtual_stages = schedule == "zb-v" ? 2 : 1;
  p.tf_ms = {r.f / 1000};
  p.tb_ms = {r.b / 1000};
  p.tw_ms = {r.w / 1000};
  p.latency = fmt::format("{} us", r.comm);
  return p;
}

// Bubble rate = (cost - m (T_F + T_B + T_W)) / cost with the cost measured as the paper's
// generator does (efficiency.py, v_schedule.py): per device, from its first forward's start
// to its last step's end, the longest of them.
double bubble_rate(const SimRun& r, const Row& row, int chunks) {
  Time span;
  for (int d = 0; d < row.p; ++d) {
    Time first = Time::max();
    for (OpId id : r.graph.stream(d)) first = std::min(first, r.timeline.start[id]);
    span = max(span, test::device_finish(r, d) - first);
  }
  const double work = row.m * chunks * (row.f + row.b + row.w) * 1e-6;
  return (span.seconds() - work) / span.seconds();
}

// Table 5, columns ZB-1p and ZB-2p (shared/reference/schedules.md; the paper prints the
// same numbers as sail-sg/zero-bubble-pipeline-parallelism `efficiency.py`,
// iclr_bubble_rates). ZB-1p equals ZB-H1 in every row.
TEST(ZeroBubbleAuto, PaperTableFive) {
  struct Pair {
    Row one, two;
  };
  auto row = [](int p, int m, double f, double b, double w, double c, double one, double two) {
    return Pair{{p, m, f, b, w, c, one}, {p, m, f, b, w, c, two}};
  };
  const Pair rows[] = {
      row(8, 24, 18522, 18086, 9337, 601, 0.1585, 0.0433),
      row(8, 32, 18513, 18086, 9331, 626, 0.1242, 0.0039),
      row(8, 64, 18546, 18097, 9321, 762, 0.0674, 0.0026),
      row(8, 24, 29718, 29444, 19927, 527, 0.1323, 0.0029),
      row(8, 32, 29802, 29428, 19530, 577, 0.1045, 0.0022),
      row(8, 64, 29935, 29621, 19388, 535, 0.0554, 0.0010),
      row(16, 48, 11347, 11248, 8132, 377, 0.1397, 0.0066),
      row(16, 64, 11307, 11254, 8101, 379, 0.1088, 0.0054),
      row(16, 128, 11325, 11308, 8109, 378, 0.0576, 0.0028),
      row(32, 96, 10419, 10207, 7715, 408, 0.1421, 0.0038),
      row(32, 128, 10408, 10204, 7703, 408, 0.1106, 0.0029),
      row(32, 256, 10402, 10248, 7698, 460, 0.0594, 0.0018),
  };
  // The memory the paper's generator counts per token of a layer (efficiency.py, and its
  // Table 1): F allocates 34h + 5as bytes, W keeps 32h of them past B. s = 1024; the rows
  // are the 1.5B (h 2304, a 24), 6.2B (4096, 32), 14.6B (5120, 40), 28.3B (6144, 48) models.
  auto with_memory = [](test::PipeSpec p, size_t i) {
    const int64_t h[] = {2304, 4096, 5120, 6144}, a[] = {24, 32, 40, 48};
    const size_t model = i < 3 ? 0 : i < 6 ? 1 : i < 9 ? 2 : 3;
    p.activation = fmt::format("{} B", 34 * h[model] + 5 * a[model] * 1024);
    p.weight_activation = fmt::format("{} B", 32 * h[model]);
    return p;
  };
  for (size_t i = 0; i < std::size(rows); ++i) {
    const Pair& r = rows[i];
    const double one =
        bubble_rate(test::run_pipe(with_memory(table_pipe(r.one, "zb-1p"), i)), r.one, 1);
    EXPECT_NEAR(one, r.one.published, 0.01) << "zb-1p p=" << r.one.p << " m=" << r.one.m;
    const double two =
        bubble_rate(test::run_pipe(with_memory(table_pipe(r.two, "zb-2p"), i)), r.two, 1);
    EXPECT_NEAR(two, r.two.published, 0.01) << "zb-2p p=" << r.two.p << " m=" << r.two.m;
    // Twice the activation memory buys a smaller bubble in every row of the table
    // (0.0433 < 0.1585 ... 0.0018 < 0.0594); the 0.01 band alone would let the two meet.
    EXPECT_LT(two, one) << "p=" << r.one.p << " m=" << r.one.m;
  }
}

// Table 8, column ZB-V (per-chunk times; a device runs two chunks). Same source, the
// paper's arxiv_bubble_rates with `v_schedule.py`.
TEST(ZeroBubbleV, PaperTableEight) {
  const Row rows[] = {
      {16, 48, 14407, 14380, 9676, 1610, 0.0697},  {16, 64, 14412, 14393, 9688, 1621, 0.0533},
      {16, 128, 14316, 14306, 9639, 1619, 0.0274}, {24, 72, 6763, 6969, 5251, 755, 0.0638},
      {24, 96, 6783, 6984, 5259, 758, 0.0483},     {24, 192, 6785, 6990, 5260, 770, 0.0250},
      {32, 96, 9458, 9748, 7288, 879, 0.0593},     {32, 128, 9469, 9744, 7306, 892, 0.0451},
      {32, 256, 9447, 9644, 7193, 887, 0.0236},
  };
  for (const Row& r : rows) {
    const double rate = bubble_rate(test::run_pipe(table_pipe(r, "zb-v")), r, 2);
    EXPECT_NEAR(rate, r.published, 0.01) << "zb-v p=" << r.p << " m=" << r.m;
  }
}

std::string order_of(const PipeSpec& p) {
  const auto r = test::cli({"order", test::write_temp("zb-order.yaml", test::to_yaml(p))});
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

PipeSpec uniform(const std::string& schedule) {
  PipeSpec p;  // p = 4, M = 8, t_f = t_b = t_w = 1 ms, no transfer time
  p.schedule = schedule;
  p.tw_ms = {1.0};
  p.virtual_stages = schedule == "zb-v" ? 2 : 1;
  return p;
}

// ZB-V, p = 4, M = 8, t_f = t_b = t_w = 1 per chunk. The expected string is the golden
// output of this port of `v_schedule.py`, not a transcription of the paper's figure; it
// is checked against the shape the figure shows: device 0 runs chunk-0 forwards until
// chunk 1's first forward comes back up (7 = 2(p - 1) + 1 of them), device 3 alternates
// the two chunks from the start; every device then runs one backward and one forward per
// round, W right after its B while memory allows, and the last W steps drain at the end.
TEST(ZeroBubbleV, OrderP4M8) {
  EXPECT_EQ(order_of(uniform("zb-v")),
            "dev0: F0.c0 F1.c0 F2.c0 F3.c0 F4.c0 F5.c0 F6.c0 F0.c1 B0.c1 W0.c1 F1.c1 B1.c1 W1.c1 "
            "F2.c1 B2.c1 W2.c1 F3.c1 B3.c1 W3.c1 F7.c0 B0.c0 W0.c0 F4.c1 B4.c1 W4.c1 B1.c0 W1.c0 "
            "F5.c1 B5.c1 W5.c1 B2.c0 W2.c0 F6.c1 B6.c1 W6.c1 B3.c0 W3.c0 F7.c1 B7.c1 B4.c0 W7.c1 "
            "B5.c0 W4.c0 B6.c0 W5.c0 B7.c0 W6.c0 W7.c0\n"
            "dev1: F0.c0 F1.c0 F2.c0 F3.c0 F4.c0 F0.c1 F5.c0 F1.c1 B0.c1 W0.c1 F2.c1 B1.c1 W1.c1 "
            "F3.c1 B2.c1 W2.c1 F6.c0 B0.c0 W0.c0 F4.c1 B3.c1 W3.c1 F7.c0 B1.c0 W1.c0 F5.c1 B4.c1 "
            "W4.c1 B2.c0 W2.c0 F6.c1 B5.c1 W5.c1 B3.c0 W3.c0 F7.c1 B6.c1 B4.c0 B7.c1 B5.c0 W6.c1 "
            "B6.c0 W4.c0 B7.c0 W7.c1 W5.c0 W6.c0 W7.c0\n"
            "dev2: F0.c0 F1.c0 F2.c0 F0.c1 F3.c0 F1.c1 F4.c0 F2.c1 B0.c1 W0.c1 F3.c1 B1.c1 W1.c1 "
            "F5.c0 B0.c0 W0.c0 F4.c1 B2.c1 W2.c1 F6.c0 B1.c0 W1.c0 F5.c1 B3.c1 W3.c1 F7.c0 B2.c0 "
            "W2.c0 F6.c1 B4.c1 W4.c1 B3.c0 W3.c0 F7.c1 B5.c1 B4.c0 B6.c1 B5.c0 B7.c1 B6.c0 W5.c1 "
            "B7.c0 W4.c0 W6.c1 W5.c0 W7.c1 W6.c0 W7.c0\n"
            "dev3: F0.c0 F0.c1 F1.c0 F1.c1 F2.c0 F2.c1 F3.c0 F3.c1 B0.c1 W0.c1 F4.c0 B0.c0 W0.c0 "
            "F4.c1 B1.c1 W1.c1 F5.c0 B1.c0 W1.c0 F5.c1 B2.c1 W2.c1 F6.c0 B2.c0 W2.c0 F6.c1 B3.c1 "
            "W3.c1 F7.c0 B3.c0 W3.c0 F7.c1 B4.c1 B4.c0 B5.c1 B5.c0 B6.c1 B6.c0 B7.c1 B7.c0 W4.c1 "
            "W4.c0 W5.c1 W5.c0 W6.c1 W6.c0 W7.c1 W7.c0\n");
}

// With equal times and no transfer time the heuristic reproduces the handcrafted schedules:
// ZB-1p is ZB-H1 (the paper: "ZB-1p equals ZB-H1" in every row) and ZB-2p starts as ZB-H2
// does, 2(p - s) - 1 forwards before the first backward (shared/reference/schedules.md).
TEST(ZeroBubbleAuto, UniformStagesGiveTheHandcraftedShapes) {
  EXPECT_EQ(order_of(uniform("zb-1p")), order_of(uniform("zb-h1")));
  const std::string two = order_of(uniform("zb-2p"));
  EXPECT_NE(two.find("dev0: F0 F1 F2 F3 F4 F5 F6 B0"), std::string::npos) << two;
  EXPECT_NE(two.find("dev3: F0 B0 F1 B1"), std::string::npos) << two;
}

// The memory limits, in the schedules' own accounting (F allocates M_B, B frees the half W
// does not read, W the rest): at most k p M_B per device, k = 1, 2, 1 for zb-1p, zb-2p,
// zb-v (whose M_B is both chunks). In the simulator's accounting (everything held until W,
// SPEC section 3) that bounds the micro-batches between F and W by 2 k p: n_FB + n_BW / 2
// <= k p. Uneven stages and transfers included.
TEST(ZeroBubbleAuto, MemoryWithinTheLimits) {
  for (const auto& [schedule, k] :
       {std::pair<std::string, int>{"zb-1p", 1}, {"zb-2p", 2}, {"zb-v", 1}}) {
    PipeSpec p = uniform(schedule);
    p.micro_batches = 16;
    p.weight_activation = "512 KiB";  // W keeps half of each micro-batch's 1 MiB
    p.output = "4 MiB";
    p.bandwidth = "2 GB/s";
    p.latency = "50 us";
    const int layers = p.stages * p.virtual_stages;
    p.tf_ms.clear();
    p.tb_ms.clear();
    p.tw_ms.clear();
    for (int l = 0; l < layers; ++l) {
      p.tf_ms.push_back(1.0 + 0.25 * (l % 3));
      p.tb_ms.push_back(1.0 + 0.5 * (l % 2));
      p.tw_ms.push_back(0.5 + 0.25 * (l % 4));
    }
    const SimRun r = test::run_pipe(p);
    const int chunks = p.virtual_stages;
    for (int d = 0; d < p.stages; ++d) {
      // Replay the device's order in the schedule's accounting, in half-MiB units.
      int64_t held = 0, peak = 0;
      for (OpId id : r.graph.stream(d)) {
        const Op& op = r.graph.op(id);
        held += op.kind == OpKind::kForward      ? 2
                : op.kind == OpKind::kBackward   ? -1
                : op.kind == OpKind::kWeightGrad ? -1
                                                 : 0;
        peak = std::max(peak, held);
      }
      EXPECT_LE(peak, 2 * k * p.stages * chunks) << schedule << " dev" << d;
      EXPECT_LE(test::peak_activation_bytes(r, d), 2 * k * p.stages * chunks * kMiB)
          << schedule << " dev" << d;
    }
    // Byte-identical reruns.
    EXPECT_EQ(to_json(r.report), to_json(test::run_pipe(p).report)) << schedule;
    EXPECT_EQ(order_of(p), order_of(p)) << schedule;
  }
}

// Like zb-h1, the profile-driven schedules need the backward split; zb-v runs 2 chunks.
TEST(ZeroBubbleAuto, BadInput) {
  for (const char* schedule : {"zb-1p", "zb-2p", "zb-v"}) {
    PipeSpec p = uniform(schedule);
    p.tw_ms.clear();
    const auto r = test::cli({"run", test::write_temp("zb-bad.yaml", test::to_yaml(p))});
    EXPECT_EQ(r.code, 2) << schedule;
    EXPECT_NE(r.err.find(std::string("strategy.schedule: ") + schedule +
                         " needs every layer's backward split"),
              std::string::npos)
        << r.err;
  }
  PipeSpec p = uniform("zb-v");
  p.virtual_stages = 3;
  const auto r = test::cli({"run", test::write_temp("zb-bad.yaml", test::to_yaml(p))});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("zb-v runs two chunks per device, not 3"), std::string::npos) << r.err;
  // Fewer micro-batches than devices cannot fill the V (with equal stages, exactly M < S).
  p.virtual_stages = 2;
  p.micro_batches = 3;
  const auto few = test::cli({"run", test::write_temp("zb-bad.yaml", test::to_yaml(p))});
  EXPECT_EQ(few.code, 2);
  EXPECT_NE(few.err.find("zb-v cannot order 3 micro-batches on 4 devices"), std::string::npos)
      << few.err;
  p.micro_batches = 4;
  EXPECT_EQ(test::cli({"run", test::write_temp("zb-ok.yaml", test::to_yaml(p))}).code, 0);
}

// Whether per-device orders of F, B and W over `stages` global stages can all run:
// F(g, n) needs F(g - 1, n), B(g, n) needs F(g, n) and B(g + 1, n), W(g, n) needs B(g, n),
// each device running its list in order. Every step appears once per micro-batch and
// global stage of the device. `stage_of(device, chunk)` maps to the global stage. Returns
// the first problem, or "" for a valid order.
template <class StageOf>
std::string order_problem(const ScheduleOrder& order, int stages, int M, StageOf stage_of) {
  std::map<std::tuple<int, int, int>, int> seen;  // (kind, global stage, micro-batch) -> count
  for (size_t d = 0; d < order.size(); ++d) {
    for (const Step& s : order[d]) {
      if (s.micro_batch < 0 || s.micro_batch >= M) return fmt::format("dev{}: micro-batch", d);
      ++seen[{static_cast<int>(s.kind), stage_of(static_cast<int>(d), s.chunk), s.micro_batch}];
    }
  }
  for (int g = 0; g < stages; ++g) {
    for (int n = 0; n < M; ++n) {
      for (OpKind k : {OpKind::kForward, OpKind::kBackward, OpKind::kWeightGrad}) {
        const auto it = seen.find({static_cast<int>(k), g, n});
        if (it == seen.end() || it->second != 1)
          return fmt::format("stage {} micro-batch {} kind {}: not exactly once", g, n,
                             static_cast<int>(k));
      }
    }
  }
  std::set<std::tuple<int, int, int>> done;
  std::vector<size_t> next(order.size(), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t d = 0; d < order.size(); ++d) {
      while (next[d] < order[d].size()) {
        const Step& s = order[d][next[d]];
        const int g = stage_of(static_cast<int>(d), s.chunk), n = s.micro_batch;
        auto has = [&](OpKind k, int stage) {
          return done.count({static_cast<int>(k), stage, n}) > 0;
        };
        const bool ready =
            s.kind == OpKind::kForward ? g == 0 || has(OpKind::kForward, g - 1)
            : s.kind == OpKind::kBackward
                ? has(OpKind::kForward, g) && (g + 1 == stages || has(OpKind::kBackward, g + 1))
                : has(OpKind::kBackward, g);
        if (!ready) break;
        done.insert({static_cast<int>(s.kind), g, n});
        ++next[d];
        progress = true;
      }
    }
  }
  for (size_t d = 0; d < order.size(); ++d) {
    if (next[d] < order[d].size()) return fmt::format("dev{} waits forever at step {}", d, next[d]);
  }
  return "";
}

// Random uneven stages, as replicas (a share of the micro-batch: less time and memory),
// tensor ranks and recompute (a longer B, a smaller activation) make them: times from
// zero to 4 ms, activations from 0 to 8 MiB, transfers zero (same device) to 3 ms.
StageCosts random_costs(std::mt19937& rng, int stages) {
  auto time = [&](int max_us) {
    return Time::ps(int64_t{std::uniform_int_distribution<int>(0, max_us)(rng)} * 1'000'000);
  };
  StageCosts c;
  for (int g = 0; g < stages; ++g) {
    const int share = std::uniform_int_distribution<int>(1, 4)(rng);  // replicas x tensor
    c.forward.push_back(time(2000) / share);
    c.backward.push_back(time(4000) / share);
    c.weight.push_back(time(2000) / share);
    c.activation.push_back(std::uniform_int_distribution<int64_t>(0, 8 * kMiB)(rng) / share);
    c.weight_activation.push_back(c.activation.back() / 2);
    if (g + 1 < stages) {
      const bool local = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
      c.send.push_back(local ? Time::zero() : time(3000));
      c.gradient.push_back(local ? Time::zero() : time(3000));
    }
  }
  return c;
}

// The greedy schedulers were written for equal stages; on any uneven costs they must still
// give every stage each step once, in an order that runs (no B before its F, no forward
// ahead of the stage that feeds it, no wait on a step that comes later).
TEST(ZeroBubbleAuto, AnyStageCostsGiveValidOrders) {
  std::mt19937 rng(20240123);
  for (int trial = 0; trial < 3000; ++trial) {
    const int S = std::uniform_int_distribution<int>(1, 6)(rng);
    const int M = std::uniform_int_distribution<int>(1, 3 * S + 2)(rng);
    const StageCosts c = random_costs(rng, S);
    for (int factor : {1, 2}) {
      const ScheduleOrder order = zero_bubble_auto_order(c, M, factor);
      ASSERT_EQ(order.size(), static_cast<size_t>(S));
      const std::string problem = order_problem(order, S, M, [](int d, int) { return d; });
      ASSERT_EQ(problem, "") << "trial " << trial << " zb-" << factor << "p S=" << S << " M=" << M;
    }
    // ZB-V: 2S global stages; device d holds stages d and 2S - 1 - d.
    const StageCosts v = random_costs(rng, 2 * S);
    const auto vorder = zero_bubble_v_order(v, M);
    if (!vorder) continue;  // too few micro-batches to fill the V: refused, not asserted
    ASSERT_EQ(vorder->size(), static_cast<size_t>(S));
    const std::string problem = order_problem(
        *vorder, 2 * S, M, [S](int d, int chunk) { return chunk == 0 ? d : 2 * S - 1 - d; });
    ASSERT_EQ(problem, "") << "trial " << trial << " zb-v S=" << S << " M=" << M;
  }
}

// Uneven stages from replicas and recompute, end to end: a cheap stage after an expensive
// one could take all of its micro-batches' forwards before the expensive one had fed them.
TEST(ZeroBubbleAuto, ReplicasAndRecomputeRun) {
  const std::string head =
      "cluster: {gpu: {name: g, memory: 80 GiB, peak: 100 TFLOPS, hbm_bandwidth: 2000 GB/s}, "
      "nodes: 1, gpus_per_node: 4, intra_node: nvlink}\n"
      "model: {generator: transformer, layers: 4, hidden: 512, heads: 8, sequence: 256, "
      "vocab: 1000}\n"
      "training: {global_batch: 8, micro_batch: 2, precision: mixed, optimizer: adam}\n";
  const std::string strategies[] = {
      "strategy: {schedule: zb-2p, stages: [{layers: 0-2}, {layers: 3, replicas: 2}, "
      "{layers: 4-5}]}\n",
      "strategy: {schedule: zb-1p, recompute: selective, stages: [{layers: 0-2}, {layers: 3}, "
      "{layers: 4}, {layers: 5}]}\n",
  };
  for (const std::string& strategy : strategies) {
    const std::string file = test::write_temp("zb-uneven.yaml", head + strategy);
    for (const char* command : {"run", "order"}) {
      const auto r = test::cli({command, file});
      EXPECT_EQ(r.code, 0) << command << " " << strategy << r.err;
    }
  }
}

}  // namespace
}  // namespace pipesim
