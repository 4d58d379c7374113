// strategy.zero (SPEC section 3.1): DeepSpeed ZeRO stages 1-3 in memory (Rajbhandari et al.
// 2020, arXiv 1910.02054, Fig. 1) and in communication (reduce-scatter of gradients,
// all-gather of weights) as transfers on the data-parallel group's links.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "schedules/collective_estimates.h"
#include "tests/support.h"

namespace pipesim {
namespace {

// Psi = 12M parameters in 4 layers of 3M, one stage, N_d = 4 data-parallel copies on one
// NVSwitch node (300 GB/s, 2 us), mixed-precision Adam: 2 + 2 + K bytes per parameter
// with K = 12. One micro-batch per copy; a stage's F = 4 x 1 ms, B = 4 x 2 ms; no
// optimizer time.
std::string zero(int stage, int iterations = 1, int global_batch = 4,
                 const std::string& extra = "") {
  return fmt::format(
      R"(cluster: {{gpu: a100-80gb, nodes: 1, gpus_per_node: 4, intra_node: nvswitch2}}
model:
  layers:
    - {{name: l, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MiB, params: 3M,
       repeat: 4}}
training: {{global_batch: {}, micro_batch: 1, precision: mixed, optimizer: adam, iterations: {}}}
strategy: {{schedule: dapple, pipeline: 1, data: 4, allreduce: ring, zero: {}{}}}
)",
      global_batch, iterations, stage, extra);
}

constexpr int64_t kPsi = 12'000'000;
constexpr int64_t kNd = 4;

int64_t static_bytes(const test::SimRun& r, int device, MemCategory c) {
  return r.graph.static_memory(device)[static_cast<size_t>(c)];
}

// Bytes all transfers of a kind move, summed over the run.
std::map<CommKind, int64_t> bytes_by_kind(const test::SimRun& r) {
  std::map<CommKind, int64_t> out;
  for (const Op& op : r.graph.ops()) {
    if (op.kind == OpKind::kTransfer) out[op.comm] += op.bytes;
  }
  return out;
}

TEST(Zero, BytesPerParameterAsInTheZeroPaper) {
  // Fig. 1: stage 0 (2 + 2 + K) Psi; stage 1 2 Psi + 2 Psi + K Psi / N_d; stage 2
  // 2 Psi + (2 + K) Psi / N_d; stage 3 (2 + 2 + K) Psi / N_d, plus (stage 3) the gathering
  // buffer of the two largest layers' 16-bit weights, 2 x 3M x 2 bytes.
  const int64_t K = 12;
  struct Want {
    int64_t weights, gradients, optimizer;
  };
  const Want want[] = {{2 * kPsi, 2 * kPsi, K * kPsi},
                       {2 * kPsi, 2 * kPsi, K * kPsi / kNd},
                       {2 * kPsi, 2 * kPsi / kNd, K * kPsi / kNd},
                       {2 * kPsi / kNd + 2 * 3'000'000 * 2, 2 * kPsi / kNd, K * kPsi / kNd}};
  for (int stage = 0; stage <= 3; ++stage) {
    const test::SimRun r = test::run_yaml(zero(stage));
    for (int d = 0; d < 4; ++d) {
      EXPECT_EQ(static_bytes(r, d, MemCategory::kWeights), want[stage].weights) << stage;
      EXPECT_EQ(static_bytes(r, d, MemCategory::kGradients), want[stage].gradients) << stage;
      EXPECT_EQ(static_bytes(r, d, MemCategory::kOptimizer), want[stage].optimizer) << stage;
    }
    EXPECT_EQ(r.report.info.zero, stage);
  }
}

TEST(Zero, Fp8GathersTheSixteenBitWeights) {
  // Under fp8 each rank keeps its 16-bit weights and an fp8 copy (3 bytes a parameter,
  // SPEC section 9), but the all-gather after the step moves the 16-bit weights only: the
  // fp8 copy is cast from them on every rank. ZeRO-1 and ZeRO-3 gather 2 Psi bytes as under
  // mixed precision: (N_d - 1) chunks of 2 Psi / N_d from each of the N_d ranks per gather.
  for (const int stage : {1, 3}) {
    std::string fp8 = zero(stage);
    fp8.replace(fp8.find("a100-80gb"), 9, "h100-80gb");
    fp8.replace(fp8.find("precision: mixed"), 16, "precision: fp8");
    const test::SimRun r = test::run_yaml(fp8);
    const test::SimRun mixed = test::run_yaml(zero(stage));
    EXPECT_EQ(bytes_by_kind(r).at(CommKind::kAllGather),
              bytes_by_kind(mixed).at(CommKind::kAllGather))
        << stage;
    if (stage == 1) {
      EXPECT_EQ(bytes_by_kind(r).at(CommKind::kAllGather), (kNd - 1) * kNd * (2 * kPsi / kNd));
      EXPECT_EQ(static_bytes(r, 0, MemCategory::kWeights), 3 * kPsi);
    }
  }
}

TEST(Zero, Fp8ParametersAreAllThereIsAndWhatIsGathered) {
  // training.fp8_params (Megatron-Core's --fp8-param-gather): each rank keeps the fp8
  // weights alone, 1 byte a parameter (3 without), and the all-gathers move them: half the
  // 16-bit gathers' bytes, (N_d - 1) chunks of Psi / N_d from each of the N_d ranks under
  // ZeRO-1; ZeRO-3 shards the 1 byte, plus its buffer of the two largest layers' fp8 weights.
  for (const int stage : {1, 3}) {
    std::string fp8 = zero(stage);
    fp8.replace(fp8.find("a100-80gb"), 9, "h100-80gb");
    fp8.replace(fp8.find("precision: mixed"), 16, "precision: fp8, fp8_params: true");
    const test::SimRun r = test::run_yaml(fp8);
    const test::SimRun mixed = test::run_yaml(zero(stage));
    EXPECT_EQ(2 * bytes_by_kind(r).at(CommKind::kAllGather),
              bytes_by_kind(mixed).at(CommKind::kAllGather))
        << stage;
    EXPECT_EQ(static_bytes(r, 0, MemCategory::kWeights),
              stage == 1 ? kPsi : kPsi / kNd + 2 * 3'000'000)
        << stage;
    EXPECT_EQ(static_bytes(r, 0, MemCategory::kGradients),
              static_bytes(mixed, 0, MemCategory::kGradients));
    EXPECT_EQ(static_bytes(r, 0, MemCategory::kOptimizer),
              static_bytes(mixed, 0, MemCategory::kOptimizer));
  }
  // Only under fp8: the weights' own copy is what is kept.
  const test::CliResult bad =
      test::cli({"run", test::write_temp("fp8-params.yaml", [] {
                   std::string s = zero(1);
                   s.replace(s.find("precision: mixed"), 16, "precision: mixed, fp8_params: true");
                   return s;
                 }())});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("training.fp8_params"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("precision: fp8"), std::string::npos) << bad.err;
}

TEST(Zero, CommunicationVolume) {
  // A ring all-reduce of 2 Psi bytes sends 2 (N_d - 1) chunks of 2 Psi / N_d from each
  // rank. Stages 1 and 2: a reduce-scatter and an all-gather, (N_d - 1) chunks each: the
  // same volume. Stage 3 (one micro-batch): the reduce-scatter and two all-gathers (before
  // F and before B), 1.5 x the all-reduce's volume (the paper's section 7.2.2).
  const int64_t all_reduce = 2 * (kNd - 1) * kNd * (2 * kPsi / kNd);
  const auto plain = bytes_by_kind(test::run_yaml(zero(0)));
  EXPECT_EQ(plain.at(CommKind::kAllReduce), all_reduce);
  for (int stage : {1, 2}) {
    auto z = bytes_by_kind(test::run_yaml(zero(stage)));
    EXPECT_EQ(z[CommKind::kAllReduce], 0);
    EXPECT_EQ(z[CommKind::kReduceScatter], all_reduce / 2);
    EXPECT_EQ(z[CommKind::kAllGather], all_reduce / 2);
  }
  auto z3 = bytes_by_kind(test::run_yaml(zero(3)));
  EXPECT_EQ(z3[CommKind::kAllReduce], 0);
  EXPECT_EQ(z3[CommKind::kReduceScatter], all_reduce / 2);
  EXPECT_EQ(z3[CommKind::kAllGather], all_reduce);
}

// One ring pass (reduce-scatter or all-gather) of 2 Psi bytes among the 4 GPUs on idle
// NVSwitch ports: 3 steps of (2 us + 6 MB / 300 GB/s) = 3 x 22 us.
Time ring_pass(const test::SimRun& r) {
  const Time by_hand = (Time::us(2) + Time::us(20)) * 3;
  EXPECT_EQ(ring_pass_estimate(link_costs(r.scenario.cluster), {0, 1, 2, 3}, 2 * kPsi), by_hand);
  return by_hand;
}

Time start_of(const test::SimRun& r, int device, OpKind kind, int micro_batch) {
  for (OpId id : r.graph.stream(device)) {
    const Op& op = r.graph.op(id);
    if (op.kind == kind && op.micro_batch == micro_batch && op.part == 0)
      return r.timeline.start[id];
  }
  ADD_FAILURE() << "no such op";
  return Time::zero();
}

TEST(Zero, StageOneTimelineByHand) {
  // F 0-4 ms, B 4-12 ms, the gradients' reduce-scatter T, the optimizer step (no time), the
  // weights' all-gather T; the next iteration's F waits for it: it starts at 12 ms + 2T.
  const test::SimRun r = test::run_yaml(zero(1, 2));
  const Time T = ring_pass(r);
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(start_of(r, d, OpKind::kOptimizer, -1), Time::ms(12) + T);
    EXPECT_EQ(start_of(r, d, OpKind::kForward, 1), Time::ms(12) + T * 2);
  }
}

