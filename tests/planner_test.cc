// `pipesim plan` against an exhaustive enumeration written here, independently of the
// planner: every contiguous cut, every per-stage replica count the micro-batch allows,
// every data-parallel degree and three schedules, each simulated in full. The planner's best
// must be within 1 % of the enumeration's best on small heterogeneous cases; and against
// the planner's own --exhaustive where the enumeration does not reach. Refine's
// neighbourhoods, worked by hand. The simulation work the planner predicts against the
// graphs it predicts.
#include "planner/planner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <set>

#include "planner/cost_model.h"
#include "planner/refine.h"
#include "scenario/setup.h"
#include "tests/planner_cases.h"
#include "tests/support.h"

namespace pipesim {
namespace {

using test::Case;
using test::case_file;
using test::cases;
using test::scenario_yaml;

// Best throughput among strategies that fit, over the enumerated space.
double exhaustive_best(const Case& c, int* count, std::string* best_strategy = nullptr) {
  const int L = static_cast<int>(c.layers.size());
  const int N = c.nodes * c.gpus_per_node;
  double best = 0;
  for (int d = 1; d <= N; ++d) {
    if (c.global_batch % (c.micro_batch * d) != 0) continue;
    for (int S = 1; S <= L; ++S) {
      // Cuts: S - 1 of the L - 1 boundaries (bit k set: a stage ends after layer k).
      for (int mask = 0; mask < (1 << (L - 1)); ++mask) {
        if (__builtin_popcount(static_cast<unsigned>(mask)) != S - 1) continue;
        std::vector<std::pair<int, int>> ranges;
        int first = 0;
        for (int k = 0; k < L; ++k) {
          if (k == L - 1 || (mask >> k & 1)) {
            ranges.emplace_back(first, k);
            first = k + 1;
          }
        }
        std::vector<int> reps(static_cast<size_t>(S), 1);
        for (bool more = true; more;) {
          int sum = 0;
          for (int r : reps) sum += r;
          if (sum * d <= N) {
            std::string stages;
            for (int s = 0; s < S; ++s) {
              stages += fmt::format(
                  "    - {{layers: {}-{}, replicas: {}}}\n", ranges[static_cast<size_t>(s)].first,
                  ranges[static_cast<size_t>(s)].second, reps[static_cast<size_t>(s)]);
            }
            for (const char* sched :
                 {"schedule: dapple", "schedule: dapple\n  warmup: auto", "schedule: gpipe"}) {
              const std::string st =
                  fmt::format("  {}\n  data: {}\n  stages:\n{}", sched, d, stages);
              const test::SimRun r = test::run_yaml(scenario_yaml(c, st));
              ++*count;
              if (!r.report.oom.oom && r.report.throughput > best) {
                best = r.report.throughput;
                if (best_strategy) *best_strategy = st;
              }
            }
          }
          more = false;
          for (int i = S - 1; i >= 0; --i) {
            if (reps[static_cast<size_t>(i)] < c.micro_batch) {
              ++reps[static_cast<size_t>(i)];
              for (int k = i + 1; k < S; ++k) reps[static_cast<size_t>(k)] = 1;
              more = true;
              break;
            }
          }
        }
      }
    }
  }
  return best;
}

// The simulation work the planner predicts (CostModel::simulation_work_per_copy: what
// phases 2 and 3 may simulate within their budget) against the graph the simulation
// stores (compact rings, every copy), at context, expert and tensor degrees on one server:
// the ratio graph ops / work stays within a factor 2 of the dense plan's (0.81; now
// 0.75-1.27). The work once left out the context ranks (each runs every op of its stage)
// and the context and expert exchanges: the ratio was 11.2 at CP 2, 29.2 at CP 4, 2.26 at
// TP 2 x CP 2, 3.75 at EP 2 and 6.33 at EP 4, and plan on mixed-cluster.yaml simulated
// Llama 3 8B's context-parallel plans at about 15 times their predicted cost. On GPUs of
// different speeds the judge simulates each plan twice (its split and the one balanced by
// speed): twice the work.
TEST(SimulationWork, FollowsTheGraphAcrossContextAndExpertDegrees) {
  const std::string dense = R"(
cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 8, intra_node: nvswitch3}
model: {generator: transformer, layers: 8, hidden: 1024, heads: 8, sequence: 8192, vocab: 32000,
        mlp: swiglu, norm: rmsnorm, position: rotary, flash_attention: true}
training: {global_batch: 32, micro_batch: 1, precision: bf16, optimizer: adam}
strategy: {schedule: dapple, pipeline: 2, )";
  struct Row {
    std::string yaml;
    int t = 1, cp = 1, ep = 1, data = 1;
  };
  std::vector<Row> rows;
  for (const auto& [t, cp] :
       std::vector<std::pair<int, int>>{{1, 1}, {1, 2}, {1, 4}, {2, 2}, {4, 1}}) {
    const int data = 4 / (t * cp);
    rows.push_back({dense + fmt::format("tensor: {}, context: {}, data: {}}}\n", t, cp, data), t,
                    cp, 1, data});
  }
  for (const int ep : {2, 4})
    rows.push_back({test::moe_scenario(fmt::format("data: 4, expert: {}", ep)), 1, 1, ep, 4});
  double dense_ratio = 0;
  for (const Row& r : rows) {
    const Scenario s = load_scenario_text(r.yaml, "work.yaml");
    planner::PlanPoint p;
    const int L = static_cast<int>(s.model.layers.size());
    for (const StageSpec& st : s.strategy.stages)
      p.stages.push_back({st.first_layer, st.last_layer, 1});
    p.data = r.data;
    p.context = r.cp;
    p.expert = r.ep;
    p.micro_batch = s.training.micro_batch;
    ASSERT_EQ(p.stages.back().last_layer, L - 1);
    const double work = planner::CostModel(s, r.t, nullptr, r.cp, r.ep)
                            .simulation_work_per_copy(p, s.micro_batches);
    const double ratio = static_cast<double>(scenario_task_graph(s, true).size()) / work;
    if (dense_ratio == 0) dense_ratio = ratio;
    EXPECT_GT(ratio, dense_ratio / 2) << r.yaml;
    EXPECT_LT(ratio, dense_ratio * 2) << r.yaml;
    if (r.t == 1 && r.cp == 1 && r.ep == 1) {
      std::string slow = r.yaml;
      slow.replace(slow.find("nvswitch3}"), 10,
                   "nvswitch3, slowdown: [{device: node0/gpu1, compute: 1.2}]}");
      const Scenario s2 = load_scenario_text(slow, "slow.yaml");
      EXPECT_DOUBLE_EQ(planner::CostModel(s2, 1).simulation_work_per_copy(p, s2.micro_batches),
                       2 * work);
    }
  }
}

// The copies the planner's prediction counts as one (CostModel::folded_copies) for a
// scenario's own strategy.
int predicted_folds(const Scenario& sc) {
  const Strategy& st = sc.strategy;
  planner::PlanPoint p;
  p.stages = st.stages;
  p.schedule = st.schedule;
  p.virtual_stages = std::max(1, st.virtual_stages);
  p.data = st.data;
  p.context = st.context;
  p.expert = st.expert;
  p.expert_tensor = st.expert_tensor;
  p.zero = st.zero;
  p.placement = sc.placement_policy;
  p.tensor = std::max(1, st.tensor_of(st.stages.front()));
  return planner::CostModel(sc, p.tensor, nullptr, st.context).folded_copies(p);
}

// The copies the prediction counts once are those the simulator folds: g at a time, the
// fewest of fold_groups that fill whole servers (each position's apart in Megatron-Core's
// rank order) and hold whole context and expert groups. On 4 servers of 8 (one NIC a GPU),
// each layout's copies (data x context) over g:
//   TP 2 x DP 16: 2 GPUs a copy, 4 to a server: 16 / 4;  DP 32: 32 / 8;
//   TP 2 x PP 2 x DP 8: 8 / 2;  TP 8 x DP 4: 4 / 1;
//   PP 2 (2 chunks each) x DP 16: 2 GPUs a copy (its 4 chunks share them): 16 / 4;
//   PP 4 (2 chunks each) x DP 8: 8 / 2 (8 chunks, but 4 GPUs a copy);
//   TP 2 x CP 2 x DP 8: 16 copies of 2 GPUs: 16 / 4;  TP 8 x CP 4: one context group
//   spanning the 4 copies, which rotates into itself: 4 / 1;
//   a tree all-reduce without ZeRO, or a straggler: simulated in full, 1.
// With 32 experts (expert groups whole in each group built, or one spanning every copy):
//   DP 32, EP 8: 8 copies a server, whole groups of 8: 32 / 8;
//   TP 2 x DP 16, EP 4: 4 copies a server (2 of them an expert group): 16 / 4;
//   DP 32, EP 32 and TP 2 x DP 16, EP 32: one group over every copy: 32 / 8, 16 / 4;
//   PP 2 x DP 16, EP 16: 16 / 8 (Megatron-Core's rank order puts each position's 16 GPUs
//   on two servers of their own: 8 copies fill them; one group over every copy);
//   PP 2 x TP 2 x CP 2 x DP 4: 8 copies of 2 GPUs on each position's 16: 8 / 4;
//   DP 32, EP 16: two groups, 16 copies each: 32 / 16;
//   TP 2 x DP 16, EP 4, ETP 2 (groups of 8 lanes, 4 copies): 16 / 4;
//   TP 2 x DP 16, EP 16, ETP 2 (one group of 32 lanes, not spanning at ETP 2): 16 / 16.
TEST(SimulationWork, CountsTheCopiesTheSimulationFolds) {
  const std::string base = R"(
cluster: {gpu: h100-80gb, nodes: 4, gpus_per_node: 8, intra_node: nvswitch,
          inter_node: {preset: ib-ndr, nics: 8}SLOW}
model: {generator: transformer, layers: 8, hidden: 1024, heads: 8, sequence: 1024, vocab: 32000}
training: {global_batch: 64, micro_batch: 1, precision: bf16, optimizer: adam}
strategy: {)";
  const std::vector<std::tuple<std::string, std::string, int>> rows{
      {"schedule: dapple, pipeline: 1, tensor: 2, data: 16", "", 4},
      {"schedule: dapple, pipeline: 1, data: 32", "", 4},
      {"schedule: dapple, pipeline: 2, tensor: 2, data: 8", "", 4},
      {"schedule: dapple, pipeline: 1, tensor: 8, data: 4", "", 4},
      {"schedule: interleaved, pipeline: 2, virtual_stages: 2, data: 16", "", 4},
      {"schedule: interleaved, pipeline: 4, virtual_stages: 2, data: 8", "", 4},
      {"schedule: dapple, pipeline: 1, tensor: 2, context: 2, data: 8", "", 4},
      {"schedule: dapple, pipeline: 1, tensor: 8, context: 4", "", 4},
      {"schedule: dapple, pipeline: 2, data: 16, allreduce: tree", "", 1},
      {"schedule: dapple, pipeline: 1, tensor: 2, data: 16",
       ", slowdown: [{device: node0/gpu1, compute: 1.2}]", 1},
      {"schedule: dapple, pipeline: 1, data: 32, expert: 8", "", 4},
      {"schedule: dapple, pipeline: 1, tensor: 2, sequence_parallel: true, data: 16, expert: 4", "",
       4},
      {"schedule: dapple, pipeline: 1, data: 32, expert: 32", "", 4},
      {"schedule: dapple, pipeline: 1, tensor: 2, sequence_parallel: true, data: 16, expert: 32",
       "", 4},
      {"schedule: dapple, pipeline: 2, data: 16, expert: 16", "", 2},
      {"schedule: dapple, pipeline: 2, tensor: 2, context: 2, data: 4", "", 2},
      {"schedule: dapple, pipeline: 1, data: 32, expert: 16", "", 2},
      {"schedule: dapple, pipeline: 1, tensor: 2, sequence_parallel: true, data: 16, expert: 4, "
       "expert_tensor: 2",
       "", 4},
      {"schedule: dapple, pipeline: 1, tensor: 2, sequence_parallel: true, data: 16, expert: 16, "
       "expert_tensor: 2",
       "", 1}};
  for (const auto& [strategy, slow, folded] : rows) {
    std::string yaml = base + strategy + "}\n";
    yaml.replace(yaml.find("SLOW"), 4, slow);
    if (strategy.find("expert") != std::string::npos) {
      yaml.replace(yaml.find("vocab: 32000"), 12,
                   "vocab: 32000, experts: 32, top_k: 2, expert_ffn: 512, mlp: swiglu");
    }
    const Scenario sc = load_scenario_text(yaml, "fold.yaml");
    const Timeline tl = simulate(folded_task_graph(sc), sc.cluster);
    EXPECT_EQ(tl.folded_copies, folded) << strategy << slow;
    EXPECT_EQ(predicted_folds(sc), folded) << strategy << slow;
  }
}

// Random layouts of 32 GPUs on 4 servers of 8 (one port a server or one a GPU; one
// fabric switch or a leaf for every two servers; every placement; ring, hierarchical,
// tree or auto all-reduce; pipeline, interleaving, tensor,
// context, expert and expert-tensor degrees): the prediction never counts more copies as
// one than the simulator folds (so it never takes a plan for cheaper to simulate than it
// is), and it counts as many on most layouts. Where it counts fewer the simulator found a
// symmetry of the placement the prediction does not look for (copies that share servers
// under fresh- and scatter-first).
TEST(SimulationWork, NeverCountsMoreCopiesAsOneThanTheSimulationFolds) {
  std::mt19937 rng(5);
  const char* placements[] = {"append-first", "fresh-first", "scatter-first"};
  const char* algos[] = {"ring", "hierarchical", "auto", "tree"};
  const auto cases = static_cast<int>(test::random_cases(100));
  int layouts = 0, same = 0;
  for (int trial = 0; trial < 40 * cases && layouts < cases; ++trial) {
    const int pp = 1 << (rng() % 3), tp = 1 << (rng() % 4), cp = 1 << (rng() % 2);
    const int ep = rng() % 2 ? 1 : 1 << (rng() % 6), etp = rng() % 3 == 0 ? 2 : 1;
    if (32 % (pp * tp * cp) != 0) continue;
    const int dp = 32 / (pp * tp * cp);
    const bool interleaved = pp > 1 && rng() % 2;
    const int nics = rng() % 2 ? 1 : 8;
    const char* algo = algos[rng() % 4];
    const char* placement = placements[rng() % 3];
    const auto zero = rng() % 2;
    const bool leaves = rng() % 4 == 0;
    std::string strategy = fmt::format(
        "schedule: {}, pipeline: {}, tensor: {}, data: {}, context: {}, allreduce: {}, "
        "placement: {}, zero: {}{}",
        interleaved ? "interleaved" : "dapple", pp, tp, dp, cp, algo, placement, zero,
        interleaved ? ", virtual_stages: 2" : "");
    if (tp > 1) strategy += ", sequence_parallel: true";
    const bool moe = ep > 1 || etp > 1;
    if (moe) strategy += fmt::format(", expert: {}, expert_tensor: {}", ep, etp);
    const std::string yaml = fmt::format(R"(
cluster: {{gpu: h100-80gb, nodes: 4, gpus_per_node: 8, intra_node: nvswitch,
          inter_node: {{preset: ib-ndr, nics: {}}}{}}}
model: {{generator: transformer, layers: 8, hidden: 1024, heads: 8, sequence: 1024,
         vocab: 32000{}}}
training: {{global_batch: 64, micro_batch: 1, precision: bf16, optimizer: adam}}
strategy: {{{}}}
)",
                                         nics, leaves ? ", fabric: {nodes_per_leaf: 2}" : "",
                                         moe ? ", experts: 64, top_k: 2, expert_ffn: 512, "
                                               "mlp: swiglu"
                                             : "",
                                         strategy);
    std::optional<Scenario> sc;
    try {
      sc.emplace(load_scenario_text(yaml, "fold.yaml"));
    } catch (const InputError&) {
      continue;  // (a layout the model or the strategy does not allow)
    }
    ++layouts;
    const int simulated = simulate(folded_task_graph(*sc), sc->cluster).folded_copies;
    const int predicted = predicted_folds(*sc);
    EXPECT_LE(predicted, simulated) << strategy << ", nics " << nics;
    same += predicted == simulated;
  }
  EXPECT_EQ(layouts, cases);
  // (A floor, not a derived figure: 73 of these 100 layouts agree, 71 % of 1200 drawn from
  // four seeds; the rest are over-counted, docs/planner.md.)
  EXPECT_GE(same, cases * 2 / 3);
}

