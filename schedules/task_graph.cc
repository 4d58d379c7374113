#include "schedules/task_graph.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/checked.h"
#include "core/error.h"

namespace pipesim {

bool is_compute(OpKind k) {
  return k != OpKind::kTransfer;
}

char op_letter(OpKind k) {
  switch (k) {
    case OpKind::kForward:
      return 'F';
    case OpKind::kBackward:
      return 'B';
    case OpKind::kWeightGrad:
      return 'W';
    case OpKind::kRecompute:
      return 'R';
    case OpKind::kOptimizer:
      return 'O';
    case OpKind::kTransfer:
      return 'T';
  }
  return '?';
}

const char* to_string(CommKind c) {
  switch (c) {
    case CommKind::kNone:
      return "none";
    case CommKind::kActivation:
      return "activation";
    case CommKind::kGradient:
      return "gradient";
    case CommKind::kAllReduce:
      return "allreduce";
    case CommKind::kReduceScatter:
      return "reduce-scatter";
    case CommKind::kAllGather:
      return "all-gather";
    case CommKind::kAllToAll:
      return "all-to-all";
  }
  return "?";
}

const char* to_string(MemCategory c) {
  switch (c) {
    case MemCategory::kWeights:
      return "weights";
    case MemCategory::kGradients:
      return "gradients";
    case MemCategory::kOptimizer:
      return "optimizer";
    case MemCategory::kActivations:
      return "activations";
    case MemCategory::kStashedWeights:
      return "stashed_weights";
    case MemCategory::kOther:
      return "other";
  }
  return "?";
}

Op transfer_op(int src, int dst, int64_t bytes, CommKind comm, int stage, int micro_batch,
               int iteration) {
  Op t;
  t.kind = OpKind::kTransfer;
  t.mem_category = MemCategory::kOther;
  t.comm = comm;
  t.device = src;
  t.peer = dst;
  t.stage = stage;
  t.micro_batch = micro_batch;
  t.iteration = iteration;
  t.bytes = bytes;
  return t;
}

std::string TaskGraph::describe(OpId id) const {
  const Op& o = ops_[id];
  if (o.kind == OpKind::kTransfer) {
    return fmt::format("transfer dev{}->dev{} (stage {}, micro-batch {})", o.device, o.peer,
                       o.stage, o.micro_batch);
  }
  if (o.kind == OpKind::kOptimizer) return fmt::format("dev{}:optimizer", o.device);
  return fmt::format("dev{}:{}{}{}", o.device, op_letter(o.kind), o.micro_batch,
                     o.chunk > 0 ? fmt::format(".c{}", o.chunk) : "");
}

std::optional<std::string> TaskGraph::validate() const {
  const size_t n = ops_.size();
  std::vector<OpId> stream_next;  // the op after each compute op in its stream
  if (auto problem = check_ops(stream_next)) return problem;
  // Kahn's algorithm over deps plus stream order.
  std::vector<uint32_t> indeg;
  reserve_huge(indeg, n);
  indeg.assign(n, 0);
  for (OpId id = 0; id < n; ++id) {
    indeg[id] += static_cast<uint32_t>(deps(id).size());
    if (stream_next[id] != UINT32_MAX) ++indeg[stream_next[id]];
  }
  std::vector<OpId> ready;
  for (OpId id = 0; id < n; ++id) {
    if (indeg[id] == 0) ready.push_back(id);
  }
  size_t done = 0;
  while (!ready.empty()) {
    const OpId id = ready.back();
    ready.pop_back();
    ++done;
    for (OpId s : successors(id)) {
      if (--indeg[s] == 0) ready.push_back(s);
    }
    if (stream_next[id] != UINT32_MAX && --indeg[stream_next[id]] == 0)
      ready.push_back(stream_next[id]);
  }
  if (done == n) return std::nullopt;
  return deadlock(stream_next, indeg);
}

std::optional<std::string> TaskGraph::check_ops(std::vector<OpId>& stream_next) const {
  const size_t n = ops_.size();
  std::vector<bool> in_stream(n, false);
  reserve_huge(stream_next, n);
  stream_next.assign(n, UINT32_MAX);
  for (int d = 0; d < num_devices(); ++d) {
    const auto st = stream(d);
    for (size_t i = 0; i < st.size(); ++i) {
      const OpId id = st[i];
      if (id >= n) return fmt::format("stream of dev{} names op {} which does not exist", d, id);
      if (in_stream[id]) return fmt::format("{} appears twice in stream orders", describe(id));
      if (!is_compute(ops_[id].kind))
        return fmt::format("{} is a transfer but sits in a compute stream", describe(id));
      if (ops_[id].device != d)
        return fmt::format("{} sits in the stream of dev{}", describe(id), d);
      in_stream[id] = true;
      if (i + 1 < st.size()) stream_next[id] = st[i + 1];
    }
  }
  for (OpId id = 0; id < n; ++id) {
    const Op& o = ops_[id];
    if (is_compute(o.kind) && !in_stream[id])
      return fmt::format("{} is in no stream", describe(id));
    if (o.kind == OpKind::kTransfer &&
        (o.peer < 0 || o.peer >= num_devices() || o.device == o.peer)) {
      return fmt::format("{} has a bad receiver", describe(id));
    }
    if (o.device < 0 || o.device >= num_devices()) return fmt::format("op {} is on no device", id);
    for (OpId dep : deps(id)) {
      if (dep >= n || dep == id)
        return fmt::format("{} has a bad dependency {}", describe(id), dep);
    }
  }
  return std::nullopt;
}

// A deadlock: walk "waits for" edges among the ops that never became ready until one
// repeats; that loop is the cycle to show.
std::string TaskGraph::deadlock(const std::vector<OpId>& stream_next,
                                const std::vector<uint32_t>& indeg) const {
  const size_t n = ops_.size();
  std::vector<OpId> stream_prev(n, UINT32_MAX);
  for (OpId id = 0; id < n; ++id) {
    if (stream_next[id] != UINT32_MAX) stream_prev[stream_next[id]] = id;
  }
  auto blocker = [&](OpId id) -> OpId {
    if (stream_prev[id] != UINT32_MAX && indeg[stream_prev[id]] > 0) return stream_prev[id];
    for (OpId dep : deps(id)) {
      if (indeg[dep] > 0) return dep;
    }
    return UINT32_MAX;
  };
  OpId start = 0;
  while (indeg[start] == 0) ++start;
  std::vector<int> seen_at(n, -1);
  std::vector<OpId> path;
  OpId cur = start;
  while (cur != UINT32_MAX && seen_at[cur] < 0) {
    seen_at[cur] = static_cast<int>(path.size());
    path.push_back(cur);
    cur = blocker(cur);
  }
  PIPESIM_ASSERT(cur != UINT32_MAX, "every op left after Kahn's algorithm waits on another");
  std::string cycle;
  for (size_t i = static_cast<size_t>(seen_at[cur]); i < path.size(); ++i) {
    cycle += describe(path[i]) + " waits for ";
  }
  cycle += describe(cur);
  return fmt::format("deadlock: {}", cycle);
}

TaskGraphBuilder::TaskGraphBuilder(int num_devices)
    : num_devices_(num_devices),
      streams_(static_cast<size_t>(num_devices)),
      static_memory_(static_cast<size_t>(num_devices), MemBreakdown{}) {}

void TaskGraphBuilder::reserve(size_t ops, size_t deps) {
  ops_.reserve(ops);
  edges_.reserve(deps);
}

void TaskGraphBuilder::add_ring(const CompactRing& ring) {
  PIPESIM_ASSERT(ring.n >= 2 && ring.steps >= 1 && ring.members() <= ring.n &&
                     ring.first + ring.members() == ops_.size() &&
                     (rings_.empty() || rings_.back().first + rings_.back().members() <= ring.first),
                 "a ring's members are the last ops added");
  rings_.push_back(ring);
}

void TaskGraphBuilder::set_copies(const Placement& placement, int built) {
  copies_ = std::max<int>(1, static_cast<int>(placement.size()));
  built_copies_ = built;
  copy_devices_.clear();
  size_t per = 0;
  for (const auto& pos : placement.front()) per += pos.size();
  copy_devices_.reserve(per * placement.size());
  for (const auto& copy : placement) {
    for (const auto& pos : copy) {
      for (const int d : pos) {
        PIPESIM_ASSERT(d >= 0 && d < num_devices_, "copy device out of range");
        copy_devices_.push_back(d);
      }
    }
    PIPESIM_ASSERT(copy_devices_.size() == per * static_cast<size_t>(&copy - placement.data() + 1),
                   "copies of one size");
  }
  if (copy_devices_.empty()) copies_ = 1;
  PIPESIM_ASSERT(built_copies_ >= 0 && built_copies_ <= copies_ && copies_ % std::max(1, built_copies_) == 0,
                 "whole groups of copies built");
}

OpId TaskGraphBuilder::add(const Op& op) {
  PIPESIM_ASSERT(op.device >= 0 && op.device < num_devices_, "op device out of range");
  const auto id = static_cast<OpId>(ops_.size());
  ops_.push_back(op);
  if (is_compute(op.kind)) streams_[static_cast<size_t>(op.device)].push_back(id);
  return id;
}

void TaskGraphBuilder::add_dep(OpId op, OpId dep) {
  edges_.push_back({op, dep});
}

void TaskGraphBuilder::add_static_memory(int device, MemCategory c, int64_t bytes) {
  auto& slot = static_memory_[static_cast<size_t>(device)][static_cast<size_t>(c)];
  slot = checked_add(slot, bytes, "a device's resident memory");
}

void TaskGraphBuilder::add_static_memory(int device, const MemBreakdown& bytes) {
  auto& to = static_memory_[static_cast<size_t>(device)];
  for (size_t c = 0; c < to.size(); ++c)
    to[c] = checked_add(to[c], bytes[c], "a device's resident memory");
}

TaskGraph TaskGraphBuilder::build() && {
  TaskGraph g;
  const size_t n = ops_.size();
  // Counting sort of the edge list into two CSR arrays (deps and successors).
  reserve_huge(g.dep_begin_, n + 1);
  reserve_huge(g.succ_begin_, n + 1);
  g.dep_begin_.assign(n + 1, 0);
  g.succ_begin_.assign(n + 1, 0);
  for (const auto& [op, dep] : edges_) {
    PIPESIM_ASSERT(op < n && dep < n, "dependency on an op that does not exist");
    ++g.dep_begin_[op + 1];
    ++g.succ_begin_[dep + 1];
  }
  for (size_t i = 0; i < n; ++i) {
    g.dep_begin_[i + 1] += g.dep_begin_[i];
    g.succ_begin_[i + 1] += g.succ_begin_[i];
  }
  reserve_huge(g.deps_, edges_.size());
  reserve_huge(g.succ_, edges_.size());
  g.deps_.resize(edges_.size());
  g.succ_.resize(edges_.size());
  // Each op's begin serves as its fill cursor, which ends at the next op's begin; one
  // shift then restores the begins.
  for (const auto& [op, dep] : edges_) {
    g.deps_[g.dep_begin_[op]++] = dep;
    g.succ_[g.succ_begin_[dep]++] = op;
  }
  for (size_t i = n; i > 0; --i) {
    g.dep_begin_[i] = g.dep_begin_[i - 1];
    g.succ_begin_[i] = g.succ_begin_[i - 1];
  }
  g.dep_begin_[0] = 0;
  g.succ_begin_[0] = 0;
  g.stream_begin_.reserve(streams_.size() + 1);
  g.stream_begin_.assign(1, 0);
  size_t stream_ops = 0;
  for (const auto& s : streams_) stream_ops += s.size();
  reserve_huge(g.stream_ops_, stream_ops);
  for (const auto& s : streams_) {
    g.stream_ops_.insert(g.stream_ops_.end(), s.begin(), s.end());
    g.stream_begin_.push_back(static_cast<uint32_t>(g.stream_ops_.size()));
  }
  g.ops_ = std::move(ops_);
  g.static_memory_ = std::move(static_memory_);
  g.rings_ = std::move(rings_);
  g.copies_ = copies_;
  g.built_copies_ = built_copies_;
  g.copy_devices_ = std::move(copy_devices_);
  return g;
}

}  // namespace pipesim
