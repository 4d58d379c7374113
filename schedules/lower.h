// Lowering: schedule orders + stage profiles + placement -> TaskGraph.
//
// This is where the semantics of SPEC section 3 live, for every schedule alike:
//  - F(g, m) waits for F(g-1, m)'s output to arrive; B(g, m) waits for the gradient from
//    B(g+1, m) (on the last stage, for its own F(g, m)); W(g, m) waits for B(g, m); a
//    recompute R(g, m) takes the gradient's place as B's trigger and B follows it. With a
//    split backward the gradient leaves after W(g+1, m) instead, unless the orders say
//    `early_input_grad` (zero-bubble schedules, hand-written orders).
//  - A stage with r replicas splits each micro-batch r ways (DAPPLE): each replica computes
//    and stores 1/r of it, and an output is re-split across the next stage's replicas, each
//    (sender, receiver) pair moving the bytes of the samples they share. In round-robin
//    mode (PipeDream 1F1B-RR) replica m % r takes micro-batch m whole instead.
//  - Activations are allocated when F starts and freed when the backward that consumes
//    them ends. When the slot runs a W of its own for that micro-batch, B frees all but
//    what W reads (StageProfile::weight_activation_bytes) and W frees that. With a
//    recompute, F keeps only the stage input after it ends and R re-allocates the rest.
//  - Weights, gradients, optimizer state and stashed weight versions are resident from the
//    start.
//  - Optimizer steps come from the orders. Before each one, the devices holding copies of
//    the same position (replicas and data-parallel copies) all-reduce their gradients with
//    a ring: 2(n - 1) steps of bytes / n between ring neighbours, as transfers, so the
//    all-reduce overlaps every other device's work and costs 2(n-1)(alpha + bytes/(n beta))
//    on idle links.
//  - Tensor parallelism cuts a stage's F, R and B into segments with the group's all-reduces
//    between them; with sequence parallelism each all-reduce is a ring reduce-scatter then
//    a ring all-gather (schedules/collectives_rs_ag.h).
//  - ZeRO (schedules/zero.h) over the n devices holding copies of a position, when n >= 2:
//    state sharded n ways; the gradients are reduce-scattered (ring) instead of
//    all-reduced, the optimizer step updates 1/n of them; stages 1 and 2 then all-gather
//    the updated weights, and the device's next compute op waits for them. Stage 3 instead
//    all-gathers each layer's weights before the layer's part of every F, R and B (the op
//    is one part per layer; the gather for a part may start when the part two before it
//    on the device has ended, i.e. one layer ahead, as DeepSpeed prefetches) and keeps a
//    gathering buffer of the two largest layers' weights resident.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/placement.h"
#include "schedules/collectives.h"
#include "schedules/model.h"
#include "schedules/order.h"
#include "schedules/task_graph.h"