TEST(Refine, NeighboursOfAPlan) {
  // Stages 0-2 x1, 3-5 x2, 6-7 x1 in 2 copies, micro-batch 2, global batch 16. One step away:
  //  - a cut one layer earlier or later: (0-1 | 2-5 | 6-7), (0-3 | 4-5 | 6-7),
  //    (0-2 | 3-4 | 5-7), (0-2 | 3-6 | 7): 4;
  //  - the other warm-up: 1;
  //  - ZeRO 1, 2 or 3: 3;
  //  - a replica of stage 1 to stage 0 or to stage 2 (each then has 2 <= 2 samples): 2;
  //  - not 1 copy of 2-4-2 replicas (4 > 2 samples), nor 4 copies (odd replicas): 0;
  //  - stages 0 and 1 merged on 2 replicas (0-5x2 | 6-7x1), or 1 and 2 (0-2x1 | 3-7x2); on
  //    both stages' replicas they would have 3 > 2 samples: 2.
  planner::PlanPoint p;
  p.stages = {{0, 2, 1}, {3, 5, 2}, {6, 7, 1}};
  p.data = 2;
  p.micro_batch = 2;
  const std::vector<planner::PlanPoint> n = planner::neighbours(p, 16);
  ASSERT_EQ(n.size(), 12u);
  std::set<std::string> seen;
  for (const planner::PlanPoint& q : n) {
    EXPECT_LE(q.gpus(), p.gpus());  // the same GPUs, fewer after a merge
    EXPECT_EQ(q.stages.front().first_layer, 0);
    EXPECT_EQ(q.stages.back().last_layer, 7);
    std::string key = fmt::format("{}{}x{}", q.warmup == Warmup::kAuto ? "auto " : "",
                                  q.zero > 0 ? fmt::format("z{} ", q.zero) : "", q.data);
    for (size_t g = 0; g < q.stages.size(); ++g) {
      EXPECT_LE(q.stages[g].first_layer, q.stages[g].last_layer);
      EXPECT_LE(q.stages[g].replicas, q.micro_batch);
      if (g > 0) {
        EXPECT_EQ(q.stages[g].first_layer, q.stages[g - 1].last_layer + 1);
      }
      key += fmt::format(" {}-{}x{}", q.stages[g].first_layer, q.stages[g].last_layer,
                         q.stages[g].replicas);
    }
    seen.insert(key);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"x2 0-1x1 2-5x2 6-7x1", "x2 0-3x1 4-5x2 6-7x1",
                                         "x2 0-2x1 3-4x2 5-7x1", "x2 0-2x1 3-6x2 7-7x1",
                                         "auto x2 0-2x1 3-5x2 6-7x1", "z1 x2 0-2x1 3-5x2 6-7x1",
                                         "z2 x2 0-2x1 3-5x2 6-7x1", "z3 x2 0-2x1 3-5x2 6-7x1",
                                         "x2 0-2x2 3-5x1 6-7x1", "x2 0-2x1 3-5x1 6-7x2",
                                         "x2 0-5x2 6-7x1", "x2 0-2x1 3-7x2"}));
  // One copy of 2-2 replicas trades for two copies of 1-1 and back (16 = 2 x 2 x 4).
  planner::PlanPoint two;
  two.stages = {{0, 3, 2}, {4, 7, 2}};
  two.micro_batch = 2;
  bool found = false;
  for (const planner::PlanPoint& q : planner::neighbours(two, 16))
    found = found || (q.data == 2 && q.stages[0].replicas == 1 && q.stages[1].replicas == 1);
  EXPECT_TRUE(found);
}

