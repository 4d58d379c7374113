// Megatron-Core's recompute options beyond none | full | selective: the modules a selective
// recompute re-runs (strategy.recompute_modules) and the layers of each stage a full one
// checkpoints (strategy.recompute_layers, its block method); and PyTorch's per-op policy as
// one more module (alternate_gemms). Bytes hand-worked from costs/models.cc's activation
// accounting (docs/models.md).
#include <gtest/gtest.h>

#include <algorithm>

#include "costs/models.h"
#include "schedules/lower.h"
#include "tests/support.h"
#include "topology/presets.h"

namespace pipesim {
namespace {

// s = 1024, b = 2 (S = 2048 tokens), h = 512, 8 heads, bf16 (e = 2), flash attention.
constexpr int64_t kTokens = 2048;

TransformerShape dense_shape() {
  TransformerShape t;
  t.layers = 4;
  t.hidden = 512;
  t.heads = 8;
  t.ffn = 1536;
  t.sequence = 1024;
  t.vocab = 1000;
  t.mlp = TransformerShape::Mlp::kSwiglu;
  t.norm = TransformerShape::Norm::kRmsNorm;
  t.position = TransformerShape::Position::kRotary;
  t.flash_attention = true;
  return t;
}

// The same with latent attention and MoE layers: 8 experts of 256, top 2, one shared.
TransformerShape moe_latent_shape() {
  TransformerShape t = dense_shape();
  t.latent = TransformerShape::Latent{128, 192, 32, 64};  // kv_rank, q_rank, rope, head
  t.experts = 8;
  t.top_k = 2;
  t.expert_ffn = 256;
  t.shared_experts = 1;
  return t;
}

Model model_of(const TransformerShape& t, Precision p = Precision::kMixed) {
  Training tr;
  tr.micro_batch = 2;
  tr.precision = p;
  return transformer_model(t, tr, *find_gpu_preset("h100-80gb"));
}

const RecomputePart* part_of(const Layer& l, RecomputeModule m) {
  const auto it = std::find_if(l.recompute_parts.begin(), l.recompute_parts.end(),
                               [m](const RecomputePart& p) { return p.module == m; });
  return it == l.recompute_parts.end() ? nullptr : &*it;
}

Time forward_of(const Layer& l, const std::vector<std::string>& names) {
  Time t;
  for (const OpCost& op : l.ops)
    if (std::find(names.begin(), names.end(), op.name) != names.end()) t += op.forward;
  return t;
}

// The bytes the scenario's collectives of `kind` move, over its task graph.
int64_t moved(const std::string& yaml, CommKind kind) {
  const test::SimRun r = test::run_yaml(yaml);
  int64_t sum = 0;
  for (const Op& op : r.graph.ops())
    if (op.kind == OpKind::kTransfer && op.comm == kind) sum += op.bytes;
  return sum;
}

// A selective recompute on two GPUs between none and full: slower than none, faster than
// full, holding less than none and more than full on each GPU, and saying nothing.
void expect_between(const test::SimRun& none, const test::SimRun& mid, const test::SimRun& full) {
  EXPECT_LT(none.report.makespan, mid.report.makespan);
  EXPECT_LT(mid.report.makespan, full.report.makespan);
  for (int d = 0; d < 2; ++d) {
    EXPECT_LT(test::peak_activation_bytes(mid, d), test::peak_activation_bytes(none, d));
    EXPECT_LT(test::peak_activation_bytes(full, d), test::peak_activation_bytes(mid, d));
  }
  EXPECT_TRUE(mid.report.info.warnings.empty());
}

TEST(RecomputeModules, DenseLayerParts) {
  const Model m = model_of(dense_shape());
  const Layer& l = m.layers[1];
  // The attention core under flash attention: the kernel again, nothing freed.
  const RecomputePart* core = part_of(l, RecomputeModule::kCoreAttn);
  ASSERT_NE(core, nullptr);
  EXPECT_EQ(core->cost.bytes, 0);
  EXPECT_EQ(core->cost.forward, forward_of(l, {"flash_attention"}));
  EXPECT_GT(core->cost.forward, Time::zero());
  // The MLP, checkpointed from the residual stream (its norm fused into fc1 as Transformer
  // Engine's LayerNormLinear runs it), frees the norm's output fc1 keeps (h elements a
  // token, whole on every tensor rank), fc1's 2f-wide output and the SwiGLU product (3f):
  // 2 x 2048 x 512 + 6 x 2048 x 1536 bytes.
  const RecomputePart* mlp = part_of(l, RecomputeModule::kMlp);
  ASSERT_NE(mlp, nullptr);
  EXPECT_EQ(mlp->cost.bytes, 2 * kTokens * 512 + 6 * kTokens * 1536);
  EXPECT_EQ(mlp->cost.replicated_bytes, 2 * kTokens * 512);
  EXPECT_EQ(mlp->cost.forward, forward_of(l, {"ln2", "fc1", "swiglu", "fc2"}));
  EXPECT_EQ(mlp->whole_forward, forward_of(l, {"ln2"}));
  // Its FLOPs: the two GEMMs, 2 S h (2f) + 2 S f h.
  EXPECT_DOUBLE_EQ(mlp->cost.flops, 6.0 * kTokens * 512 * 1536);
  // Transformer Engine fuses both norms into the GEMMs after them: nothing to re-run.
  const RecomputePart* norms = part_of(l, RecomputeModule::kLayernorm);
  ASSERT_NE(norms, nullptr);
  EXPECT_EQ(norms->cost.bytes, 0);
  EXPECT_EQ(norms->cost.forward, Time::zero());
  EXPECT_EQ(part_of(l, RecomputeModule::kMoeAct), nullptr);
  EXPECT_EQ(part_of(l, RecomputeModule::kMlaUpProj), nullptr);
  // Under fp8, fc1 keeps the norm's output and fc2 the product as fp8 copies (1 byte an
  // element): S h + 5 x S f bytes freed.
  const Model m8 = model_of(dense_shape(), Precision::kFp8);
  const Layer& f8 = m8.layers[1];
  EXPECT_EQ(part_of(f8, RecomputeModule::kMlp)->cost.bytes, kTokens * 512 + 5 * kTokens * 1536);
  EXPECT_EQ(part_of(f8, RecomputeModule::kMlp)->cost.forward,
            forward_of(f8, {"ln2", "cast_fc1", "fc1", "swiglu", "cast_fc2", "fc2"}));
}

TEST(RecomputeModules, MoeAndLatentLayerParts) {
  const Model m = model_of(moe_latent_shape());
  const Layer& l = m.layers[1];
  ASSERT_TRUE(l.moe.has_value());
  EXPECT_EQ(part_of(l, RecomputeModule::kMlp), nullptr);  // a MoE layer has no dense MLP
  // Nor PyTorch's per-op policy, which pipesim models on dense layers.
  EXPECT_EQ(part_of(l, RecomputeModule::kAlternateGemms), nullptr);
  // The routed experts' SwiGLU output (fc2's input) for k S = 4096 routed copies of 256.
  EXPECT_EQ(part_of(l, RecomputeModule::kMoeAct)->cost.bytes, 2 * kTokens * 256 * 2);
  EXPECT_EQ(part_of(l, RecomputeModule::kMoeAct)->cost.forward, forward_of(l, {"expert_swiglu"}));
  // The shared expert's fc1 output (2 x 256) and product (256): 3 x 256 x 2 bytes a token.
  EXPECT_EQ(part_of(l, RecomputeModule::kSharedExperts)->cost.bytes, 6 * kTokens * 256);
  // Latent attention's up-projections: queries and keys of 64 + 32, values of 64, for 8
  // heads (8 x (3 x 64 + 2 x 32) = 2048), and the normed bottlenecks (192 + 128): 2368
  // elements a token.
  const RecomputePart* up = part_of(l, RecomputeModule::kMlaUpProj);
  EXPECT_EQ(up->cost.bytes, 2368 * kTokens * 2);
  EXPECT_EQ(up->cost.forward, forward_of(l, {"q_norm", "q_up", "kv_norm", "kv_up", "rotary"}));
  // The two norms TE does not fuse: latent attention's first and the MoE layer's second,
  // S h each, whole on every tensor rank.
  const RecomputePart* norms = part_of(l, RecomputeModule::kLayernorm);
  EXPECT_EQ(norms->cost.bytes, 2 * kTokens * 512 * 2);
  EXPECT_EQ(norms->cost.replicated_bytes, norms->cost.bytes);
  EXPECT_EQ(norms->cost.forward, forward_of(l, {"ln1", "ln2"}));
  // The whole MoE block (`moe`): the router's fp32 probabilities (2 x S E halves), the
  // permuted tokens and the experts' outputs (4 k S h), the experts' fc1 outputs and products
  // (6 k S F) and the shared expert's (6 S F_s), in halves of e = 2 bytes: 32768 + 8388608 +
  // 6291456 + 3145728 bytes. It re-runs every op of the block (not its norm, not the
  // residual add), the experts' activation and the shared expert with it.
  const RecomputePart* block = part_of(l, RecomputeModule::kMoe);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(block->cost.bytes, 17858560);
  EXPECT_EQ(block->cost.forward, forward_of(l, {"router", "router_topk", "permute", "expert_fc1",
                                                "expert_swiglu", "expert_fc2", "unpermute",
                                                "shared_fc1", "shared_swiglu", "shared_fc2"}));
  EXPECT_EQ(block->before_dispatch, forward_of(l, {"router", "router_topk", "permute"}));
  EXPECT_EQ(block->before_combine, forward_of(l, {"expert_fc1", "expert_swiglu", "expert_fc2"}));
  const RecomputeModules nested = module_bit(RecomputeModule::kMoe) |
                                  module_bit(RecomputeModule::kMoeAct) |
                                  module_bit(RecomputeModule::kSharedExperts);
  EXPECT_EQ(l.selective(nested).bytes, block->cost.bytes);
  EXPECT_EQ(l.selective(nested).forward, block->cost.forward);
  // Under expert tensor parallelism the tokens gathered for the experts are the block's
  // too: with the block recomputed a stage keeps the same at ETP 2 as at ETP 1.
  const ActivationScope whole_block{module_bit(RecomputeModule::kMoe), 0};
  const auto kept = [&](int etp) {
    GroupDegrees g;
    g.expert = 2;
    g.expert_tensor = etp;
    return stage_profiles(m, {{1, 1, 1}}, {Recompute::kSelective}, {}, false, g, whole_block)[0]
        .kept_bytes;
  };
  EXPECT_EQ(kept(2), kept(1));
  // Under fp8 the shared expert re-runs its casts too.
  const Model m8 = model_of(moe_latent_shape(), Precision::kFp8);
  EXPECT_EQ(part_of(m8.layers[1], RecomputeModule::kSharedExperts)->cost.forward,
            forward_of(m8.layers[1], {"cast_shared_fc1", "shared_fc1", "shared_swiglu",
                                      "cast_shared_fc2", "shared_fc2"}));
  // Layer::selective sums the modules asked for.
  const RecomputeModules both =
      module_bit(RecomputeModule::kMoeAct) | module_bit(RecomputeModule::kMlaUpProj);
  EXPECT_EQ(l.selective(both).bytes, (2 * 256 * 2 + 2368 * 2) * kTokens);
  EXPECT_EQ(l.selective(both).forward,
            part_of(l, RecomputeModule::kMoeAct)->cost.forward + up->cost.forward);
}

TEST(RecomputeModules, StageKeepsAllButWhatTheModulesFree) {
  const Model m = model_of(moe_latent_shape());
  const std::vector<StageSpec> one{{1, 1, 1}};
  const Layer& l = m.layers[1];
  const ActivationScope up{module_bit(RecomputeModule::kMlaUpProj), 0};
  const StageProfile p = stage_profiles(m, one, {Recompute::kSelective}, {}, false, {}, up)[0];
  const int64_t freed = 2368 * kTokens * 2;
  EXPECT_EQ(p.kept_bytes, l.activation_bytes - freed);
  EXPECT_EQ(p.transient_bytes, freed);
  EXPECT_EQ(p.recompute_time, part_of(l, RecomputeModule::kMlaUpProj)->cost.forward);
  EXPECT_FALSE(p.full_recompute);
  EXPECT_EQ(p.replicated_kept, p.replicated_activation);
  // The norms free bytes every tensor rank holds whole (without sequence parallelism).
  const ActivationScope norms{module_bit(RecomputeModule::kLayernorm), 0};
  const StageProfile q = stage_profiles(m, one, {Recompute::kSelective}, {2}, false, {}, norms)[0];
  EXPECT_EQ(q.replicated_kept, q.replicated_activation - 2 * kTokens * 512 * 2);
}

TEST(RecomputeModules, WholeOpsRunOnEveryTensorRank) {
  // Without sequence parallelism each of t = 2 tensor ranks re-runs the MLP's norm whole,
  // as its forward runs it: the stage counts it t times (the lowering divides by t).
  const Model m = model_of(dense_shape());
  const std::vector<StageSpec> one{{1, 1, 1}};
  const ActivationScope mlp{module_bit(RecomputeModule::kMlp), 0};
  const Layer at2 = m.layers[1].at_tensor_degree(2);
  const RecomputePart* part = part_of(at2, RecomputeModule::kMlp);
  ASSERT_NE(part, nullptr);
  const auto recompute = [&](bool sp) {
    return stage_profiles(m, one, {Recompute::kSelective}, {2}, sp, {}, mlp)[0].recompute_time;
  };
  EXPECT_EQ(recompute(true), part->cost.forward);
  EXPECT_EQ(recompute(false), part->cost.forward + part->whole_forward);
}

// Under tensor parallelism a module's re-run issues its collectives again: Megatron-Core's
// `mlp` one all-reduce (fc1's gather and fc2's reduce-scatter under sequence parallelism),
// the per-op policy the gathers of both norms' outputs (all-reduces without sequence
// parallelism), each of the layer's S h e bytes; the attention core none.
TEST(RecomputeModules, ReRunsIssueTheirTensorCollectivesAgain) {
  const Model m = model_of(dense_shape());
  const std::vector<StageSpec> one{{1, 1, 1}};
  using K = TpCollective::Kind;
  const auto rerun = [&](RecomputeModule mod, int t, bool sp) {
    const ActivationScope scope{module_bit(mod), 0};
    const StageProfile p = stage_profiles(m, one, {Recompute::kSelective}, {t}, sp, {}, scope)[0];
    EXPECT_EQ(p.layers.at(0).recompute, p.recompute_time);
    std::vector<K> kinds;
    for (const TpCollective& c : p.layers.at(0).tp_recompute) {
      EXPECT_EQ(c.bytes, kTokens * 512 * 2);
      kinds.push_back(c.kind);
    }
    return kinds;
  };
  EXPECT_EQ(rerun(RecomputeModule::kMlp, 2, false), std::vector<K>{K::kAllReduce});
  EXPECT_EQ(rerun(RecomputeModule::kMlp, 2, true), std::vector<K>{K::kAllReduce});
  EXPECT_EQ(rerun(RecomputeModule::kAlternateGemms, 2, true),
            (std::vector<K>{K::kAllGather, K::kAllGather}));
  EXPECT_EQ(rerun(RecomputeModule::kAlternateGemms, 2, false),
            (std::vector<K>{K::kAllReduce, K::kAllReduce}));
  EXPECT_TRUE(rerun(RecomputeModule::kCoreAttn, 2, true).empty());
  EXPECT_TRUE(rerun(RecomputeModule::kMlp, 1, true).empty());
}

// The same in the task graph, TP 2 with sequence parallelism, 4 layers and 4 micro-batches:
// a full recompute gathers and reduce-scatters both of each layer's activations again, the
// `mlp` module one of each, the per-op policy both gathers and no reduce-scatter; in fp8
// the gathers move fp8 as the forward's do.
TEST(RecomputeModules, ReRunCollectivesInTheGraph) {
  for (const std::string precision : {"bf16", "fp8"}) {
    const auto bytes = [&precision](const std::string& recompute, CommKind kind) {
      return moved(
          "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 2, intra_node: nvswitch3}\n"
          "model: {generator: transformer, layers: 4, hidden: 512, heads: 8, sequence: 1024, "
          "vocab: 1000, mlp: swiglu, norm: rmsnorm, position: rotary, flash_attention: true}\n"
          "training: {global_batch: 8, micro_batch: 2, precision: " +
              precision +
              ", optimizer: adam}\n"
              "strategy: {schedule: 1f1b, pipeline: 1, tensor: 2, sequence_parallel: true, " +
              recompute + "}\n",
          kind);
    };
    for (const CommKind kind : {CommKind::kAllGather, CommKind::kReduceScatter}) {
      const int64_t none = bytes("recompute: none", kind);
      const int64_t full = bytes("recompute: full", kind) - none;
      EXPECT_GT(full, 0);
      EXPECT_EQ(bytes("recompute: selective, recompute_modules: [mlp]", kind) - none, full / 2);
      EXPECT_EQ(bytes("recompute: selective, recompute_modules: [alternate_gemms]", kind) - none,
                kind == CommKind::kAllGather ? full : 0);
      EXPECT_EQ(bytes("recompute: selective", kind), none);  // the attention core: none
    }
  }
}

// `moe` re-runs the MoE block with its token exchanges: on 2 GPUs with EP 2 its all-to-alls
// move again what the forward's moved, as a full recompute's do (the layer's only
// all-to-alls are the block's), and the re-run's time and memory lie between none and full.
TEST(RecomputeModules, MoeBlockExchangesItsTokensAgain) {
  const auto yaml = [](const std::string& recompute) {
    return "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 2, intra_node: nvswitch3}\n"
           "model: {generator: transformer, layers: 4, hidden: 512, heads: 8, sequence: 1024, "
           "vocab: 1000, mlp: swiglu, norm: rmsnorm, position: rotary, flash_attention: true, "
           "experts: 8, top_k: 2, expert_ffn: 256, shared_experts: 1}\n"
           "training: {global_batch: 8, micro_batch: 2, precision: bf16, optimizer: adam}\n"
           "strategy: {schedule: 1f1b, pipeline: 1, data: 2, expert: 2, " +
           recompute + "}\n";
  };
  const std::string block = "recompute: selective, recompute_modules: [moe]";
  const int64_t none = moved(yaml("recompute: none"), CommKind::kAllToAll);
  EXPECT_GT(none, 0);
  EXPECT_EQ(moved(yaml(block), CommKind::kAllToAll) - none,
            moved(yaml("recompute: full"), CommKind::kAllToAll) - none);
  EXPECT_EQ(moved(yaml("recompute: selective, recompute_modules: [moe_act]"), CommKind::kAllToAll),
            none);
  const auto run = [&](const std::string& r) { return test::run_yaml(yaml(r), true); };
  expect_between(run("recompute: none"), run(block), run("recompute: full"));
}

TEST(RecomputeModules, BlockCheckpointsTheFirstLayersOfEachStage) {
  // Four transformer layers (1 to 4) on one stage, recompute_layers 2: layers 1 and 2 keep
  // their inputs and re-run, layers 3 and 4 keep everything (Megatron-Core's block method).
  const Model m = model_of(dense_shape());
  const std::vector<StageSpec> one{{1, 4, 1}};
  const Layer& l = m.layers[1];
  const StageProfile all = stage_profiles(m, one, {Recompute::kFull})[0];
  const StageProfile two = stage_profiles(m, one, {Recompute::kFull}, {}, false, {}, {0, 2})[0];
  const int64_t input = m.layers[0].output_bytes;
  EXPECT_EQ(all.kept_bytes, 4 * input);
  EXPECT_EQ(two.kept_bytes, 2 * input + 2 * l.activation_bytes);
  EXPECT_EQ(all.recompute_time, 4 * l.forward);
  EXPECT_EQ(two.recompute_time, 2 * l.forward);
  ASSERT_EQ(two.layers.size(), 4u);
  EXPECT_TRUE(two.layers[1].recomputed);
  EXPECT_FALSE(two.layers[2].recomputed);
  // The embedding is not a layer to checkpoint: a stage of layers 0 to 2 re-runs 1 and 2.
  EXPECT_EQ(checkpointed_layers(m, 0, 2, 2), (std::vector<char>{0, 1, 1}));
  EXPECT_EQ(checkpointed_layers(m, 0, 4, 1), (std::vector<char>{0, 1, 0, 0, 0}));
}

// PyTorch's per-op selective checkpointing (recompute_modules: [alternate_gemms];
// torchtitan's `op` policy) on the dense shape above: queries 512 wide, keys and values 512
// each (8 heads of 64), SwiGLU of f = 1536, S = 2048 tokens, bf16 (e = 2).
constexpr double kS = kTokens, kH = 512, kQ = 512, kKv = 512, kF = 1536, kE = 2;

const OpCost& op_of(const Layer& l, const std::string& name) {
  const auto it =
      std::find_if(l.ops.begin(), l.ops.end(), [&](const OpCost& op) { return op.name == name; });
  EXPECT_NE(it, l.ops.end()) << name;
  return *it;
}

// Every op of the layer but the attention kernel, whole.
Time all_but_attention(const Layer& l) {
  Time t;
  for (const OpCost& op : l.ops)
    if (op.name != "flash_attention") t += op.forward;
  return t;
}

TEST(OpPolicy, AlternateGemmsReRunTheSecondFourthAndSixth) {
  const Model m = model_of(dense_shape());
  const Layer& l = m.layers[1];
  ASSERT_NE(part_of(l, RecomputeModule::kAlternateGemms), nullptr);
  const RecomputePart& p = *part_of(l, RecomputeModule::kAlternateGemms);
  // Of wq, wk, wv, wo, w1, w3, w2: wk (512 of QKV's 1536 columns), wo, w3 (half of fc1's
  // fused 2f), and every element-wise op; not w2 (fc2) nor the attention kernel.
  const Time expected = all_but_attention(l) - op_of(l, "qkv").forward - op_of(l, "fc1").forward -
                        op_of(l, "fc2").forward +
                        share_of(op_of(l, "qkv").forward, kKv / (kQ + 2 * kKv)) +
                        share_of(op_of(l, "fc1").forward, 0.5);
  EXPECT_EQ(p.cost.forward, expected);
  EXPECT_EQ(std::count(p.ops.begin(), p.ops.end(), "fc2"), 0);
  // 2 S h (512 + 512 + 1536): the keys, the output projection and the up projection.
  EXPECT_DOUBLE_EQ(p.cost.flops, 2 * kS * kH * (kKv + kQ + kF));
  // Kept: the input, the queries, the values, the attention output, w1's output and w2's:
  // S (h + q + kv + q + f + h) e = 2048 x 4096 x 2 bytes.
  const double kept = kS * (kH + kQ + kKv + kQ + kF + kH) * kE;
  EXPECT_EQ(l.activation_bytes - p.cost.bytes, static_cast<int64_t>(kept));
  EXPECT_GT(p.cost.bytes, 0);
  // Without sequence parallelism each tensor rank holds Korthikanti's 5 S h e whole (norm
  // inputs and outputs, dropout masks); all is freed but the layer's input S h e and the
  // down projection's saved output, a partial sum whole on every rank (S h e).
  EXPECT_EQ(l.tp_replicated_activation, static_cast<int64_t>(5 * kS * kH * kE));
  EXPECT_EQ(p.cost.replicated_bytes, static_cast<int64_t>(3 * kS * kH * kE));
  EXPECT_EQ(p.pinned, static_cast<int64_t>(kS * kH * kE));
  // With sequence parallelism at t = 2 a rank keeps half of the rest, but that partial sum
  // whole and the two reduce-scatters' outputs the policy saves (S h e / 2 each): the stage
  // keeps (t - 1) S h e + 2 S h e more in its units (t times a rank's) than at t = 1.
  const ActivationScope policy{module_bit(RecomputeModule::kAlternateGemms), 0};
  const auto stage_keeps = [&](int t, bool sp) {
    return stage_profiles(m, {{1, 1, 1}}, {Recompute::kSelective}, {t}, sp, {}, policy)[0]
        .kept_bytes;
  };
  EXPECT_EQ(stage_keeps(2, true) - stage_keeps(1, true), static_cast<int64_t>(3 * kS * kH * kE));
  EXPECT_EQ(stage_keeps(2, false),
            stage_keeps(1, false));  // (the partial sum: replicated_bytes above)
  // Under fp8 the same GEMMs and every cast: the shares do not change with the precision.
  const Model m8 = model_of(dense_shape(), Precision::kFp8);
  const Layer& f8 = m8.layers[1];
  const RecomputePart& p8 = *part_of(f8, RecomputeModule::kAlternateGemms);
  EXPECT_DOUBLE_EQ(p8.cost.flops, p.cost.flops);
  EXPECT_EQ(std::count(p8.ops.begin(), p8.ops.end(), "cast_fc2"), 1);
}

TEST(OpPolicy, SharesHoldAtATensorDegree) {
  const Model m = model_of(dense_shape());
  const Layer x = m.layers[1].at_tensor_degree(2, 1, 1, 1);
  const Layer whole = m.layers[1];
  const RecomputePart& alt = *part_of(x, RecomputeModule::kAlternateGemms);
  EXPECT_GT(alt.cost.forward, Time::zero());
  EXPECT_LT(alt.cost.forward, x.forward);  // not the attention kernel nor the saved GEMMs
  // The part at a degree is the whole layer's, as the layer's own times are (the lowering
  // divides by the degree): its t shards, each at the efficiency of its smaller size, so a
  // little slower in all than one GPU's whole ops, and the same share of the layer's
  // forward within a few points (the whole ops instead of their shares would add most of
  // QKV and fc1).
  const RecomputePart& one = *part_of(whole, RecomputeModule::kAlternateGemms);
  const double ratio = alt.cost.forward.seconds() / one.cost.forward.seconds();
  EXPECT_GE(ratio, 1.0);
  EXPECT_LT(ratio, 1.2);
  EXPECT_NEAR(alt.cost.forward.seconds() / x.forward.seconds(),
              one.cost.forward.seconds() / whole.forward.seconds(), 0.03);
}

std::string scenario(const std::string& strategy, bool latent = false,
                     const std::string& model_extra = "") {
  return std::string(
             "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 2, intra_node: "
             "nvswitch3}\n"
             "model: {generator: transformer, layers: 4, hidden: 512, heads: 8, "
             "sequence: 1024, vocab: 1000, mlp: swiglu, norm: rmsnorm, position: rotary, "
             "flash_attention: true") +
         (latent ? ", latent: {kv_rank: 128, q_rank: 192, rope_dim: 32, head_dim: 64}, "
                   "experts: 8, top_k: 2, expert_ffn: 256, shared_experts: 1"
                 : "") +
         model_extra +
         "}\ntraining: {global_batch: 8, micro_batch: 2, precision: bf16, optimizer: adam}\n"
         "strategy: {schedule: 1f1b, pipeline: 2, " +
         strategy + "}\n";
}

TEST(RecomputeModules, TradeTimeForMemoryEndToEnd) {
  const auto run = [](const std::string& strategy) {
    return test::run_yaml(scenario(strategy), /*record_memory=*/true);
  };
  const test::SimRun none = run("recompute: none");
  const test::SimRun mlp = run("recompute: selective, recompute_modules: [mlp]");
  const test::SimRun block = run("recompute: full, recompute_layers: 1");
  const test::SimRun full = run("recompute: full");
  for (int d = 0; d < 2; ++d) {
    EXPECT_LT(test::peak_activation_bytes(mlp, d), test::peak_activation_bytes(none, d));
    EXPECT_LT(test::peak_activation_bytes(full, d), test::peak_activation_bytes(block, d));
  }
  // (GPU 1's one micro-batch in flight goes straight from F to B, re-running nothing: there
  // keeping its second layer whole is what it held anyway.)
  EXPECT_LT(test::peak_activation_bytes(block, 0), test::peak_activation_bytes(none, 0));
  EXPECT_EQ(test::peak_activation_bytes(block, 1), test::peak_activation_bytes(none, 1));
  EXPECT_GT(mlp.report.iteration_time, none.report.iteration_time);
  EXPECT_GT(full.report.iteration_time, block.report.iteration_time);
  EXPECT_GT(block.report.iteration_time, none.report.iteration_time);
  EXPECT_TRUE(mlp.report.info.warnings.empty());
  EXPECT_TRUE(block.report.info.warnings.empty());
}

// ZeRO-3 gathers a layer's weights for R only where R re-runs it: with one layer of each
// stage's two checkpointed, R gathers half the bytes a full recompute's R does (the
// embedding and the head, never re-run, gather nothing for R).
TEST(RecomputeModules, ZeroThreeGathersOnlyTheLayersRecomputed) {
  const auto gathered = [](const std::string& recompute) {
    return moved(
        "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 4, intra_node: nvswitch3}\n"
        "model: {generator: transformer, layers: 4, hidden: 512, heads: 8, sequence: 1024, "
        "vocab: 1000, flash_attention: true}\n"
        "training: {global_batch: 8, micro_batch: 2, optimizer: adam}\n"
        "strategy: {schedule: 1f1b, pipeline: 2, data: 2, zero: 3, " +
            recompute + "}\n",
        CommKind::kAllGather);
  };
  const int64_t none = gathered("recompute: none");
  const int64_t full = gathered("recompute: full");
  const int64_t block = gathered("recompute: full, recompute_layers: 1");
  EXPECT_GT(block, none);
  EXPECT_EQ(full - none, 2 * (block - none));
}

TEST(RecomputeModules, WarnsWhereASettingHasNoEffect) {
  const auto warned = [](const test::SimRun& r, const std::string& what) {
    for (const std::string& w : r.report.info.warnings)
      if (w.find(what) != std::string::npos) return true;
    return false;
  };
  // No latent attention to up-project.
  EXPECT_TRUE(
      warned(test::run_yaml(scenario("recompute: selective, recompute_modules: [mla_up_proj]")),
             "mla_up_proj: no effect"));
  // Flash attention: the core re-runs and frees nothing.
  EXPECT_TRUE(warned(test::run_yaml(scenario("recompute: selective")),
                     "core_attn: re-runs its ops and frees no memory"));
  EXPECT_TRUE(warned(test::run_yaml(scenario("recompute: full, recompute_modules: [mlp]")),
                     "strategy.recompute_modules: no effect"));
  EXPECT_TRUE(warned(test::run_yaml(scenario("recompute: selective, recompute_layers: 1")),
                     "strategy.recompute_layers: no effect"));
  // Two layers a stage: a count of 2 cuts none.
  EXPECT_TRUE(warned(test::run_yaml(scenario("recompute: full, recompute_layers: 2")),
                     "no stage that recomputes fully holds more than 2"));
  EXPECT_TRUE(test::run_yaml(scenario("recompute: selective, recompute_modules: [mla_up_proj, "
                                      "moe_act, shared_experts, layernorm]",
                                      true))
                  .report.info.warnings.empty());
}

TEST(RecomputeModules, BadValuesNameTheKey) {
  const auto run = [](const std::string& strategy, bool latent = false) {
    return test::cli({"run", test::write_temp("recompute-bad.yaml", scenario(strategy, latent))});
  };
  auto r = run("recompute: selective, recompute_modules: [attention]");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("strategy.recompute_modules.0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mla_up_proj"), std::string::npos) << r.err;
  r = run("recompute: selective, recompute_modules: [moe, moe_act]", true);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("moe_act: no effect beside moe"), std::string::npos) << r.err;
  r = run("recompute: selective, recompute_modules: []");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("non-empty"), std::string::npos) << r.err;
  r = run("recompute: full, recompute_layers: 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("strategy.recompute_layers"), std::string::npos) << r.err;
  // (Whatever the recompute: the planner's selective plans would take the pair.)
  for (const char* mode : {"selective", "none"}) {
    r = run(std::string("recompute: ") + mode +
                ", recompute_modules: [shared_experts], expert: 2, data: 2, "
                "shared_expert_overlap: true",
            true);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("shared_expert_overlap: false"), std::string::npos) << r.err;
  }
}

