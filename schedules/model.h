// What is trained and how: per-layer profile, training settings and the strategy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"
#include "schedules/collectives.h"

namespace pipesim {

// One operation of an analytically costed layer (a GEMM, a softmax, a pool...), for one
// micro-batch: its forward FLOPs and HBM bytes, the time of each pass, and whether the
// memory roofline (not the compute one) set the forward's and the backward's time.
struct OpCost {
  std::string name;
  bool matrix = true;  // runs on the matrix unit (tensor cores) or the vector unit
  double flops = 0;
  double bytes = 0;
  Time forward, backward_input, backward_weight;
  bool forward_memory_bound = false;
  bool backward_memory_bound = false;
  // Whole on every tensor rank without sequence parallelism (norms, dropouts, residual
  // adds: Layer::tp_whole_forward and the rest sum these).
  bool tensor_whole = false;
};

// A collective a tensor-parallel layer issues on its tensor group: an all-reduce of
// `bytes`, or an all-gather whose result is `bytes` (each rank contributing bytes / t).
// `beside`: in the backward, the weight-gradient GEMM that may run while an input
// gradient's all-reduce is in flight (Megatron-LM's asynchronous tensor-parallel
// all-reduce, Strategy::tensor_overlap); the whole layer's time, as Layer's.
//
// Context and expert parallelism add collectives among other groups (`group`): an
// all-to-all (each member sends bytes / n of the `bytes` it holds to every other member:
// MoE token dispatch and combine, Ulysses attention), a ring all-gather of `bytes` (the
// gathered result: ring attention's keys and values) or a reduce-scatter of `bytes`.
// kExpertTensor: the expert-tensor group that splits each expert's GEMMs
// (Strategy::expert_tensor), which all-gathers the dispatched tokens before the experts and
// reduce-scatters their outputs after them.
enum class CollectiveGroup : uint8_t { kTensor, kExpert, kContext, kExpertTensor };
struct TpCollective {
  enum class Kind { kAllReduce, kAllGather, kAllToAll, kReduceScatter };
  Kind kind = Kind::kAllReduce;
  int64_t bytes = 0;
  Time beside;
  CollectiveGroup group = CollectiveGroup::kTensor;
  // Under sequence parallelism, where a tensor all-reduce is a reduce-scatter and an
  // all-gather: whether each moves fp8 elements, half of `bytes` (16-bit ones; Transformer
  // Engine casts to fp8 before it gathers: Layer::tp_fp8).
  bool scatter_fp8 = false, gather_fp8 = false;
  // A MoE dispatch or combine under a deduplicating dispatcher (Strategy::expert_dispatch):
  // each token, routed to top_k of `experts`, travels once to each GPU and each node holding
  // any of its experts (0: an all-to-all of every routed copy).
  int top_k = 0, experts = 0;
};

// One tensor rank's share of a shape-described layer split t ways (costs/shape_shards.cc):
// its times from the per-op rooflines of the sharded shapes, its activations (the part split
// t ways, and what every rank keeps whole), and the collectives its forward and backward
// issue, in order, each after an equal segment of the pass. Its times are for the micro-batch
// as k equal shards of its samples, each op priced at one shard's size (stage replicas
// splitting it, sample_shards; k = 1: whole); activations and collectives are the whole
// micro-batch's.
struct TensorShard {
  Time forward, backward_input, backward_weight;
  int64_t split_activation = 0;       // one rank's share
  int64_t replicated_activation = 0;  // whole on every rank
  std::vector<TpCollective> forward_collectives, backward_collectives;
};
using TensorSplit = std::function<TensorShard(int t, int k)>;

// The parts of a generated transformer layer, in the order its forward runs them, where
// context and expert parallelism place their collectives (schedules/stage_profiles.cc):
// the attention block before its core (norm, QKV, rotary), the core, the rest of the block
// (projection, dropout and residual); then the MLP block, or for a MoE layer the norm and
// router, the routed experts, and the rest (un-permute, shared experts, dropout and residual).
enum class PieceKind : uint8_t {
  kPreAttention,
  kAttention,
  kPostAttention,
  kMlp,
  kPreExperts,
  kExperts,
  kPostExperts,
  kSharedExperts  // a MoE layer's shared experts, after the un-permutation
};
struct LayerPiece {
  PieceKind kind = PieceKind::kMlp;
  Time forward, backward_input, backward_weight;
  // The GEMMs Transformer Engine pairs a tensor-parallel collective with
  // (Strategy::tensor_overlap full): `lead_forward`, the piece's forward up to and including
  // its column-parallel GEMMs (QKV, fc1; latent attention's up-projections), which the
  // all-gather feeding it runs beside;
  // `lead_backward`, its backward up to and including the row-parallel GEMM's input
  // gradient (projection, fc2), likewise; `tail_forward`, its row-parallel GEMM's forward,
  // which the reduce-scatter of its output runs beside. Zero where the piece has none.
  Time lead_forward, lead_backward, tail_forward;
};

// An analytic layer's times at tensor degree t, expert-parallel degree ep, context degree
// cp and expert-tensor degree etp, still for the whole layer (the lowering divides by t and
// cp) but with each split op at the efficiency of one rank's share (a context rank's ops see
// 1/cp of the tokens; a routed expert's GEMMs see the tokens of the ep x etp ranks' shares,
// 1/etp of each expert's width).
struct TensorTimes {
  Time forward, backward_input, backward_weight;
  std::vector<Time> backward_beside;  // Layer::tp_backward_beside at that degree
  std::vector<LayerPiece> pieces;     // Layer::pieces at that degree
  std::vector<OpCost> ops;            // the ops at that degree, every rank's shards together
};
using TensorRetime = std::function<TensorTimes(int t, int ep, int cp, int etp)>;
// A layer's times with each micro-batch's samples split into k equal shards, each op priced
// at one shard's size (the k shards' time together; stage replicas, sample_shards).
using SampleRetime = std::function<TensorTimes(int k)>;

// A mixture-of-experts layer (SPEC section 9): what expert parallelism shards and sends.
struct MoeFacts {
  int experts = 0;  // routed experts
  int top_k = 1;
  int64_t expert_params = 0;  // of Layer::params: the routed experts' (sharded over EP ranks)
  // Bytes of the routed tokens of one micro-batch (tokens x top_k x hidden, 16-bit): what
  // the dispatch all-to-all sends out and the combine brings back.
  int64_t dispatch_bytes = 0;
  // The busiest expert rank's load is at most this share of the mean (capacity_factor:
  // tokens past it are dropped); 0: dropless.
  double capacity = 0;
  int64_t expert_ffn = 0;  // each routed expert's width (0: not known, a hand-built layer)
  // The MoE block's activation bytes (router, permuted tokens, experts, shared experts):
  // what recomputing the whole block (RecomputeModule::kMoe) no longer keeps.
  int64_t block_bytes = 0;
};

// The attention of a generated transformer layer: the bytes context parallelism moves,
// for one micro-batch of whole sequences (16-bit): keys and values, and queries, keys and
// values together (Ulysses' all-to-all before the core; the output's after it is the
// layer's output_bytes).
struct AttentionFacts {
  int64_t kv_bytes = 0;
  int64_t qkv_bytes = 0;
};

// The parts of a generated transformer layer a selective recompute can re-run in the
// backward instead of keeping their tensors (strategy.recompute_modules; docs/parallelism.md,
// "Recompute as Megatron-Core sets it"): Megatron-Core's modules (the attention core, the two
// norms, a dense layer's MLP, the routed experts' activation function, latent attention's
// up-projections and the shared experts), and PyTorch's per-op selective checkpointing
// (torchtitan's `op` policy) as a whole-layer module: every second GEMM and every
// element-wise op, around a kept attention kernel.
enum class RecomputeModule : uint8_t {
  kCoreAttn,
  kLayernorm,
  kMlp,
  kMoeAct,
  kMlaUpProj,
  kSharedExperts,
  kAlternateGemms,
  kMoe
};
inline constexpr int kRecomputeModuleCount = 8;
std::string_view to_string(RecomputeModule m);
std::optional<RecomputeModule> parse_recompute_module(std::string_view name);
// A set of modules: bit (1 << m) for module m. Megatron-Core's default is the attention core.
using RecomputeModules = uint16_t;
constexpr RecomputeModules module_bit(RecomputeModule m) {
  return static_cast<RecomputeModules>(1u << static_cast<unsigned>(m));
}
// The modules that act: `moe` re-runs the whole MoE block, the experts' activation and the
// shared experts inside it (`moe_act`, `shared_experts`) with it.
RecomputeModules effective_modules(RecomputeModules modules);
inline constexpr RecomputeModules kDefaultRecomputeModules = module_bit(RecomputeModule::kCoreAttn);

// What re-running some of a layer's parts costs and saves, for one micro-batch: their
// forward time (at the layer's degrees, Layer::at_tensor_degree), their FLOPs, the activation
// bytes the layer no longer keeps from the forward to the backward, and of those the bytes
// every tensor rank holds whole without sequence parallelism.
struct RecomputeCost {
  Time forward;
  double flops = 0;
  int64_t bytes = 0;
  int64_t replicated_bytes = 0;
};

// One module of a layer: the names of the ops it re-runs (Layer::ops) and their cost; of
// its forward, the ops every tensor rank runs whole without sequence parallelism (OpCost::
// tensor_whole: norms), at their time on the whole tokens.
struct RecomputePart {
  RecomputeModule module = RecomputeModule::kCoreAttn;
  std::vector<std::string> ops;
  // The share of each of `ops` the part re-runs (1 but for a fused GEMM of which it re-runs
  // some outputs: one of QKV's three, one of a gated fc1's two).
  std::vector<double> shares;
  RecomputeCost cost;
  Time whole_forward;
  // Under tensor parallelism, the layer's forward all-reduces (Layer::tp_forward_allreduces)
  // the re-run issues again, in the order it runs them: Megatron-Core's `mlp` gathers fc1's
  // input and reduces fc2's output again (one all-reduce's worth: its reduce-scatter and
  // all-gather under sequence parallelism). With `regather` only their all-gather halves
  // under sequence parallelism (the per-op policy keeps the reduce-scatters' outputs and
  // gathers the norms' outputs again); without it, all-reduces either way.
  int tp_allreduces = 0;
  bool regather = false;
  // Of what the part keeps, a tensor every tensor rank holds whole whatever the sequence
  // parallelism (the per-op policy's saved down-projection output: a partial sum before its
  // reduce-scatter or all-reduce): `pinned` bytes (0: none). (With `regather` under
  // sequence parallelism the policy also keeps the reduce-scatters' outputs.)
  int64_t pinned = 0;
  // A MoE layer's whole MoE block (`moe`): its re-run dispatches and combines the tokens
  // again over the expert group (and gathers and scatters them over the expert-tensor
  // group), after `before_dispatch` of its time and `before_combine` more.
  bool exchanges = false;
  Time before_dispatch, before_combine;
};

// A part with `exchanges`: its time before the dispatch (the router and the permutation)
// and before the combine (the routed experts), from the layer's ops.
void time_exchanges(RecomputePart& p, const std::vector<OpCost>& ops);

// Costs of one layer for one micro-batch of Training::micro_batch samples.
struct Layer {
  std::string name;
  Time forward;
  Time backward_input;   // the whole backward when the profile is not split
  Time backward_weight;  // zero unless the profile is split
  bool split_backward = false;
  Time optimizer;  // optimizer step for this layer's parameters
  // The optimizer time is the user's (hand-written YAML layers, a profile's optimizer
  // column): otherwise the loader sets a memory-bound update over the GPU's HBM.
  bool optimizer_given = false;
  int64_t activation_bytes = 0;  // kept from forward until backward
  // With a split backward: of activation_bytes, what W still reads once B is done (the
  // inputs of the weight-gradient GEMMs and the output gradients B leaves them); B frees
  // the rest (SPEC section 3). Unset: everything waits for W.
  std::optional<int64_t> weight_activation;
  // Of weight_activation, the part tensor parallelism leaves whole on every rank (without
  // sequence parallelism): the column-parallel GEMMs' inputs.
  int64_t tp_replicated_weight_activation = 0;
  // What W keeps: weight_activation, at most the whole activation.
  int64_t weight_kept() const {
    return weight_activation ? std::min(*weight_activation, activation_bytes) : activation_bytes;
  }
  int64_t output_bytes = 0;  // sent to the next stage (the gradient coming back is as big)
  int64_t params = 0;
  double forward_flops = 0;  // for one micro-batch; 0 when not known
  // Generated transformer layers: the modules selective recompute can re-run (the attention
  // core: Korthikanti et al. 2022, section 4, the 5as^2b term without flash attention).
  // Empty for other layers.
  std::vector<RecomputePart> recompute_parts;
  // The sum over the parts in `modules`.
  RecomputeCost selective(RecomputeModules modules) const;
  // Under sequence parallelism a rank holds 1/t of what a selective recompute of `modules`
  // keeps, but the per-op policy's pinned partial sum whole (RecomputePart::pinned) and the
  // two reduce-scatters' outputs it saves (1/t of S h e each): what that adds, in a stage's
  // units (t times one rank's), to what selective(modules) keeps. Without sequence
  // parallelism the partial sum is among the bytes every rank holds whole
  // (RecomputeCost::replicated_bytes); 0 then.
  int64_t held_whole(RecomputeModules modules, int t, bool sequence_parallel) const;
  // Whether a full recompute re-runs the layer. Megatron-LM and DeepSpeed checkpoint the
  // transformer layers only: a generated model's embedding and output layer keep their
  // activations and are not run again.
  bool recomputed = true;
  // Tensor parallelism (Megatron-LM's layout; generated layers only): the all-reduces the
  // layer issues on its tensor group in the forward and in the backward, each of
  // `tp_allreduce_bytes` (its b x s x h activation), and the activation bytes that stay
  // whole on every GPU of the group unless sequence parallelism splits them too (layer-norm
  // inputs, dropout masks: Korthikanti et al.'s 10sbh).
  bool tensor_parallel = false;
  int tp_forward_allreduces = 0, tp_backward_allreduces = 0;
  int64_t tp_allreduce_bytes = 0;
  // Under fp8: Transformer Engine's sequence-parallel all-gathers move the activation in
  // fp8, half of tp_allreduce_bytes (it casts a GEMM's input, and in the backward its output
  // gradient, before gathering), and under its overlap (Strategy::tensor_overlap full) the
  // forward's reduce-scatters too (userbuffers' fp8 output buffers).
  bool tp_fp8 = false;
  // Per backward all-reduce, in order: the weight-gradient GEMM of the column-parallel
  // linear whose input gradient it reduces (TpCollective::beside).
  std::vector<Time> tp_backward_beside;
  // The ops outside Megatron's tensor-parallel region (layer norms, the dropout-residual
  // adds), part of the times above: without sequence parallelism every rank of the group
  // runs them whole (Korthikanti et al. 2022, Table 4: 22B, 7.7 ms per layer forward
  // without, 7.2 ms with sequence parallelism).
  Time tp_whole_forward, tp_whole_backward_input, tp_whole_backward_weight;
  int64_t tp_replicated_activation = 0;
  // Parameters every rank of the tensor group holds whole (learned position embeddings,
  // layer norms, the row-parallel linears' biases); the rest of `params` is split t ways.
  int64_t tp_replicated_params = 0;
  // An output layer whose weights are another layer's (tied embeddings): `tied_params` of
  // layer `tied_to`. A stage holding it without that layer keeps its own copy (Megatron-LM's
  // last pipeline stage holds the word embeddings too, their gradients all-reduced with the
  // first stage's), so they count in that stage's parameters. -1: not tied.
  int tied_to = -1;
  int64_t tied_params = 0;
  // Shape-described layers that tensor parallelism can split (linear, conv, attention, LSTM,
  // and pools, which every rank runs whole): one rank's share at degree t. Null otherwise.
  std::shared_ptr<const TensorSplit> tensor_split;
  // Generated layers under tensor parallelism: the times at degree t, each op the tensor
  // group splits looked up on the efficiency curves at one rank's size. Null otherwise.
  std::shared_ptr<const TensorRetime> tensor_retime;
  // Shape-described layers, a generated model's embedding and head, and profiles whose
  // matrix FLOPs are known: the layer's times with its rows split k ways (generated blocks
  // split them by tensor_retime's context degree). Null otherwise: its time splits linearly.
  std::shared_ptr<const SampleRetime> sample_retime;
  // Where the times come from: analytic (per-op roofline), profile (as measured), or a
  // profile scaled to another batch: profile/linear or profile/curve.
  std::string source = "profile";
  std::vector<OpCost> ops;  // analytic layers: the per-op breakdown of the times above
  // Generated transformer layers: their parts (LayerPiece), attention, and experts.
  std::vector<LayerPiece> pieces;
  std::optional<AttentionFacts> attention;
  std::optional<MoeFacts> moe;