// A case's name as a test name.
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.name;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

TEST(Refine, ChunkedPlansMoveAReplicaBetweenPositions) {
  // Interleaved, 2 positions x 2 chunks (stages 0 and 2 on position 0 with 2 replicas, 1 and
  // 3 on position 1 with 1), micro-batch 2, one copy, global batch 8. One step away:
  //  - each of the 3 cuts one layer earlier or later (every stage has 2 layers): 6;
  //  - ZeRO 1, 2 or 3 (position 0 has replicas to shard over): 3;
  //  - a replica from position 0 to position 1, on both of its chunks: 1 (position 1 cannot
  //    give one, it has a single replica);
  //  - 2 copies of 1-... replicas: no (position 1's 1 replica is odd); 1 copy of 4-2: no
  //    (4 > 2 samples): 0;
  //  - no merges (chunked plans keep their stage count): 0.
  planner::PlanPoint p;
  p.schedule = ScheduleKind::kInterleaved;
  p.virtual_stages = 2;
  p.stages = {{0, 1, 2}, {2, 3, 1}, {4, 5, 2}, {6, 7, 1}};
  p.micro_batch = 2;
  const std::vector<planner::PlanPoint> n = planner::neighbours(p, 8);
  EXPECT_EQ(n.size(), 10u);
  int moved = 0;
  for (const planner::PlanPoint& q : n) {
    ASSERT_EQ(q.stages.size(), 4u);
    // Every chunk of a position keeps its position's replicas.
    EXPECT_EQ(q.stages[0].replicas, q.stages[2].replicas);
    EXPECT_EQ(q.stages[1].replicas, q.stages[3].replicas);
    if (q.stages[0].replicas == 1 && q.stages[1].replicas == 2) ++moved;
  }
  EXPECT_EQ(moved, 1);
}

