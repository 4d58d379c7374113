// The planner's analytic cost of a strategy: cheap enough to cost hundreds of thousands of
// strategies a second, so the search can look everywhere and the simulator (the judge)
// only has to replay the few that look best.
//
// For S stages with per-micro-batch stage times t_s (F + B + W, / replicas), cut transfer
// times c_s (stage s to s + 1, on the real routes of a contiguous placement) and M
// micro-batches, an iteration of a flushing schedule costs
//
//   (M - 1) * block + sum_s t_s + 2 sum_s c_s + max(0, max_s (AR_s + opt_s - s * block))
//
// with block = max_s max(t_s, c_s) (the pivot stage or link sets the steady-state pace;
// DAPPLE's warm-up + steady + ending estimate), AR_s the stage's gradient all-reduce on its
// real group (overlapping the drain of the s stages before it) and opt_s its optimizer
// step. Schedules change the terms: recompute adds F to t_s; 1F1B with the shallow warm-up
// pays each hop's round trip in the steady state when it is not hidden; zero-bubble
// schedules fill the fill/drain with W; interleaved divides the fill/drain by v, and so
// does zb-v (two chunks in a V, each device's W filling its bubble, ZB-H1's memory per chunk).
// Memory per stage follows the schedule's in-flight micro-batches.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "planner/layer_comm.h"
#include "planner/network_costs.h"
#include "planner/plan_point.h"
#include "scenario/scenario.h"
#include "topology/placement.h"

namespace pipesim::planner {

struct Estimate {
  double iteration_s = 0;
  double block_s = 0;      // steady-state time per micro-batch
  double fill_s = 0;       // fill and drain
  double allreduce_s = 0;  // exposed gradient all-reduce and optimizer step
  int64_t peak_memory = 0;
  bool fits = true;
  double work = 0;  // simulation_work(): what simulating it would cost
  // The data-parallel copies `work` counts once, as they fold (CostModel::folded_copies);
  // where they do not after all, the simulation costs about this multiple of it.
  int folded_copies = 1;
};

// What an estimate takes from where a plan's stages are rather than from its schedule: per
// global stage its cut to the next (0 at zb-v's turn) and ZeRO-3's weight all-gather base (a
// ring all-reduce of its weights on its group; the estimate takes half of it per pass),
// per global stage its gradient all-reduce on its position's group (the ring under ZeRO,
// else the cheapest; one per chunk, as the lowering issues them), and the
// simulation work. A search computes them once for every schedule choice of a layout.
struct PlanTerms {
  const double* cut = nullptr;        // [g], g + 1 < G
  const double* gather = nullptr;     // [g], read under ZeRO 3 only
  const double* allreduce = nullptr;  // [g]
  double work = 0;
  // The busiest link's seconds per micro-batch under every cut of every copy, both ways
  // (NetworkCosts::cut_load): chunks that cross the same server NIC again and again, and
  // copies whose stages share a NIC, can go no faster than it.
  double link_load = 0;
  // [g]: how many times its group's NIC steps are slowed by other stages' groups
  // (processor sharing; the steady state's), null: 1. The fill and drain, where only some
  // positions run, take them unshared.
  const double* share = nullptr;
};

class CostModel {
 public:
  // `s` is the scenario at the micro-batch size the plans use (its layer costs, cluster,
  // training and precision). With `tensor` t > 1 a "replica" is a tensor group of t GPUs
  // (Megatron-LM's layout, as the lowering builds it): device indices, GPU counts and
  // strides below count groups, compute and weights divide by t, each op adds its layers'
  // all-reduces on the group, and Korthikanti's replicated activations stay whole.
  // `net`: the plan's shared network terms (a CostModel of its own when null); its
  // scenario must have `s`'s cluster and all-reduce choice.
  // `context` and `expert`: each GPU's share of every layer's tokens (1/context of its time
  // and activations) and of a MoE layer's experts (1/expert of their parameters; the
  // dispatch and combine all-to-alls on the critical path). `expert_tensor`: each expert
  // split over that many GPUs (1/(expert x expert_tensor) of the experts' parameters, the
  // gathered tokens' all-gather and reduce-scatter). These are the plan's degrees, not
  // `s.strategy`'s (the planner prices every plan on one scenario per micro-batch size).
  explicit CostModel(const Scenario& s, int tensor = 1, const NetworkCosts* net = nullptr,
                     int context = 1, int expert = 1, int expert_tensor = 1);
  int tensor() const { return t_; }