TEST(Zero, ShardedGradientsAreReducedEveryMicroBatch) {
  // Global batch 8 on 4 copies: 2 micro-batches each. ZeRO-1 keeps whole gradients and
  // reduce-scatters them once, after the second backward; ZeRO-2 and 3 keep only their
  // shard, so each micro-batch's gradients are reduce-scattered as its backward produces
  // them (DeepSpeed, PyTorch FSDP): twice the volume, the first beside the second
  // micro-batch's work. ZeRO-1's all-gather and ZeRO-2's are the same single one.
  const auto one = bytes_by_kind(test::run_yaml(zero(1, 1, 8)));
  const auto two = bytes_by_kind(test::run_yaml(zero(2, 1, 8)));
  const auto three = bytes_by_kind(test::run_yaml(zero(3, 1, 8)));
  EXPECT_EQ(two.at(CommKind::kReduceScatter), 2 * one.at(CommKind::kReduceScatter));
  EXPECT_EQ(three.at(CommKind::kReduceScatter), 2 * one.at(CommKind::kReduceScatter));
  EXPECT_EQ(two.at(CommKind::kAllGather), one.at(CommKind::kAllGather));
  // ZeRO-2's first reduce-scatter ends before the second micro-batch's backward does: the
  // optimizer step waits only for the second one, T after the last backward ends (12 ms
  // of F and B per micro-batch, in order F0 F1 B0 B1 or F0 B0 F1 B1: the last B ends at
  // 24 ms).
  const test::SimRun r = test::run_yaml(zero(2, 1, 8));
  EXPECT_EQ(start_of(r, 0, OpKind::kOptimizer, -1), Time::ms(24) + ring_pass(r));
}

