// The TaskGraph: the one representation of a training iteration that every backend
// shares (simulator, CUDA executor, `pipesim order`, trace writer).
//
// A flat vector of ops, their dependencies (CSR), and per device the order in which its
// compute stream runs its compute ops. An op starts when the previous op of its stream has
// ended and all its deps have ended. Transfers belong to no compute stream: they run on
// the links between their two devices as soon as their deps are done.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/checked.h"
#include "core/huge_pages.h"
#include "core/pod_array.h"
#include "core/placement.h"
#include "core/time.h"

namespace pipesim {

enum class OpKind : uint8_t {
  kForward,     // F
  kBackward,    // B: the whole backward, or its input-gradient half when split
  kWeightGrad,  // W: the weight-gradient half of a split backward
  kRecompute,   // R: forward re-run before a backward
  kOptimizer,   // optimizer step at the end of an iteration
  kTransfer,    // point-to-point activation or gradient transfer (link time only)
};

bool is_compute(OpKind k);
char op_letter(OpKind k);  // F B W R O T

enum class MemCategory : uint8_t {
  kWeights,
  kGradients,
  kOptimizer,
  kActivations,
  kStashedWeights,
  kOther
};
inline constexpr int kMemCategories = 6;
const char* to_string(MemCategory c);
using MemBreakdown = std::array<int64_t, kMemCategories>;

using OpId = uint32_t;

// What a transfer carries.
enum class CommKind : uint8_t {
  kNone,
  kActivation,
  kGradient,
  kAllReduce,
  kReduceScatter,  // sequence parallelism, ZeRO gradients
  kAllGather,      // sequence parallelism, ZeRO parameters, context parallelism's keys and values
  kAllToAll,       // expert parallelism's token dispatch and combine, Ulysses attention
};
const char* to_string(CommKind c);
// A step of a collective among a group (all-reduce, reduce-scatter, all-gather), as opposed
// to a pipeline transfer between neighbouring stages.
inline bool is_collective(CommKind c) {
  return c == CommKind::kAllReduce || c == CommKind::kReduceScatter || c == CommKind::kAllGather ||
         c == CommKind::kAllToAll;
}

struct Op {
  OpKind kind = OpKind::kForward;
  MemCategory mem_category = MemCategory::kActivations;
  CommKind comm = CommKind::kNone;
  int16_t chunk = 0;         // model chunk (interleaved schedules); 0 otherwise
  int16_t part = 0;          // piece of a backward split at gradient-bucket boundaries
  int32_t device = -1;       // compute device; for a transfer, the sender
  int32_t peer = -1;         // for a transfer, the receiver
  int32_t stage = -1;        // global pipeline stage
  int32_t micro_batch = -1;  // global index: iteration * M + m
  int32_t iteration = 0;
  Time duration;             // compute ops
  int64_t bytes = 0;         // transfers
  int64_t mem_at_start = 0;  // memory delta applied on `device` when the op starts
  int64_t mem_at_end = 0;    // ... and when it ends
};

// A transfer of `bytes` from device `src` to `dst` (link time only, no memory effect).
Op transfer_op(int src, int dst, int64_t bytes, CommKind comm, int stage, int micro_batch,
               int iteration);

// A ring collective kept compact (TaskGraphBuilder::set_compact_rings): `steps` rounds in
// which each of its n members sends `chunk` bytes to the next once it has received the
// previous round's. Member i is op first + i, a transfer from the member to the next one
// carrying all it sends (steps * chunk bytes), with the member's ready ops as deps: it
// starts with the member's first send and ends when the member's last receive arrives.
// The engine runs every step as its own flow, exactly as the expanded transfers would run.
//
// A ring among copies the graph leaves implicit (TaskGraph::built_copies) holds the ops of
// its built copies' members only (`held` of its n; 0: all), the last of them sending to
// the GPU of the first member's image in the next copy (sim/copies.h).
struct CompactRing {
  OpId first = 0;
  uint32_t n = 0;
  uint32_t steps = 0;
  int64_t chunk = 0;
  uint32_t held = 0;
  uint32_t members() const { return held == 0 ? n : held; }
};

struct CopyFold;  // sim/copies.h

class TaskGraph {
 public:
  size_t size() const { return ops_.size(); }
  const Op& op(OpId id) const { return ops_[id]; }
  std::span<const Op> ops() const { return ops_; }
  std::span<const OpId> deps(OpId id) const {
    return {deps_.data() + dep_begin_[id], dep_begin_[id + 1] - dep_begin_[id]};
  }
  std::span<const OpId> successors(OpId id) const {
    return {succ_.data() + succ_begin_[id], succ_begin_[id + 1] - succ_begin_[id]};
  }
  int num_devices() const { return static_cast<int>(stream_begin_.size()) - 1; }
  // Compute ops of `device` in the order its stream runs them.
  std::span<const OpId> stream(int device) const {
    const auto d = static_cast<size_t>(device);
    return {stream_ops_.data() + stream_begin_[d], stream_begin_[d + 1] - stream_begin_[d]};
  }
  // Resident from the start: weights, gradients, optimizer state, reserved memory.
  const MemBreakdown& static_memory(int device) const {
    return static_memory_[static_cast<size_t>(device)];
  }
  size_t num_deps() const { return deps_.size(); }
  // Compact ring collectives, in order of their first member op.
  std::span<const CompactRing> rings() const { return rings_; }
  // Data-parallel copies the graph was built from (TaskGraphBuilder::set_copies): device i
  // of copy c is copy_devices(c)[i]; 1 where the builder did not say. A claim the engine
  // checks before it simulates one copy for all (sim/copies.h), never a promise.
  int copies() const { return copies_; }
  // The copies whose ops the graph holds: all of them, or the first few alone where the
  // others are left implicit (the engine simulates those first copies for all; nothing
  // else may run such a graph).
  int built_copies() const { return built_copies_ == 0 ? copies_ : built_copies_; }
  std::span<const int32_t> copy_devices(int c) const {
    const size_t n = copy_devices_.size() / static_cast<size_t>(copies_);
    return {copy_devices_.data() + static_cast<size_t>(c) * n, n};
  }
  // Every copy's devices, copy after copy (copy c's are copy_devices(c)).
  std::span<const int32_t> copy_devices() const { return copy_devices_; }