  const Scenario& scenario() const { return s_; }
  int layers() const { return static_cast<int>(f_.size()) - 1; }
  int64_t capacity() const { return capacity_; }
  int64_t reserved() const { return reserved_; }  // the largest cluster.gpu.reserved
  // A plan fits only if it leaves `share` of the smallest GPU's memory free (--headroom).
  void keep_free(double share) {
    capacity_ = static_cast<int64_t>((1 - share) * static_cast<double>(capacity_));
  }

  // Per micro-batch, seconds, for layers [first, last] on `replicas` GPUs.
  double stage_time(int first, int last, int replicas, const ScheduleTraits& t) const;
  // stage_time without the tensor all-reduces: a lower bound on the slowest stage of any
  // split of the layers over that many replicas.
  double compute_time(int first, int last, int replicas, const ScheduleTraits& t) const;
  // The W and F passes alone (replicas that take turns, ScheduleTraits::take_turns, run
  // whole micro-batches).
  double weight_time(int first, int last, int replicas, bool take_turns) const;
  // What a stage's work is divided by on its slowest replica: r when the replicas split
  // the micro-batch evenly, else b / ceil(b / r) (each replica takes whole samples).
  double split(int replicas) const;
  double forward_time(int first, int last, int replicas, bool take_turns) const;
  // The optimizer step of layers [first, last], sharded over `ranks` under ZeRO.
  double optimizer_time(int first, int last, int ranks = 1) const;
  // ZeRO-3's weight all-gathers of layers [first, last] per micro-batch (before the forward,
  // the backward and a full recompute: half a ring all-reduce each) on the stage's group;
  // 0 below stage 3. They prefetch on the network while the stage computes, so a stage's
  // time per micro-batch is the larger of the two.
  double zero_gather_time(int g, int r, int stride, int first, int last,
                          const ScheduleTraits& t) const;
  // Peak bytes of one replica of stage s (of S) for M micro-batches.
  int64_t stage_memory(int first, int last, int replicas, int s, int S, int64_t M,
                       const ScheduleTraits& t) const;
  // The same in two steps: what one GPU of the stage holds whatever its place in the
  // pipeline (parameter state, a micro-batch's activations), then at stage s of S.
  struct StageBytes {
    double params = 0;  // parameters on one GPU
    double state = 0;   // their resident state (ZeRO-sharded weights, gradients, optimizer)
    double act = 0;     // a micro-batch's activations
    double kept = 0;    // under a recompute: what it keeps of them, and its working set
    double working = 0;
    double weight = 0;  // without: what W reads of them
  };
  StageBytes stage_bytes(int first, int last, int replicas, const ScheduleTraits& t) const;
  int64_t stage_memory(const StageBytes& b, int s, int S, int64_t M, const ScheduleTraits& t) const;
  int64_t output_bytes(int last) const { return out_[static_cast<size_t>(last)]; }
  // Transfer of `bytes` from the stage on devices [g0, g0 + r0) to the one on [g1, g1 + r1),
  // each replica pair moving the samples they share; the busiest link or NIC sets the pace.
  double cut_time(int g0, int r0, int g1, int r1, int64_t bytes) const;
  // Gradient all-reduce of layers [first, last] among replicas [g, g + r) of `data` copies
  // `stride` devices apart, the cheapest algorithm.
  // `ring`: ring only, as ZeRO's reduce-scatter + all-gather move the gradients.
  double allreduce_time(int g, int r, int data, int stride, int first, int last,
                        bool ring = false) const {
    return allreduce_bytes_time(g, r, data, stride, gradient_bytes(first, last), ring);
  }
  double allreduce_bytes_time(int g, int r, int data, int stride, int64_t bytes,
                              bool ring = false) const;
  int64_t gradient_bytes(int first, int last) const;