TEST(Zero, PlanKeepsOverlapParamGatherWhereItApplies) {
  // The planner's candidates carry the scenario's overlap_param_gather only where their
  // ZeRO stage gathers after the step (1 or 2); the rest would be refused by the loader.
  const auto r = test::cli(
      {"plan", test::write_temp("opg-plan.yaml",
                                "cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 4, "
                                "intra_node: nvswitch2}\n"
                                "model: {generator: transformer, layers: 4, hidden: 512, "
                                "heads: 8, sequence: 256, vocab: 1000}\n"
                                "training: {global_batch: 16, micro_batch: 2, precision: mixed, "
                                "optimizer: adam}\n"
                                "strategy: {schedule: dapple, pipeline: 1, data: 4, zero: 1, "
                                "overlap_param_gather: true}\n")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("refused"), std::string::npos) << r.err;
}

TEST(Zero, TensorOverlapStillWorksUnderZeroTwo) {
  // The backward's tensor overlap (W inside B, its all-reduces beside the dW GEMMs) takes
  // effect under ZeRO-2 as under ZeRO-1: the iteration is shorter with it.
  const auto run = [](int zero, const char* overlap) {
    return test::run_yaml(fmt::format(
        R"(cluster: {{gpu: a100-80gb, nodes: 1, gpus_per_node: 8, intra_node: nvswitch2}}
model: {{generator: transformer, layers: 2, hidden: 1024, heads: 8, sequence: 512, vocab: 1000}}
training: {{global_batch: 16, micro_batch: 2, precision: mixed, optimizer: adam}}
strategy: {{schedule: dapple, pipeline: 1, tensor: 2, data: 4, zero: {}, tensor_overlap: {}}}
)",
        zero, overlap));
  };
  for (const int zero : {1, 2}) {
    EXPECT_LT(run(zero, "backward").report.makespan, run(zero, "none").report.makespan) << zero;
  }
}