  Time backward() const { return backward_input + backward_weight; }
  // The layer as the ranks of a tensor group of degree t (an expert-parallel group of ep, a
  // context group of cp, experts split over etp ranks) cost it: tensor_retime's times where
  // it has one, else the layer itself.
  Layer at_tensor_degree(int t, int ep = 1, int cp = 1, int etp = 1) const;
  // The same with each micro-batch's samples split into k shards besides (stage replicas):
  // tensor_retime at context degree cp k, or sample_retime(cp k) (a context rank's tokens
  // shrink its rows as a replica's samples do); the layer itself for a layer with neither.
  Layer at_degrees(int t, int ep, int cp, int etp, int k) const;
  // One rank's share of each op at tensor degree t, expert degree ep and context degree cp,
  // as the lowering divides the layer (`pipesim model --ops`): the ops the tensor group
  // splits at 1/(t cp) of their time at that degree, the ones it keeps whole at their whole
  // time (without sequence parallelism); a layer without tensor_retime at its own
  // efficiency. Empty for a shape-described layer split by tensor_split (t > 1).
  std::vector<OpCost> rank_ops(int t, int ep, int cp, bool sequence_parallel, int etp = 1) const;
};

struct Model {
  std::string name;
  std::vector<Layer> layers;
  // The copy of tied weights (Layer::tied_to) a stage of layers [first, last] keeps for
  // its layer l: tied_params when the owner lies outside the range and no layer of the
  // stage before l is tied to it (one copy a stage, however many layers read it), else 0.
  int64_t tied_copy(int l, int first, int last) const;
  // Parameters of layers [first, last] as one stage holds them: theirs, plus the copy of
  // tied weights whose owner lies outside the range (tied_copy).
  int64_t stage_params(int first, int last) const;
  int64_t input_bytes = 0;  // one micro-batch of input samples (kept by gpipe-recompute on stage 0)
  int64_t tokens_per_sample = 0;  // the sequence length, for models that have one
};

// Under a full recompute of layers [first, last], which of them are checkpointed (1) and
// re-run: every Layer::recomputed one, or with `block` > 0 (Strategy::recompute_layers) the
// first `block` of those; the others keep their activations.
std::vector<char> checkpointed_layers(const Model& m, int first, int last, int block);

// fp32; mixed (bf16/fp16 with master weights, Training::master_weight_bytes); fp8 and nvfp4: mixed,
// with the transformer's weight GEMMs in fp8 or NVFP4 as Transformer Engine runs them
// (costs/models.h).
enum class Precision { kFp32, kMixed, kFp8, kNvfp4 };
// fp8 or nvfp4: weight GEMMs on a low-precision format, with its copy of every weight.
inline bool quantized(Precision p) {
  return p == Precision::kFp8 || p == Precision::kNvfp4;
}
std::string_view to_string(Precision p);
enum class Optimizer { kSgd, kMomentum, kAdam };

// training.failures (SPEC section 10), in seconds: one GPU's mean time between failures,
// the checkpoint interval (unset: the optimum), a checkpoint's write time, or the rate at
// which each writing GPU saves its share (checkpoint_bandwidth, bytes/s; 0: not given), and
// the time from a failure to training again.
struct Failures {
  double mtbf_per_gpu_s = 0;
  std::optional<double> checkpoint_every_s;
  std::optional<double> checkpoint_s;
  double checkpoint_bytes_per_s = 0;
  double restart_s = 0;
};

struct Training {
  int64_t global_batch = 1;
  int64_t micro_batch = 1;
  Precision precision = Precision::kFp32;
  Optimizer optimizer = Optimizer::kSgd;
  // Gradients kept (and all-reduced) in fp32 whatever the weights' precision: Megatron-LM's
  // main_grad buffers (--accumulate-allreduce-grads-in-fp32, which it sets under bf16).
  bool fp32_gradients = false;
  // Under fp8, the weights kept as fp8 alone, without their 16-bit copy, and gathered in fp8
  // (Megatron-Core's --fp8-param-gather; Transformer Engine's fp8 parameters): training.
  // fp8_params. Under nvfp4 the same for its NVFP4 copies (--fp4-param-gather). The master
  // weights (fp32 ones: master_weight_bytes 4) stay with the optimizer.
  bool fp8_params = false;
  // Bytes of one optimizer-state element (Adam's two moments, momentum's one): 4 (fp32), 2
  // (bf16 or fp16: Megatron-Core's --exp-avg-dtype / --exp-avg-sq-dtype with its
  // precision-aware optimizer) or 1 (fp8): training.optimizer_state.
  int64_t optimizer_state_bytes = 4;
  // Under 16-bit and lower precisions, the bytes a parameter's master copy adds beside its
  // 16-bit weight: 4 (an fp32 copy), 2 (the 16 bits an fp32 value has beyond its bf16 weight:
  // store_param_remainders in Transformer Engine's FusedAdam and Apex's distributed Adam) or
  // 0 (the optimizer updates the 16-bit weights themselves: FusedAdam without master
  // weights on bf16 parameters): training.master_weights: fp32 | remainders | none.
  int64_t master_weight_bytes = 4;
  int iterations = 1;
  std::optional<Time>
      optimizer_step;  // the whole model's optimizer step, spread over layers by params
  std::optional<Failures> failures;
};

// Bytes of HBM traffic per parameter in one optimizer step (a memory-bound update): read
// the gradient, read and write the weights (their master copy under mixed precision, plus
// the 16-bit weights) and every optimizer state.
int64_t optimizer_bytes_per_param(const Training& t);

// Bytes of one activation or weight element in the training precision: 4 in fp32, else 2
// (fp8 keeps 16-bit activations but for the GEMM inputs it saves in fp8).
int64_t element_bytes(Precision p);

// SPEC section 3: bytes per parameter kept resident for the whole run.
struct ParamBytes {
  int64_t weights = 0;
  // What a weight all-gather (ZeRO) moves: the 16-bit (or fp32) weights. Under fp8 the fp8
  // copy in `weights` is cast on each rank from the gathered 16-bit weights, not sent; with
  // Training::fp8_params the fp8 weights are all there is, and they are what is sent.
  int64_t gathered = 0;
  int64_t gradients = 0;
  int64_t optimizer = 0;  // optimizer state, and the master copy under mixed precision
};
ParamBytes bytes_per_param(const Training& t);
// The optimizer's states per parameter: sgd 0, momentum 1, adam 2.
int64_t optimizer_states(Optimizer o);

enum class ScheduleKind {
  kGpipe,
  kGpipeRecompute,
  kDapple,
  kPipeDream,
  kPipeDream2BW,
  kInterleaved,
  kZbH1,
  kZbH2,
  kZb1p,  // Zero Bubble's automatic schedule under p M_B of activations
  kZb2p,  // the same under 2p M_B
  kZbV,   // Zero Bubble's V: two chunks per device, chunk 1 on the way back up
};

std::string_view to_string(ScheduleKind k);

// Whether a schedule's stage replicas take whole micro-batches in turn (PipeDream's round
// robin) rather than split each micro-batch's samples among them (DAPPLE; SPEC section 2).
inline bool replicas_take_turns(ScheduleKind k) {
  return k == ScheduleKind::kPipeDream;
}
// The equal shards a stage's r replicas price a micro-batch of b samples in (each op at one
// shard's size): min(r, b), r where b is not known (0), 1 where they take turns.
inline int sample_shards(int replicas, int64_t micro_batch, bool take_turns) {
  if (take_turns || replicas <= 1) return 1;
  return micro_batch > 0 ? static_cast<int>(std::min<int64_t>(replicas, micro_batch)) : replicas;
}

// Where global stages sit on the P pipeline positions: chunk c of position p is global stage
// c P + p (round robin), except in zb-v's V (is_v_shape), whose chunk 1 runs back up the
// devices: chunk 1 of position p is global stage 2P - 1 - p.
inline bool is_v_shape(ScheduleKind k) {
  return k == ScheduleKind::kZbV;
}
inline int stage_of_position(int p, int chunk, int P, bool v_shape) {
  return v_shape && chunk == 1 ? 2 * P - 1 - p : chunk * P + p;
}
inline int position_of_stage(int g, int P, bool v_shape) {
  return v_shape && g >= P ? 2 * P - 1 - g : g % P;
}
// Accepts the SPEC names and aliases (1f1b, pipedream-flush).
std::optional<ScheduleKind> parse_schedule(std::string_view name);
std::string schedule_names();  // for error messages
// Asynchronous schedules never flush: mini-batches follow each other through the pipeline.
bool is_async(ScheduleKind k);
bool needs_split_backward(ScheduleKind k);  // zero-bubble schedules
// Schedules whose order depends on the stage profiles and transfer times (scenario_orders).
bool needs_stage_costs(ScheduleKind k);

// strategy.recompute (SPEC section 3.1): full keeps each layer's input and re-runs the
// stage's forward before its backward; selective keeps everything but the attention core
// and re-runs only that (Korthikanti et al. 2022).
enum class Recompute { kNone, kFull, kSelective };
std::string_view to_string(Recompute r);

// strategy.warmup (SPEC section 3.1): micro-batches stage s has in flight before its first
// backward under the 1F1B schedules. kSchedule: min(S - s, M); kDeep: min(2(S - s) - 1, M);
// kAuto: chosen per stage from its cross-stage transfer time against its compute.
enum class Warmup { kSchedule, kDeep, kAuto };
std::string_view to_string(Warmup w);
std::optional<Warmup> parse_warmup(std::string_view name);
// The schedules strategy.warmup applies to: dapple and its aliases.
bool has_warmup(ScheduleKind k);

// strategy.context_comm: how context-parallel ranks exchange keys and values.
//   p2p         Megatron-Core's ring attention: keys and values travel around the ring
//               beside the attention core (forward; the backward sends their gradients too)
//   all-gather  keys and values all-gathered before the core; their gradients
//               reduce-scattered after its backward
//   a2a         Ulysses (DeepSpeed): queries, keys and values all-to-all'd from sequence
//               shards to head shards before the core, the output back after it
enum class ContextComm { kP2p, kAllGather, kA2a };
std::string_view to_string(ContextComm c);

struct StageSpec {
  int first_layer = 0;  // inclusive
  int last_layer = 0;   // inclusive
  int replicas = 1;
  std::optional<Warmup> warmup{};        // overrides Strategy::warmup for this stage
  std::optional<Recompute> recompute{};  // overrides Strategy::recompute for this stage
  std::optional<int> tensor{};           // overrides Strategy::tensor for this stage
  friend bool operator==(const StageSpec&, const StageSpec&) = default;
};

// Tensor collectives beside compute (strategy.tensor_overlap). kNone (SPEC section 3.1's
// default): every one on the compute critical path, as in the Megatron-LM of 2021.
// kBackward: Megatron-LM's asynchronous all-reduce (its default since 2022): in the
// backward, each column-parallel linear's input-gradient all-reduce (reduce-scatter under
// sequence parallelism) runs beside its weight-gradient GEMM. kFull: Transformer Engine's
// communication-GEMM overlap (tp_comm_overlap): without sequence parallelism every tensor
// all-reduce, forward and backward, runs beside the compute of the sublayer it follows
// (issued when that sublayer starts) and the next sublayer waits for both; under sequence
// parallelism a generated layer's reduce-scatters and all-gathers run beside the GEMMs TE
// pairs them with (LayerPiece's leads and tail; docs/parallelism.md, "Overlap everywhere").
enum class TensorOverlap { kNone, kBackward, kFull };

struct Strategy {
  ScheduleKind schedule = ScheduleKind::kDapple;
  std::vector<StageSpec> stages;  // global stages; stage g runs on position position_of(g)
  int data = 1;
  int virtual_stages = 1;  // model chunks per device (interleaved; 2 under zb-v)
  Warmup warmup = Warmup::kSchedule;
  Recompute recompute = Recompute::kNone;  // gpipe-recompute: full on every stage
  // What `selective` re-runs (Megatron-Core's --recompute-modules).
  RecomputeModules recompute_modules = kDefaultRecomputeModules;
  // `full` checkpoints only the first n transformer layers of each stage (Megatron-Core's
  // --recompute-method block --recompute-num-layers n; each model chunk under interleaving);
  // the others keep their activations. 0: every layer.
  int recompute_layers = 0;
  // The first n transformer layers of each stage (each model chunk under interleaving) move
  // the activations their backward reads to host memory as their forward ends and back
  // before their backward (Megatron-Core's --cpu-offloading-num-layers n); at least the
  // stage's last layer stays. 0: none. Not with a recompute or a split backward.
  int offload_layers = 0;
  int tensor = 1;                          // tensor-parallel degree of every stage
  bool sequence_parallel = false;          // Megatron sequence parallelism (tensor > 1)
  // Which tensor collectives run beside compute (TensorOverlap).
  TensorOverlap tensor_overlap = TensorOverlap::kNone;
  // Pipeline sends and receives run beside the compute (SPEC section 9's default). Off:
  // Megatron-LM's --no-overlap-p2p-communication with one CUDA connection: the sender's
  // compute stream waits until each of its sends has arrived (the receiver's op waits for
  // it in any case); under `interleaved` a steady-state forward sends with the backward it
  // is paired with (SlotOrders::pair_from). The receiver's posting is not modelled.
  bool p2p_overlap = true;
  // ZeRO-1/2: the all-gather of the updated weights runs beside the next iteration's first
  // forward (Megatron-Core's --overlap-param-gather, NeMo's overlap_param_sync) instead of
  // between the optimizer step and it: the device's second compute op of each iteration
  // waits for it, the first does not.
  bool overlap_param_gather = false;
  // The gradient reduction of the last backward before an optimizer step runs bucket by
  // bucket as the backward produces them (PyTorch DDP; Megatron-Core's
  // --overlap-grad-reduce). Off: it starts once the device's backward is done (the
  // Megatron-LM of 2021-2022, which all-reduced after the last micro-batch). ZeRO-0 and 1
  // only: ZeRO-2 and 3 reduce every micro-batch's gradients as they come.
  bool overlap_grad_reduce = true;
  int zero = 0;  // DeepSpeed ZeRO stage over each stage's data-parallel ranks (schedules/zero.h)
  // Context parallelism (SPEC section 9): each sequence split over `context` ranks, which
  // exchange attention's keys and values (context_comm) and join the data-parallel
  // gradient reduction. GPUs = tensor x context x pipeline x data.
  int context = 1;
  ContextComm context_comm = ContextComm::kP2p;
  // Expert parallelism: a MoE layer's routed experts spread over `expert` ranks carved out
  // of the data x context ranks, which exchange tokens with all-to-alls; each expert's
  // GEMMs split over expert_tensor ranks (1: whole experts). routing_imbalance: the busiest
  // expert rank's tokens over the mean.
  int expert = 1;
  int expert_tensor = 1;
  // Token dispatch: Megatron-Core's `alltoall` dispatcher (every routed copy of a token
  // travels), or its `flex` dispatcher with DeepEP / HybridEP (a token travels once to each
  // GPU, and once across the network to each node, holding any of its experts).
  bool dedup_dispatch = false;
  double routing_imbalance = 1.0;
  // Megatron-Core's --moe-shared-expert-overlap: the shared experts compute while the token
  // dispatch's all-to-all is in flight (forward), and while its gradients' is (backward).
  bool shared_expert_overlap = false;
  // Pipeline copies of each stage: data-parallel copies times context ranks.
  int copies() const { return data * context; }
  int tensor_of(const StageSpec& s) const { return s.tensor.value_or(tensor); }
  Recompute recompute_of(const StageSpec& s) const {
    if (schedule == ScheduleKind::kGpipeRecompute) return Recompute::kFull;
    return s.recompute.value_or(recompute);
  }
  bool vertical_sync = false;  // PipeDream: every stage uses the version the input stage used
  // Gradient all-reduce algorithm; empty means auto: the cheapest for each group and size.
  std::optional<AllReduceAlgo> allreduce;
  // Gradients sync in buckets of about this size as their layers finish the backward
  // (PyTorch DDP's default bucket_cap_mb = 25).
  int64_t bucket_bytes = 25LL * 1024 * 1024;
  // Gradients are copied into bucket buffers of their own (PyTorch DDP without
  // gradient_as_bucket_view): one more gradient copy on every device whose gradients are
  // all-reduced, counted as "other". Off: gradients are views of the buckets (Megatron).
  bool bucket_buffers = false;

  int positions() const { return static_cast<int>(stages.size()) / virtual_stages; }
  // Pipeline position of global stage g (position_of_stage).
  int position_of(int g) const { return position_of_stage(g, positions(), is_v_shape(schedule)); }
};

// Micro-batches per iteration per pipeline copy: global_batch / (micro_batch * data).
int64_t micro_batches(const Training& t, const Strategy& s);

}  // namespace pipesim