  // The whole plan, placed contiguously (copy by copy, stage by stage), or on `placed`
  // (as PlanPoint::devices gives) for its cuts and all-reduces. `memory`: as below.
  Estimate estimate(const PlanPoint& p, int64_t micro_batches, const Placement* placed = nullptr,
                    int64_t memory = -1) const;
  // The same from the plan's terms (cut_terms, gather_terms and allreduce_terms of it or of
  // a plan with the same stages, replicas, data degree and chunk layout).
  // `memory`: memory(p, M) when the caller has it already (else -1).
  Estimate estimate(const PlanPoint& p, int64_t micro_batches, const PlanTerms& terms,
                    int64_t memory = -1) const;
  // Per global cut its time (every copy's cut at once); returns PlanTerms::link_load.
  double cut_terms(const PlanPoint& p, const Placement* placed, std::vector<double>& out) const;
  void gather_terms(const PlanPoint& p, const Placement* placed, std::vector<double>& out) const;
  // `share` (optional): PlanTerms::share.
  void allreduce_terms(const PlanPoint& p, const Placement* placed, bool ring,
                       std::vector<double>& out, std::vector<double>* share = nullptr) const;
  // Whether the plan fits in memory: estimate(p, M).fits, without the time terms.
  bool fits(const PlanPoint& p, int64_t micro_batches) const;
  // estimate(p, M).peak_memory alone.
  int64_t memory(const PlanPoint& p, int64_t micro_batches) const;
  // A lower bound on estimate(p, M).iteration_s from the stages' compute alone, without the
  // network: max(0, M - 2) times the busiest position's stage times per micro-batch (every
  // schedule's steady state paces at least that, and its fill, drain and tail add to it).
  double time_bound(const PlanPoint& p, int64_t micro_batches) const;
  // The busiest position's stage times per micro-batch (time_bound's factor). They read of
  // the schedule only its recompute, whether W is split off, sequence parallelism and
  // whether replicas take turns (stage_time_key: equal keys, equal times).
  double busiest_position(const PlanPoint& p) const;
  static int stage_time_key(const ScheduleTraits& t);
  // About how much work simulating the plan takes (ops, plus all-reduce transfers weighted
  // by their group size, which sets how many flows share each re-rating); twice that on
  // GPUs of different speeds, where the judge also simulates the split balanced by speed.
  double simulation_work(const PlanPoint& p, int64_t micro_batches) const;
  // The same with every copy simulated.
  double simulation_work_per_copy(const PlanPoint& p, int64_t micro_batches) const;
  // How many identical data-parallel copies simulation_work counts as one (1: none).
  int folded_copies(const PlanPoint& p) const;
  // The compute-balanced cut into `stages` (schedules/partition.h), computed once.
  const std::vector<StageSpec>& balanced(int stages) const;