class PlannerVsExhaustive : public ::testing::TestWithParam<Case> {};

TEST_P(PlannerVsExhaustive, BestWithinOnePercent) {
  const Case& c = GetParam();
  int count = 0;
  std::string best_strategy;
  const double best = exhaustive_best(c, &count, &best_strategy);
  ASSERT_GT(best, 0) << "some strategy fits";
  const std::string file = case_file(c, c.name);
  PlanOptions o;
  o.threads = 2;
  const Plan p = plan(file, {}, o);
  ASSERT_FALSE(p.candidates.empty());
  const Candidate& top = p.candidates.front();
  EXPECT_FALSE(top.oom);
  EXPECT_GE(top.throughput, 0.99 * best)
      << c.name << ": planner " << top.strategy.dump() << " vs the best of " << count << ":\n"
      << best_strategy;
}

// Cases whose best plan needs what the enumerator above does not cover, against the
// planner's own --exhaustive (every schedule, placement policy and ZeRO stage):
//  - a placement other than the contiguous one: a parameter-heavy middle stage on 2
//    replicas whose gradient all-reduce (125 M parameters) crosses 10 Gbit/s when placed
//    contiguously, but stays on NVLink when fresh-first gives it a node of its own;
//  - interleaving with uneven replicas per position (3 single-GPU nodes: 1 and 2 GPUs).
std::vector<Case> placed_cases() {
  std::vector<Case> out;
  {
    Case c{"fresh-node", 2, 2, "10 Gbit/s", "v100-16gb", 4, 32, {}};
    c.layers = {{3, 6, 200, 1, "1M"},    {4, 8, 400, 20, "20M"}, {3, 6, 10, 200, "50M"},
                {6, 12, 200, 100, "5M"}, {6, 12, 400, 4, "50M"}, {1, 2, 40, 50, "50M"},
                {1, 2, 400, 50, "50M"},  {1, 2, 400, 50, "5M"}};
    out.push_back(c);
  }
  {
    Case c{"uneven-interleaved", 3, 1, "25 Gbit/s", "v100-16gb", 2, 8, {}};
    c.layers = {{2, 4, 200, 1, "50M"}, {6, 12, 40, 1, "1M"},   {4, 8, 200, 1, "1M"},
                {4, 8, 100, 1, "5M"},  {2, 4, 40, 100, "50M"}, {0.5, 1, 200, 1, "5M"},
                {6, 12, 100, 4, "1M"}, {2, 4, 40, 100, "5M"},  {6, 12, 100, 50, "1M"}};
    out.push_back(c);
  }
  return out;
}