TEST(Zero, OverlappedParamGatherRunsBesideTheFirstForward) {
  // overlap_param_gather (Megatron-Core's --overlap-param-gather): each iteration's
  // all-gather of the weights the previous step updated runs beside that iteration's first
  // forward; the second compute op waits for it. Two iterations of one micro-batch per copy
  // (global batch 4): iteration 0's gather starts at 0 beside F (0-4 ms), T < 4 ms, so B
  // starts at 4 ms; iteration 1's F starts right after the optimizer step at 12 ms + T (not
  // 12 ms + 2T as without the overlap) and its gather runs beside it. No gather follows the
  // last step.
  const test::SimRun r = test::run_yaml(zero(1, 2, 4, ", overlap_param_gather: true"));
  const Time T = ring_pass(r);
  ASSERT_LT(T, Time::ms(4));
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(start_of(r, d, OpKind::kBackward, 0), Time::ms(4));
    EXPECT_EQ(start_of(r, d, OpKind::kOptimizer, -1), Time::ms(12) + T);
    EXPECT_EQ(start_of(r, d, OpKind::kForward, 1), Time::ms(12) + T);
  }
  // Makespan: iteration 1 ends with its reduce-scatter and step at 2 x (12 ms + T).
  EXPECT_EQ(r.report.makespan, (Time::ms(12) + T) * 2);
  // The same bytes move as without the overlap: one gather per iteration.
  const auto plain = bytes_by_kind(test::run_yaml(zero(1, 2)));
  EXPECT_EQ(bytes_by_kind(r), plain);
  // Without data-parallel ranks it has nothing to gather: a warning, not silence.
  const auto alone = test::cli(
      {"run", test::write_temp("opg-alone.yaml",
                               "cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 1}\n"
                               "model: {generator: transformer, layers: 2, hidden: 256, heads: 4, "
                               "sequence: 128, vocab: 1000}\n"
                               "training: {global_batch: 1, micro_batch: 1, precision: mixed}\n"
                               "strategy: {schedule: dapple, pipeline: 1, zero: 1, "
                               "overlap_param_gather: true}\n")});
  EXPECT_EQ(alone.code, 0) << alone.err;
  EXPECT_NE(alone.err.find("warning: strategy.overlap_param_gather: no effect"), std::string::npos)
      << alone.err;
  // Only ZeRO-1 and ZeRO-2 gather after the step.
  const auto bad = test::cli({"run", test::write_temp("opg.yaml", zero(3, 1, 4,
                                                                     ", overlap_param_gather: true"))});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("strategy.overlap_param_gather"), std::string::npos) << bad.err;
}