TEST(OpPolicy, TimeForMemoryEndToEnd) {
  const auto run = [](const std::string& s) {
    return test::run_yaml(scenario(s), /*record_memory=*/true);
  };
  expect_between(run("recompute: none"),
                 run("recompute: selective, recompute_modules: [alternate_gemms]"),
                 run("recompute: full"));
}

TEST(OpPolicy, AloneOrNotAtAll) {
  const auto run = [](const std::string& strategy, const std::string& model = "") {
    return test::cli({"run", test::write_temp("op-policy.yaml", scenario(strategy, false, model))});
  };
  auto r = run("recompute: selective, recompute_modules: [alternate_gemms, mlp]");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("strategy.recompute_modules"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no other module"), std::string::npos) << r.err;
  r = run("recompute: selective, recompute_modules: [core_attn, alternate_gemms]");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("[alternate_gemms] alone"), std::string::npos) << r.err;
  // Dense layers before MoE ones: the MoE layers keep everything, said.
  r = run("recompute: selective, recompute_modules: [alternate_gemms]",
          ", experts: 4, top_k: 2, expert_ffn: 256, dense_first: 2");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("dense layers only: 2 MoE or latent-attention layers"), std::string::npos)
      << r.err;
  // On MoE layers: nothing to re-run, said.
  r = run("recompute: selective, recompute_modules: [alternate_gemms]",
          ", experts: 4, top_k: 2, expert_ffn: 256");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("alternate_gemms: no effect"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pipesim