 private:
  const Scenario& s_;
  int t_ = 1;
  int per_node_ = 0;  // GPUs of server 0
  // folded_copies by the plan's layout and placement, and each device's network port
  // (shared by copies of the model, safe from several threads).
  struct Folds {
    std::mutex mutex;
    std::map<std::vector<int>, int> counts;
    std::vector<int> ports;
  };
  std::shared_ptr<Folds> folds_ = std::make_shared<Folds>();
  bool whole_groups(const PlanPoint& p, int copies, int g, bool& spans) const;
  int copies_folded_in_order(const PlanPoint& p, int copies) const;
  int copies_folded(const PlanPoint& p, int copies) const;
  std::vector<double> f_, b_, w_, opt_;  // prefix sums, seconds
  std::vector<double> rf_;               // forward of the layers a full recompute re-runs
  // The layers' collectives on their tensor and expert groups, prefix sums per micro-batch
  // (LayerComm's terms): tensor all-reduces (rfwd: of the layers a full recompute re-runs;
  // beside_sp: with sequence parallelism, only the reduce-scatter beside dW); under
  // `tensor_overlap: full` with sequence parallelism what they leave past the GEMMs they run
  // beside (full_rfwd: a full recompute's forward again; full_bwd_split: the backward of a
  // zero-bubble schedule, W deferred); [layer] edge_fwd / edge_bwd, what a pass starting
  // there gains wrongly from that pairing (the all-gather beside its first lead is the layer
  // before's); expert all-to-alls (a2a_rf: of the layers a full recompute re-runs); what a
  // selective recompute's modules issue again (RecomputePart::tp_allreduces), as shares of
  // the forward's terms (LayerRerun): sel_whole without sequence parallelism, sel_split with
  // it, full_sel under `full` with it, a2a_sel the exchanges of the MoE blocks `moe` re-runs.
  struct CommSums {
    std::vector<double> tp_fwd, tp_rfwd, tp_bwd, beside, beside_sp, full_fwd, full_rfwd, full_bwd,
        full_bwd_split, edge_fwd, edge_bwd, a2a, a2a_rf, sel_whole, sel_split, full_sel, a2a_sel;
    explicit CommSums(size_t layers);
    void add(size_t l, const LayerComm& c, bool recomputed, const LayerRerun& rerun);
  };
  CommSums comm_{0};
  // f_, b_, w_ and rf_ with each layer priced at one replica's share of the samples, where a
  // stage's replicas split each micro-batch k ways (k from 2 to at most its samples:
  // splits_[k - 2]) and the layer can be priced again (Layer::at_degrees, as stage_profiles
  // prices it), and the collectives as k replicas issue them (each its own latency, its
  // share of the bytes: LayerCommCosts::of); empty when neither changes.
  struct SplitSums {
    std::vector<double> f, b, w, rf;
    CommSums comm{0};
  };
  std::vector<SplitSums> splits_;
  void price_splits(const LayerCommCosts& comm, int context, int expert, int expert_tensor);
  // The sums a stage of `replicas` replicas runs at (null: f_, b_, w_, rf_ and comm_).
  const SplitSums* split_sums(int replicas) const;
  // What selective recompute re-runs (core_, core_bytes_ what it frees, core_repl_ of those
  // whole on every tensor rank); ops run whole without sequence parallelism (whole_rf_: of
  // the layers a full recompute re-runs; whole_sel_: of the modules a selective one does).
  std::vector<double> core_, whole_, whole_rf_, whole_sel_;
  std::vector<int64_t> act_, params_, out_, kept_full_, kept_split_, core_bytes_, core_repl_, repl_;
  // Of core_bytes_, what a rank holds whole under sequence parallelism (Layer::held_whole).
  std::vector<int64_t> held_sp_;
  std::vector<int64_t> weight_act_, weight_repl_;  // Layer::weight_kept, its replicated part
  std::vector<int64_t> repl_params_;               // parameters whole on every tensor rank
  std::vector<int> tied_;                          // the layers with tied weights (Layer::tied_to)
  // Parameters of layers [first, last] as one stage holds them (Model::stage_params).
  int64_t params(int first, int last) const;
  std::vector<int64_t> rings_;  // prefix sums of tensor all-reduces per micro-batch (F twice)
  // Prefix sums of what each GPU's context and expert exchanges add per micro-batch: an op
  // per exchange and the cut of the op it splits (cost_model_sums.cc, exchange_ops).
  std::vector<double> exchange_ops_;
  int cp_ = 1;  // context ranks: each stage's GPUs are replicas x t x cp
  // GPUs of different speeds: the judge simulates a plan twice (its split and the one
  // balanced by speed, Judge::speed_balanced).
  bool uneven_speed_ = false;
  int64_t max_layer_act_ = 0, max_core_ = 0;
  int64_t capacity_ = 0, reserved_ = 0;
  double launch_ = 0;  // the largest GPU launch_overhead, seconds per step
  // Device 0's comm_interference x where the tensor group sits in a server and overlaps its
  // collectives (else 0): a collective beside compute leaves at least x of its time.
  double slow_ = 0;
  ParamBytes pb_;
  std::unique_ptr<NetworkCosts> own_net_;
  const NetworkCosts* net_;
  mutable std::map<int, std::vector<StageSpec>> balanced_;
  // The largest per-GPU memory of any position (its chunks together).
  // Past `above`, it may stop at the first position over it and return that position's.
  int64_t peak_memory(const PlanPoint& p, int64_t micro_batches, const ScheduleTraits& t,
                      int64_t above = std::numeric_limits<int64_t>::max()) const;
  // One GPU's share of `bytes` of activations: replicas split the samples, a tensor group
  // all but the `replicated` part (that too under sequence parallelism).
  double gpu_share(double bytes, double replicated, int replicas, const ScheduleTraits& t) const;
  // The bytes one GPU keeps for a micro-batch from its forward to its backward (by
  // recompute: every activation, all but the attention core, or the layers' inputs).
  double kept_bytes(int first, int last, int replicas, const ScheduleTraits& t) const;
  // The activations a recompute allocates again for one layer at a time (0 without one).
  double working_set(int replicas, const ScheduleTraits& t) const;
  // An estimate's parts: per position one micro-batch's terms; the all-reduce and optimizer
  // step exposed after the last backward, its chunk blocks `block` long.
  struct PositionTerms;
  void position_terms(const PlanPoint& p, const ScheduleTraits& t, const PlanTerms& terms,
                      PositionTerms& out) const;
  double allreduce_tail(const PlanPoint& p, const ScheduleTraits& t, const PlanTerms& terms,
                        double block) const;
  // Per global stage: `bytes(stage)` all-reduced on its position's group (the ring when
  // `ring`, else the cheapest), contiguous or on `placed`.
  void stage_group_terms(const PlanPoint& p, const Placement* placed, bool ring,
                         const std::function<int64_t(const StageSpec&)>& bytes,
                         std::vector<double>& out, std::vector<double>* share = nullptr) const;
};

}  // namespace pipesim::planner