class PlannerVsItsExhaustive : public ::testing::TestWithParam<Case> {};

TEST_P(PlannerVsItsExhaustive, BestWithinOnePercent) {
  const Case& c = GetParam();
  const std::string file = case_file(c, c.name);
  PlanOptions o;
  o.threads = 2;
  const Plan p = plan(file, {}, o);
  o.exhaustive = true;
  const Plan e = plan(file, {}, o);
  ASSERT_FALSE(p.candidates.empty());
  ASSERT_FALSE(e.candidates.empty());
  EXPECT_FALSE(p.candidates.front().oom);
  EXPECT_GE(p.candidates.front().throughput, 0.99 * e.candidates.front().throughput)
      << c.name << ": planner " << p.candidates.front().strategy.dump() << " vs the best of "
      << e.simulated << ": " << e.candidates.front().strategy.dump();
}

INSTANTIATE_TEST_SUITE_P(Cases, PlannerVsItsExhaustive, ::testing::ValuesIn(placed_cases()),
                         case_name);

// Cases whose `plan --exhaustive` takes too long for a test (6e4 and 1e3 simulations), with
// the best strategy it found. Both need an uneven interleaved cut that the least-block cut
// of each replica vector is not:
//  - 3 x 2 GPUs, 25 Gbit/s: interleaved 1-2 replicas x 2 copies placed scatter-first (both
//    copies of the parameter-heavy position 0 on one node's NVLink), cuts that keep the
//    50 MiB outputs of layers 0, 2, 3 and 6 inside stages; the estimate needs each chunk's
//    all-reduce on its own (position 1's 20M-parameter last layer is all-reduced while the
//    pipeline drains);
//  - 2 x 1 GPUs, 1 Gbit/s: interleaved 1-1 with cuts after layers 3, 6 and 8, whose
//    transfers are 1 MiB each.
struct KnownBest {
  Case c;
  std::string strategy;
};