namespace pipesim {

// Costs of one global stage for one whole micro-batch (before any replica split).
struct StageProfile {
  Time forward, backward_input, backward_weight, optimizer;
  int64_t activation_bytes = 0;
  int64_t input_bytes = 0;  // what arrives from the previous stage (model input on stage 0)
  int64_t output_bytes = 0;
  int64_t params = 0;
  // With recompute: bytes kept from F until the backward (full: each checkpointed layer's
  // input, the other layers' activations; selective: all but what the modules re-run
  // free), bytes R allocates again (the largest layer's share, as the backward recomputes
  // layer by layer), and R's time.
  int64_t kept_bytes = 0, transient_bytes = 0;
  Time recompute_time;
  // Offloaded to host memory (ActivationScope::offload_layers): of activation_bytes, what
  // F moves out (its part tensor parallelism leaves whole on every rank), and what the
  // device buffers its copies out and back pass through hold beyond the layers kept after
  // the moved ones (two layers', double-buffered).
  int64_t offloaded_bytes = 0, replicated_offloaded = 0;
  int64_t offload_buffer_bytes = 0, replicated_offload_buffer = 0;
  // R re-runs the forward (its tensor all-reduces too) of every layer Layer::recomputed.
  bool full_recompute = true;
  // Bytes that tensor parallelism leaves whole on every GPU of the group (without sequence
  // parallelism): of the activations, and of what recompute keeps and re-allocates.
  int64_t replicated_activation = 0, replicated_kept = 0;
  // With a split backward: of activation_bytes, what W still reads once B is done
  // (Layer::weight_kept), and the part of it tensor parallelism leaves whole on every rank.
  int64_t weight_activation_bytes = 0, replicated_weight_activation = 0;
  int64_t replicated_params = 0;  // of `params`, whole on every rank (Layer::tp_replicated_params)
  int64_t expert_params = 0;      // of `params`, routed experts' (LayerCost::expert_params)
  bool pieces = false;            // some layer has LayerCost::pieces
  struct LayerCost {
    Time backward_input, backward_weight;
    int64_t params = 0;
    int64_t replicated_params = 0;
    Time forward;
    // Tensor-parallel collectives issued in the forward and the backward, in order, each
    // after an equal segment of the pass.
    std::vector<TpCollective> tp_forward, tp_backward;
    bool recomputed = true;  // a full R re-runs it (Layer::recomputed)
    // Under context or expert parallelism (and for MoE layers), the layer's parts in
    // forward order with the collectives each issues; they replace tp_forward and
    // tp_backward. A collective `after` a part is issued when the part ends (in the backward,
    // when its backward ends); one `beside` it starts with the part and runs beside it, and
    // what follows the part waits for it.
    struct Piece {
      Time forward, backward_input, backward_weight;
      TpCollective forward_beside, forward_after, backward_beside, backward_after;
      // A second collective after the first (`after`'s bytes > 0): issued when it ends,
      // and what follows the part waits for it (expert tensor parallelism's all-gather
      // after the dispatch, the combine after the reduce-scatter).
      TpCollective forward_then, backward_then;
      // Under Strategy::tensor_overlap full with sequence parallelism, the start of the
      // pass that the tensor all-gather feeding the piece runs beside (LayerPiece's leads):
      // what follows it waits for the gather.
      Time lead_forward, lead_backward;
    };
    std::vector<Piece> pieces;
    int64_t expert_params = 0;  // of params: routed experts, sharded over the EP ranks
    // A selective recompute's share of the layer (StageProfile::recompute_time, summed), and
    // the collectives its re-run issues again (RecomputePart::tp_allreduces, exchanges), each
    // after an equal segment of it, or after recompute_leads[q] of it where that is given
    // (one per collective; the rest of the re-run follows the last).
    Time recompute;
    std::vector<TpCollective> tp_recompute;
    std::vector<Time> recompute_leads;
  };
  std::vector<LayerCost> layers;  // in forward order, for gradient buckets
};

// `recompute[g]`, when given, is global stage g's mode (Strategy::recompute_of); `tensor[g]`,
// when given, its tensor degree: a layer with a tensor_split then costs t x one rank's share
// of it (the lowering divides by t again), its activations are t x the split share plus
// the replicated part, and its collectives are the shard's.
//
// `groups`: context and expert parallelism (Strategy's fields): a layer with pieces then
// carries its collectives per piece (LayerCost::pieces), each sized for one rank of one
// micro-batch; a MoE layer's experts are priced at the expert degree and their time
// stretched by the routing imbalance (at most the capacity factor).
struct GroupDegrees {
  int context = 1, expert = 1;
  int expert_tensor = 1;  // Strategy::expert_tensor
  ContextComm context_comm = ContextComm::kP2p;
  double routing_imbalance = 1.0;
  bool dedup_dispatch = false;         // Strategy::dedup_dispatch
  bool shared_expert_overlap = false;  // Strategy::shared_expert_overlap
  // Strategy::tensor_overlap full: a generated layer's tensor collectives placed by its
  // pieces, beside the GEMMs Transformer Engine pairs them with (LayerPiece's leads and tail).
  bool tensor_pieces = false;
  // Stage replicas split each micro-batch's samples (DAPPLE): a replica's ops are priced at
  // its share, in sample_shards(replicas, micro_batch, round_robin) equal parts (0: samples
  // not known); under round robin (replicas_take_turns: PipeDream) each replica runs whole
  // micro-batches.
  int64_t micro_batch = 0;
  bool round_robin = false;
};
// `scope`: what a selective recompute re-runs and how many layers of each stage a full one
// checkpoints (Strategy::recompute_modules, Strategy::recompute_layers); how many layers of
// each stage a stage without a recompute offloads to host memory (Strategy::offload_layers),
// over a host link of `host_bytes_per_s` per direction (GpuSpec::host_bytes_per_s).
struct ActivationScope {
  RecomputeModules modules = kDefaultRecomputeModules;
  int layers = 0;
  int offload_layers = 0;
  double host_bytes_per_s = 0;
};
std::vector<StageProfile> stage_profiles(const Model& model, const std::vector<StageSpec>& stages,
                                         const std::vector<Recompute>& recompute = {},
                                         const std::vector<int>& tensor = {},
                                         bool sequence_parallel = false,
                                         const GroupDegrees& groups = {},
                                         const ActivationScope& scope = {});

// One GPU's share of a stage's activations for one micro-batch, as the lowering counts
// them on a stage of `replicas` replicas and tensor degree t: `held`, what F leaves
// allocated until the backward (with a recompute, what F keeps), and of that `weight`,
// what W still reads once B is done. With `samples` per micro-batch not a multiple of
// the replicas, the first replica's larger share (0: an even split). The zero-bubble
// schedules plan their memory limits with these numbers.
struct GpuActivation {
  int64_t held = 0, weight = 0;
};
// Under context parallelism each of the `context` ranks holds 1/context of the tokens.
GpuActivation gpu_activation(const StageProfile& sp, int replicas, int t, bool sequence_parallel,
                             bool recompute, int64_t samples = 0, int context = 1);

struct LoweringInput {
  SlotOrders orders;
  std::vector<StageProfile> stages;  // [global stage]; positions as position_of_stage says
  bool v_shape = false;              // zb-v's V (is_v_shape)
  // The devices of each copy's positions (core/placement.h), shared rather than copied
  // (a scenario's placement is thousands of lists at scale).
  std::shared_ptr<const Placement> placement;
  std::vector<int> tensor;            // [position] tensor-parallel degree; empty: 1
  bool sequence_parallel = false;     // activations split along the tensor group too
  TensorOverlap tensor_overlap = TensorOverlap::kNone;  // Strategy::tensor_overlap
  bool p2p_overlap = true;            // Strategy::p2p_overlap
  bool overlap_param_gather = false;  // Strategy::overlap_param_gather
  bool overlap_grad_reduce = true;    // Strategy::overlap_grad_reduce
  // [device] a fixed time added to every step the framework runs on it (its GPU's
  // launch_overhead): F, R, B and the optimizer step, and W where the schedule runs it as
  // a step of its own (SlotOrders::early_input_grad; otherwise it is part of B's
  // autograd call). Empty: none.
  std::vector<Time> launch_overhead;
  // Mixed GPUs and stragglers (SPEC section 10): global stage g's compute ops (F, R, B, W
  // and its optimizer step) take compute_scale(device, g) times their profile's time on
  // that device. Null: 1 everywhere.
  std::function<double(int device, int stage)> compute_scale;
  int num_devices = 0;
  int micro_batches_per_iteration = 1;  // M: Op::iteration = micro-batch / M
  // Samples per micro-batch: replicas split them into whole samples (0: in equal shares).
  int64_t micro_batch_samples = 0;
  ParamBytes param_bytes;
  int64_t gradient_bytes_per_param = 4;  // what the all-reduce moves per parameter
  std::vector<int> stashed_versions;     // [position] extra weight versions; may be empty
  std::vector<int64_t> reserved_bytes;   // [device], counted as "other"; may be empty
  std::vector<AllReduceAlgo> allreduce;  // [position]; empty: ring
  std::vector<int> device_node;          // [device] server, for hierarchical all-reduce
  // Gradients are all-reduced in buckets of about this many bytes (layers in backward
  // order), each as soon as its layers' last backward is done; <= 0: one per stage.
  int64_t bucket_bytes = 0;
  // Each all-reduced device keeps a separate buffer as big as its gradients ("other").
  bool bucket_buffers = false;
  int zero = 0;  // ZeRO stage 0-3 over each position's data-parallel devices
  // Context and expert parallelism: placement's copies are data x context pipelines, copy
  // c being context rank c % context of data copy c / context; context ranks take
  // 1/context of each micro-batch's work, activations and transfers. Expert groups are
  // `expert` consecutive members in the order copy x lanes + lane (consecutive copies, or
  // tensor ranks too where the expert degree exceeds the copies); a stage's routed experts
  // are sharded over them and their gradients reduced among the members holding the same
  // experts. Under expert tensor parallelism (`expert_tensor` e > 1, Megatron-Core's
  // expert layout) member m = (data x expert + expert rank) x e + expert-tensor rank: an
  // expert-tensor group is e consecutive members, an expert group `expert` members e
  // apart, and the experts' state is sharded over expert x e of them.
  int context = 1, expert = 1, expert_tensor = 1;
  bool user_order = false;  // a deadlock is the user's: InputError instead of an assertion
  // Ring collectives as CompactRing (TaskGraphBuilder::set_compact_rings).
  bool compact_rings = false;
  // The first `built_copies` copies alone, the others implicit (TaskGraph::built_copies;
  // 0: all). Needs compact rings, ring collectives (or hierarchical ones, each group of
  // copies filling whole servers), whole context and expert groups in each group of copies
  // built, and copies alike in their GPUs' pace and overhead (may_build_copies checks).
  int built_copies = 0;
};

// Whether `in` may be lowered with its copies taken `group` at a time, the others implicit:
// the conditions LoweringInput::built_copies names.
bool may_build_copies(const LoweringInput& in, int group);

// Whether copies taken `group` at a time fill whole servers that map onto each other
// (placement [copy][position][lane] -> device, device_node[device] -> server): the servers
// of copies 0..group-1 hold no GPU of another copy, and the map from copy c's GPUs to copy
// c + group's sends the GPUs of one server onto one server, a different one for each. Then
// a hierarchical collective's members on a server are all built or all implicit, and its
// servers in member order are the built ones', then their images'. `cyclic`: and on each
// position's servers, in their order, the map moves every server the same number of places
// on (an all-to-all's servers in cyclic order from the sender's, AllToAllImages).
bool fills_whole_servers(const Placement& placement, const std::vector<int>& device_node, int group,
                         bool cyclic = false);

// Whether one expert group holds every copy's members of a position with `lanes` GPUs a
// copy (expert tensor parallelism 1): then copies may be left implicit where each group of
// them fills whole servers, its all-to-alls reaching the implicit members through their
// images (AllToAllImages), with no expert gradients to reduce.
bool expert_group_spans_copies(const LoweringInput& in, int lanes);
// The same from the degrees alone (expert, expert_tensor, copies, a copy's lanes on the
// position): the planner's prediction of the fold asks it before any placement exists.
bool expert_group_spans_copies(int expert, int expert_tensor, int copies, int lanes);

TaskGraph lower(const LoweringInput& in);

}  // namespace pipesim