TEST(Zero, OverlappedParamGatherGoesChunkByChunk) {
  // Under an interleaved schedule each chunk's weights are gathered apart, in chunk order on
  // the device's one communication stream, and each gates only its own chunk's second
  // compute op (Megatron-Core gathers a model chunk ahead of that chunk's forward). Two
  // positions of two one-layer chunks, two copies, one 2 GB layer (1 G parameters, 16-bit)
  // a chunk: each chunk's gather moves 1 GB to the other copy's device, 10 ms on a 100 GB/s
  // link, longer than a chunk's two 1 ms forwards. So position 0's second forward of chunk
  // 0 starts once chunk 0's gather is done, before chunk 1's is (it once waited for the
  // whole position's weights), and chunk 1's second op waits for chunk 1's gather.
  const test::SimRun r = test::run_yaml(R"(
cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 4,
          intra_node: {kind: nvswitch, bandwidth: 100 GB/s, latency: 0 us}}
model:
  layers:
    - {name: l, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MiB, params: 1000M,
       repeat: 4}
training: {global_batch: 8, micro_batch: 1, precision: mixed, optimizer: adam, iterations: 2}
strategy: {schedule: interleaved, pipeline: 2, virtual_stages: 2, data: 2, zero: 1,
           overlap_param_gather: true}
)");
  // Iteration 1's gathers and compute ops on device 0 (position 0: global stages 0 and 2).
  const int d = 0;
  std::map<int, Time> gather_start, gather_end;
  std::map<int, std::vector<Time>> starts;  // [chunk] its compute ops' starts, in order
  std::map<int, int64_t> gathered;
  for (OpId id = 0; id < static_cast<OpId>(r.graph.size()); ++id) {
    const Op& op = r.graph.op(id);
    if (op.kind == OpKind::kTransfer && op.comm == CommKind::kAllGather && op.iteration == 1 &&
        (op.device == d || op.peer == d)) {
      if (!gather_start.count(op.stage) || r.timeline.start[id] < gather_start[op.stage])
        gather_start[op.stage] = r.timeline.start[id];
      gather_end[op.stage] = std::max(gather_end[op.stage], r.timeline.end[id]);
      if (op.device == d) gathered[op.stage] += op.bytes;
    }
  }
  for (OpId id : r.graph.stream(d)) {
    const Op& op = r.graph.op(id);
    if (op.kind != OpKind::kTransfer && op.iteration == 1 && op.kind != OpKind::kOptimizer &&
        op.part == 0)
      starts[op.stage].push_back(r.timeline.start[id]);
  }
  ASSERT_EQ(gathered.size(), 2u);
  EXPECT_EQ(gathered[0], 1'000'000'000);  // 2 GB on 2 ranks: each sends its half
  EXPECT_EQ(gathered[2], 1'000'000'000);
  EXPECT_GE(gather_start[2], gather_end[0]);
  ASSERT_GE(starts[0].size(), 2u);
  ASSERT_GE(starts[2].size(), 2u);
  EXPECT_GE(starts[0][1], gather_end[0]);
  EXPECT_LT(starts[0][1], gather_end[2]);
  EXPECT_GE(starts[2][1], gather_end[2]);
}

TEST(Zero, StageThreeGathersOneLayerAheadByHand) {
  // DeepSpeed gathers layer by layer, prefetching one layer ahead. One layer's weights
  // (2 x 3M bytes) on the ring of 4: 3 steps of (2 us + 1.5 MB / 300 GB/s) = 3 x 7 us = t.
  // F0's first layer waits for its gather (t); every later layer's gather runs while the
  // layer before computes (on the device's one communication stream, behind 1-2 ms
  // layers), so F0 runs t to t + 4 ms and B0 at once after it, to t + 12 ms. The gradients'
  // reduce-scatter (one bucket of all 4 layers, a ring pass of 2 Psi bytes: T) follows; the
  // optimizer starts at t + 12 ms + T.
  const test::SimRun r = test::run_yaml(zero(3));
  const Time T = ring_pass(r);
  const Time t = (Time::us(2) + Time::us(5)) * 3;
  EXPECT_EQ(ring_pass_estimate(link_costs(r.scenario.cluster), {0, 1, 2, 3}, 2 * kPsi / 4), t);
  EXPECT_EQ(start_of(r, 0, OpKind::kForward, 0), t);
  EXPECT_EQ(start_of(r, 0, OpKind::kBackward, 0), t + Time::ms(4));
  EXPECT_EQ(start_of(r, 0, OpKind::kOptimizer, -1), t + T + Time::ms(12));
  // One gather per layer before each F and B: 2 x 4 gathers of 3 steps x 4 members.
  int gathers = 0;
  for (const Op& op : r.graph.ops()) gathers += op.comm == CommKind::kAllGather;
  EXPECT_EQ(gathers, 2 * 4 * 3 * 4);
  // Two micro-batches (F0 B0 F1 B1): every layer but the first waits for nothing: the
  // optimizer starts at t + 24 ms + T.
  const test::SimRun two = test::run_yaml(zero(3, 1, 8));
  EXPECT_EQ(start_of(two, 0, OpKind::kOptimizer, -1), t + T + Time::ms(24));
}

TEST(Zero, NothingToShardAndValidation) {
  // One copy, one replica: accepted, nothing changes, the summary says so.
  std::string y = zero(2);
  y.replace(y.find("data: 4"), 7, "data: 1");
  const test::SimRun one = test::run_yaml(y);
  EXPECT_FALSE(one.report.info.zero_applies);
  EXPECT_EQ(static_bytes(one, 0, MemCategory::kOptimizer), 12 * kPsi);
  EXPECT_NE(summary_table(one.report).find("ZeRO-2 (no effect: no data-parallel ranks)"),
            std::string::npos);
  const test::SimRun four = test::run_yaml(zero(2));
  EXPECT_NE(summary_table(four.report).find("TP 1 x PP 1 x DP 4 = 4 GPUs, ZeRO-2"),
            std::string::npos)
      << summary_table(four.report);

  for (const auto& [text, what] : std::vector<std::pair<std::string, std::string>>{
           {"zero: 4", "strategy.zero"},
           {"zero: 1", "strategy.zero: pipedream keeps whole weight"}}) {
    std::string bad = zero(0);
    if (text == "zero: 1") bad.replace(bad.find("schedule: dapple"), 16, "schedule: pipedream");
    bad.replace(bad.find("zero: 0"), 7, text);
    const auto r = test::cli({"run", test::write_temp("zero-bad.yaml", bad)});
    EXPECT_EQ(r.code, 2) << text;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace pipesim