class PlannerVsKnownBest : public ::testing::TestWithParam<KnownBest> {};

TEST_P(PlannerVsKnownBest, BestWithinOnePercent) {
  const KnownBest& k = GetParam();
  const double best = test::run_yaml(scenario_yaml(k.c, k.strategy)).report.throughput;
  PlanOptions o;
  o.threads = 2;
  const Plan p = plan(case_file(k.c, k.c.name), {}, o);
  ASSERT_FALSE(p.candidates.empty());
  EXPECT_FALSE(p.candidates.front().oom);
  EXPECT_GE(p.candidates.front().throughput, 0.99 * best)
      << k.c.name << ": planner " << p.candidates.front().strategy.dump() << " vs " << k.strategy;
}

std::vector<KnownBest> known_best() {
  std::vector<KnownBest> out;
  {
    Case c{"interleaved-scatter", 3, 2, "25 Gbit/s", "v100-16gb", 2, 8, {}};
    c.layers = {{1, 2, 400, 50, "20M"},  {2, 4, 40, 1, "1M"},  {1, 2, 10, 50, "100K"},
                {4, 8, 200, 50, "100K"}, {4, 8, 100, 1, "5M"}, {2, 4, 10, 200, "50M"},
                {1, 2, 400, 50, "1M"},   {2, 4, 10, 1, "1M"},  {0.5, 1, 10, 4, "20M"}};
    out.push_back({c,
                   "  schedule: interleaved\n  virtual_stages: 2\n  data: 2\n"
                   "  placement: scatter-first\n  stages:\n"
                   "    - {layers: 0-1, replicas: 1}\n    - {layers: 2-4, replicas: 2}\n"
                   "    - {layers: 5-7, replicas: 1}\n    - {layers: 8, replicas: 2}\n"});
  }
  {
    Case c{"interleaved-slow-link", 2, 1, "1 Gbit/s", "v100-16gb", 2, 16, {}};
    c.layers = {{6, 12, 400, 1, "20M"}, {3, 6, 200, 100, "5M"}, {1, 2, 400, 20, "1M"},
                {4, 8, 10, 1, "5M"},    {6, 12, 10, 20, "5M"},  {0.5, 1, 10, 4, "100K"},
                {4, 8, 400, 1, "5M"},   {2, 4, 10, 200, "50M"}, {6, 12, 400, 1, "5M"},
                {4, 8, 40, 200, "20M"}, {0.5, 1, 10, 50, "5M"}};
    out.push_back({c,
                   "  schedule: interleaved\n  virtual_stages: 2\n  stages:\n"
                   "    - {layers: 0-3, replicas: 1}\n    - {layers: 4-6, replicas: 1}\n"
                   "    - {layers: 7-8, replicas: 1}\n    - {layers: 9-10, replicas: 1}\n"});
  }
  return out;
}

std::string known_name(const ::testing::TestParamInfo<KnownBest>& info) {
  std::string n = info.param.c.name;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

INSTANTIATE_TEST_SUITE_P(Cases, PlannerVsKnownBest, ::testing::ValuesIn(known_best()), known_name);

INSTANTIATE_TEST_SUITE_P(Cases, PlannerVsExhaustive, ::testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace pipesim
