#include "sim/engine.h"

#include "core/error.h"
#include "sim/event_queue.h"

namespace pipesim {
namespace {

class Engine {
 public:
  Engine(const TaskGraph& g, const Cluster& c, const SimOptions& o)
      : graph_(g), cluster_(c), options_(o) {
    const size_t n = g.size();
    PIPESIM_ASSERT(g.num_devices() == c.num_devices(), "TaskGraph built for this cluster");
    tl_.start.assign(n, Time::max());
    tl_.end.assign(n, Time::max());
    tl_.devices.resize(static_cast<size_t>(c.num_devices()));
    tl_.links.resize(static_cast<size_t>(c.num_links()) * 2);
    link_active_.assign(tl_.links.size(), 0);
    link_since_.assign(tl_.links.size(), Time::zero());
    waiting_.resize(n);
    routes_.assign(n, nullptr);
    for (OpId id = 0; id < n; ++id) waiting_[id] = static_cast<uint32_t>(g.deps(id).size());
    cursor_.assign(static_cast<size_t>(c.num_devices()), 0);
    running_.assign(static_cast<size_t>(c.num_devices()), false);
    memory_.resize(static_cast<size_t>(c.num_devices()));
    queue_.reserve(static_cast<size_t>(c.num_devices()) * 2 + 64);
  }

  Timeline run() {
    for (int d = 0; d < cluster_.num_devices(); ++d) {
      auto& mem = memory_[static_cast<size_t>(d)];
      mem = graph_.static_memory(d);
      note_memory(d, Time::zero(), UINT32_MAX);
    }
    for (OpId id = 0; id < graph_.size(); ++id) {
      if (waiting_[id] == 0 && graph_.op(id).kind == OpKind::kTransfer)
        start_transfer(id, Time::zero());
    }
    for (int d = 0; d < cluster_.num_devices(); ++d) try_start_head(d, Time::zero());

    Time now = Time::zero();
    while (!queue_.empty()) {
      const Event e = queue_.pop();
      PIPESIM_ASSERT(e.time >= now, "time never goes backwards");
      now = e.time;
      ++tl_.events;
      finish(e.payload, now);
    }
    for (OpId id = 0; id < graph_.size(); ++id) {
      PIPESIM_ASSERT(tl_.end[id] != Time::max(), "every op of a validated TaskGraph runs");
    }
    tl_.makespan = now;
    return std::move(tl_);
  }

 private:
  void try_start_head(int d, Time now) {
    const auto du = static_cast<size_t>(d);
    if (running_[du]) return;
    const auto stream = graph_.stream(d);
    if (cursor_[du] >= stream.size()) return;
    const OpId head = stream[cursor_[du]];
    if (waiting_[head] != 0) return;
    running_[du] = true;
    const Op& op = graph_.op(head);
    tl_.start[head] = now;
    apply_memory(head, op.mem_at_start, now, false);
    queue_.push(now + op.duration, head);
  }

  void start_transfer(OpId id, Time now) {
    const Op& op = graph_.op(id);
    const Route& route = cluster_.route(op.device, op.peer);
    routes_[id] = &route;
    for (LinkDirection h : route.hops) {
      auto& stats = tl_.links[static_cast<size_t>(h)];
      stats.bytes += op.bytes;
      if (link_active_[static_cast<size_t>(h)]++ == 0) link_since_[static_cast<size_t>(h)] = now;
    }
    tl_.start[id] = now;
    queue_.push(now + Cluster::transfer_time(route, op.bytes), id);
  }

  void finish(OpId id, Time now) {
    const Op& op = graph_.op(id);
    tl_.end[id] = now;
    if (op.kind == OpKind::kTransfer) {
      for (LinkDirection h : routes_[id]->hops) {
        if (--link_active_[static_cast<size_t>(h)] == 0) {
          tl_.links[static_cast<size_t>(h)].busy += now - link_since_[static_cast<size_t>(h)];
        }
      }
    } else {
      const auto d = static_cast<size_t>(op.device);
      apply_memory(id, op.mem_at_end, now, true);
      tl_.devices[d].busy += op.duration;
      ++tl_.devices[d].ops;
      running_[d] = false;
      ++cursor_[d];
    }
    for (OpId s : graph_.successors(id)) {
      if (--waiting_[s] != 0) continue;
      const Op& next = graph_.op(s);
      if (next.kind == OpKind::kTransfer) {
        start_transfer(s, now);
      } else {
        try_start_head(next.device, now);
      }
    }
    if (op.kind != OpKind::kTransfer) try_start_head(op.device, now);
  }

  void apply_memory(OpId id, int64_t delta, Time now, bool at_end) {
    if (delta == 0) return;
    const Op& op = graph_.op(id);
    auto& mem = memory_[static_cast<size_t>(op.device)];
    auto& slot = mem[static_cast<size_t>(op.mem_category)];
    slot += delta;
    PIPESIM_ASSERT(slot >= 0, "memory never goes negative");
    if (options_.record_memory) tl_.memory_changes.push_back({now, id, at_end});
    if (delta > 0) note_memory(op.device, now, id);
  }

  void note_memory(int d, Time now, OpId cause) {
    const auto du = static_cast<size_t>(d);
    const auto& mem = memory_[du];
    int64_t total = 0;
    for (int64_t v : mem) total += v;
    DeviceStats& ds = tl_.devices[du];
    if (total > ds.peak_memory) {
      ds.peak_memory = total;
      ds.at_peak = mem;
      ds.peak_time = now;
    }
    const int64_t capacity = cluster_.device(d).gpu.memory_bytes;
    if (!tl_.oom.oom && total > capacity) {
      tl_.oom = {true, d, cause, now, total, capacity};
    }
  }

  const TaskGraph& graph_;
  const Cluster& cluster_;
  SimOptions options_;
  Timeline tl_;
  EventQueue queue_;
  std::vector<uint32_t> waiting_;  // deps not yet ended, per op
  std::vector<uint32_t> cursor_;   // next op of each device's stream
  std::vector<bool> running_;
  std::vector<MemBreakdown> memory_;
  std::vector<const Route*> routes_;  // route of each transfer while it runs
  std::vector<uint32_t> link_active_;
  std::vector<Time> link_since_;
};

}  // namespace

Timeline simulate(const TaskGraph& graph, const Cluster& cluster, const SimOptions& options) {
  return Engine(graph, cluster, options).run();
}

}  // namespace pipesim