  // The fold sim/copies.h found for this graph on the cluster of `revision`
  // (Cluster::revision), kept by whoever found it (lower_folded) so that the engine does
  // not look for it again; null for any other cluster.
  void keep_fold(std::shared_ptr<const CopyFold> fold, uint64_t revision) {
    fold_ = std::move(fold);
    fold_revision_ = revision;
  }
  std::shared_ptr<const CopyFold> kept_fold(uint64_t revision) const {
    return fold_ && revision == fold_revision_ ? fold_ : nullptr;
  }

  // Checks the graph: deps in range, every compute op in exactly one stream and on its own
  // device, no transfer in a stream, and no cycle through deps and stream order (which would
  // be a deadlock). Returns a description of the first problem, naming the ops of a cycle.
  std::optional<std::string> validate() const;

  // "dev1:F3" style name for messages.
  std::string describe(OpId id) const;

 private:
  // validate()'s parts: the streams and every op's fields (filling, per compute op, the op
  // after it in its stream); and, where Kahn's algorithm left ops with `indeg` > 0, one
  // cycle among them.
  std::optional<std::string> check_ops(std::vector<OpId>& stream_next) const;
  std::string deadlock(const std::vector<OpId>& stream_next,
                       const std::vector<uint32_t>& indeg) const;

  friend class TaskGraphBuilder;
  PodArray<Op> ops_;
  std::vector<uint32_t> dep_begin_{0}, succ_begin_{0};
  std::vector<OpId> deps_, succ_;
  std::vector<uint32_t> stream_begin_{0};
  std::vector<OpId> stream_ops_;
  std::vector<MemBreakdown> static_memory_;
  std::vector<CompactRing> rings_;
  int copies_ = 1;
  int built_copies_ = 0;
  std::vector<int32_t> copy_devices_;  // [copy * devices per copy + i]
  std::shared_ptr<const CopyFold> fold_;
  uint64_t fold_revision_ = 0;
};

class TaskGraphBuilder {
 public:
  explicit TaskGraphBuilder(int num_devices);
  OpId add(const Op& op);  // compute ops are appended to their device's stream in call order
  const Op& op(OpId id) const { return ops_[id]; }
  size_t size() const { return ops_.size(); }
  // Lengthens a compute op (a fixed cost per op, LoweringInput::launch_overhead).
  void add_duration(OpId id, Time extra) {
    ops_[id].duration = checked_add(ops_[id].duration, extra, "an op's time");
  }
  // Compute ops of `device` in stream order so far.
  const std::vector<OpId>& stream(int device) const {
    return streams_[static_cast<size_t>(device)];
  }
  void add_dep(OpId op, OpId dep);
  void add_static_memory(int device, MemCategory c, int64_t bytes);
  void add_static_memory(int device, const MemBreakdown& bytes);  // every category's
  void reserve(size_t ops, size_t deps);
  // Whether collectives add their rings as CompactRing (O(n) ops) instead of one transfer
  // per step and member (O(n * steps)). The engine's results are the same either way;
  // backends other than the engine need the expanded form.
  void set_compact_rings(bool on) { compact_rings_ = on; }
  bool compact_rings() const { return compact_rings_; }
  // Registers ops ring.first .. ring.first + n - 1 (just added, in member order) as a ring.
  void add_ring(const CompactRing& ring);
  // The graph repeats one pattern on each copy of `placement` (data-parallel copies: a
  // copy's devices position by position, lane by lane, every copy as long), its ops added
  // copy by copy in the same order (TaskGraph::copies).
  void set_copies(const Placement& placement, int built = 0);
  // The copies' devices as set_copies laid them out, copy after copy (empty before).
  std::span<const int32_t> copy_devices() const { return copy_devices_; }
  TaskGraph build() &&;

 private:
  int num_devices_;
  bool compact_rings_ = false;
  std::vector<CompactRing> rings_;
  int copies_ = 1;
  int built_copies_ = 0;
  std::vector<int32_t> copy_devices_;
  PodArray<Op> ops_;
  struct Edge {
    OpId op, dep;
  };
  PodArray<Edge> edges_;
  std::vector<std::vector<OpId>> streams_;
  std::vector<MemBreakdown> static_memory_;
};

}  // namespace pipesim
