#include "sim/engine.h"

#include <algorithm>
#include <cmath>

#include "core/checked.h"
#include "core/error.h"
#include "sim/internal/replay.h"

namespace pipesim {
namespace replay {

std::shared_ptr<const CopyFold> Engine::fold_of(const TaskGraph& g, const Cluster& c,
                                                const SimOptions& o) {
  // Copies simulated once: the others' memory changes and link samples are copy 0's images
  // (expand). (The fold lower_folded found on this cluster, else found here.)
  const auto fold = [&]() -> std::shared_ptr<const CopyFold> {
    if (auto kept = g.kept_fold(c.revision())) return kept;
    auto f = fold_copies(g, c);
    return f ? std::make_shared<const CopyFold>(std::move(*f)) : nullptr;
  };
  std::shared_ptr<const CopyFold> out;
  if (o.fold) out = fold();
  // A graph that leaves copies implicit is only ever run folded (lower_folded checked the
  // fold before it kept one).
  if (g.built_copies() < g.copies()) {
    PIPESIM_ASSERT(!o.record_links && !o.record_memory, "implicit copies record nothing per op");
    if (!out) out = fold();
    PIPESIM_ASSERT(out != nullptr, "a graph with implicit copies folds");
  }
  return out;
}

int Engine::devices_run(const TaskGraph& g, const Cluster& c, const CopyFold* fold) {
  if (fold == nullptr || g.built_copies() >= g.copies()) return c.num_devices();
  // (Where every device is in a copy, the built ones are copy 0's.)
  if (fold->devices.size() == static_cast<size_t>(c.num_devices())) {
    const auto first = fold->devices.begin();
    return 1 + *std::max_element(first, first + static_cast<std::ptrdiff_t>(fold->per_copy));
  }
  int end = c.num_devices();
  while (end > 0 && fold->device_copy[static_cast<size_t>(end) - 1] > 0) --end;
  return end;
}

std::vector<double> Engine::link_capacities(const Cluster& c, const CopyFold* fold) {
  std::vector<double> out;
  if (fold == nullptr) {
    out.resize(static_cast<size_t>(c.num_links()) * 2);
    for (size_t h = 0; h < out.size(); ++h)
      out[h] = c.direction_bandwidth(static_cast<LinkDirection>(h));
    return out;
  }
  // An orbit stands for `share` of the full run's flows per flow of copy 0's.
  out.reserve(fold->orbit_rep.size());
  for (const LinkDirection r : fold->orbit_rep) {
    const double bandwidth = c.direction_bandwidth(r);
    const int32_t share = fold->share_of(r);
    out.push_back(share <= 1 ? bandwidth : bandwidth / share);
  }
  return out;
}

Engine::Engine(const TaskGraph& g, const Cluster& c, const SimOptions& o)
    : graph_(g),
      cluster_(c),
      options_(o),
      copies_(fold_of(g, c, o)),
      devices_(devices_run(g, c, copies_.get())),
      capacity_(link_capacities(c, copies_.get())),
      network_(capacity_, g.size(), FlowNetwork::Filling::kHeap,
               o.exact_sharing ? FlowNetwork::kNeverLocal : FlowNetwork::kLocalAbove) {
  const size_t n = g.size();
  PIPESIM_ASSERT(g.num_devices() == c.num_devices(), "TaskGraph built for this cluster");
  PIPESIM_ASSERT(n <= kIdMask, "fewer than 2^30 ops");
  reserve_huge(tl_.start, n);
  reserve_huge(tl_.end, n);
  reserve_huge(waiting_, n);
  tl_.start.assign(n, Time::max());
  tl_.end.assign(n, Time::max());
  tl_.devices.resize(static_cast<size_t>(devices_));
  tl_.links.resize(capacity_.size());
  link_active_.assign(tl_.links.size(), 0);
  link_since_.assign(tl_.links.size(), Time::zero());
  waiting_.resize(n);
  for (OpId id = 0; id < n; ++id) waiting_[id] = static_cast<uint32_t>(g.deps(id).size());
  cursor_.assign(static_cast<size_t>(devices_), 0);
  running_.assign(static_cast<size_t>(devices_), false);
  memory_.resize(static_cast<size_t>(devices_));
  // (Events in flight: about two a device that runs ops, never more than the ops.)
  queue_.reserve(std::min(static_cast<size_t>(devices_), n) * 2 + 64);
  size_t members = 0;
  for (const CompactRing& r : g.rings()) {
    ring_base_.push_back(static_cast<uint32_t>(members));
    members += r.n;
  }
  member_route_.assign(members, nullptr);
  if (!g.rings().empty()) last_arrived_.assign(members, false);
  // Communication slowing compute: only where some GPU says so (otherwise no state).
  const auto slowed = [&](const Device& d) { return d.gpu.comm_interference > 0; };
  // (GPUs alike in it: the first says for all, Cluster::same_memory.)
  const bool interference = c.same_memory() ? slowed(c.device(0))
                                            : std::any_of(c.devices().begin(), c.devices().end(), slowed);
  if (o.comm_interference && interference) {
    pace_.resize(static_cast<size_t>(devices_));
    for (int d = 0; d < devices_; ++d) {
      const double x = c.device(d).gpu.comm_interference;
      pace_[static_cast<size_t>(d)].num =
          kPaceDen - static_cast<int64_t>(std::llround(x * static_cast<double>(kPaceDen)));
    }
  }
  // Phases are exact, but they record no link samples.
  fold_ = o.fold && !o.record_links && !g.rings().empty();
  if (fold_) {
    rings_.resize(g.rings().size());
    held_by_.assign(tl_.links.size(), kNoRing);
    crossing_.assign(tl_.links.size(), 0);
  }
}

Timeline Engine::run() {
  // (Devices of copies left implicit run nothing: their figures are their images', expand.)
  const bool implicit = graph_.built_copies() < graph_.copies();
  const auto runs_nothing = [&](int d) {
    return implicit && copies_->device_copy[static_cast<size_t>(d)] > 0;
  };
  for (int d = 0; d < devices_; ++d) {
    if (runs_nothing(d)) continue;
    memory_[static_cast<size_t>(d)] = graph_.static_memory(d);
    note_memory(d, Time::zero(), UINT32_MAX);
  }
  for (OpId id = 0; id < graph_.size(); ++id) {
    if (waiting_[id] == 0 && graph_.op(id).kind == OpKind::kTransfer && simulated(id))
      start_transfer(id, Time::zero());
  }
  for (int d = 0; d < devices_; ++d) {
    if (!runs_nothing(d)) try_start_head(d, Time::zero());
  }

  Time now = Time::zero();
  uint32_t popped = 0;
  for (;;) {
    // The flows started and ended at this moment are re-rated together before time moves.
    if (network_.pending() && (queue_.empty() || queue_.top_time() > now)) commit_rates(now);
    if (queue_.empty()) break;
    if (options_.deadline && (++popped & 0x3FFFu) == 0) check(options_.deadline);
    const Event e = queue_.pop();
    PIPESIM_ASSERT(e.time >= now, "time never goes backwards");
    now = e.time;
    const OpId id = e.payload & kIdMask;
    switch (e.payload >> kKindShift) {
      case kOpEnd:
        if (!is_current_end(id, now)) break;  // re-timed since; a newer event stands
        ++tl_.events;
        finish(id, now);
        break;
      case kLatencyDone: {
        ++tl_.events;
        const Latent l = latent_[id];
        free_latent_.push_back(id);
        start_flow(l.id, *l.route, now);
        break;
      }
      case kRingCheck:
        ++tl_.events;
        decide_ring(id, now);
        break;
      case kFlowDone:
        if (id >= graph_.size()) --step_of(id).pending;
        if (id >= graph_.size() && step_of(id).member == kPhase) {
          if (end_phase(id, now)) ++tl_.events;
          break;
        }
        if (!network_.is_current(id, now)) {  // re-rated since; a newer event stands
          if (id >= graph_.size()) release_if_done(id);
          break;
        }
        ++tl_.events;
        end_flow(id, now);
        break;
      default:
        PIPESIM_ASSERT(false, "known event kind");
    }
  }
  if (copies_) expand(copies_, tl_);
  // The end of the last op (stale flow projections may have been popped later).
  for (OpId id = 0; id < graph_.size(); ++id) {
    PIPESIM_ASSERT(tl_.end[id] != Time::max(), "every op of a validated TaskGraph runs");
    tl_.makespan = max(tl_.makespan, tl_.end[id]);
  }
  return std::move(tl_);
}

void Engine::try_start_head(int d, Time now) {
  const auto du = static_cast<size_t>(d);
  if (running_[du]) return;
  const auto stream = graph_.stream(d);
  if (cursor_[du] >= stream.size()) return;
  const OpId head = stream[cursor_[du]];
  if (waiting_[head] != 0 || !simulated(head)) return;
  running_[du] = true;
  const Op& op = graph_.op(head);
  tl_.start[head] = now;
  apply_memory(head, op.mem_at_start, now, false);
  if (pace_.empty()) {
    push(checked_add(now, op.duration, "the simulated time"), head, kOpEnd);
    return;
  }
  pace_[du].work_left = op.duration;
  pace_[du].since = now;
  push_compute_end(d, head, now);
}

void Engine::push_compute_end(int d, OpId id, Time now) {
  Pace& p = pace_[static_cast<size_t>(d)];
  Time left = p.work_left;
  if (p.sending > 0 && p.num < kPaceDen) {
    // ceil(work x den / num), the op never ending before its work is done; split so that
    // no product leaves 64 bits (r x den < num x den = 10^12).
    const int64_t w = left.ps_count();
    const int64_t whole = checked_mul(w / p.num, kPaceDen, "the simulated time");
    left = Time::ps(checked_add(whole, ceil_div(w % p.num * kPaceDen, p.num), "the simulated time"));
  }
  p.due = checked_add(now, left, "the simulated time");
  push(p.due, id, kOpEnd);
}

void Engine::note_sending(int d, int delta, Time now) {
  const auto du = static_cast<size_t>(d);
  Pace& p = pace_[du];
  const bool was = p.sending > 0;
  PIPESIM_ASSERT(delta > 0 || was, "a transfer ends only after it started");
  p.sending = static_cast<uint32_t>(static_cast<int64_t>(p.sending) + delta);
  if (was == (p.sending > 0) || !running_[du] || p.num == kPaceDen) return;
  // The running op's work done since `since`, at the pace it had.
  const int64_t elapsed = (now - p.since).ps_count();
  const int64_t done =
      was ? elapsed / kPaceDen * p.num + elapsed % kPaceDen * p.num / kPaceDen : elapsed;
  p.work_left = Time::ps(std::max<int64_t>(p.work_left.ps_count() - done, 0));
  p.since = now;
  push_compute_end(d, graph_.stream(d)[cursor_[du]], now);
}

bool Engine::slows_compute(OpId id) const {
  const Op& op = graph_.op(id);
  return op.peer >= 0 && cluster_.device(op.device).node == cluster_.device(op.peer).node;
}

bool Engine::is_current_end(OpId id, Time now) const {
  if (pace_.empty()) return true;
  return tl_.end[id] == Time::max() &&
         now == pace_[static_cast<size_t>(graph_.op(id).device)].due;
}

void Engine::start_transfer(OpId id, Time now) {
  const Op& op = graph_.op(id);
  tl_.start[id] = now;
  if (!pace_.empty() && slows_compute(id)) note_sending(op.device, +1, now);
  if (const uint32_t r = ring_of(id); r != kNoRing) {
    if (fold_ && ring_waits(r, now)) return;
    join(r, id - graph_.rings()[r].first, now);
    return;
  }
  start_route(id, route(op.device, op.peer), op.bytes, now);
}

const Route& Engine::route(int src, int dst) {
  const Route& r = cluster_.route(src, dst);
  if (!copies_) return r;
  auto [it, fresh] = quotient_routes_.try_emplace(int64_t{src} * cluster_.num_devices() + dst);
  if (fresh) {
    it->second = std::make_unique<Route>(r);
    for (LinkDirection& h : it->second->hops) {
      h = copies_->orbit[static_cast<size_t>(h)];
      PIPESIM_ASSERT(h >= 0, "copy 0's routes cross mapped links");
    }
  }
  return *it->second;
}

void Engine::start_route(OpId id, const Route& route, int64_t bytes, Time now) {
  for (LinkDirection h : route.hops) {
    auto& link_bytes = tl_.links[static_cast<size_t>(h)].bytes;
    link_bytes = checked_add(link_bytes, bytes, "the bytes a link carries");
  }
  if (route.latency > Time::zero()) {
    // The event names the transfer's slot in latent_, which holds its id and route.
    const uint32_t slot = new_latent_slot();
    latent_[slot] = {id, &route};
    push(checked_add(now, route.latency, "the simulated time"), slot, kLatencyDone);
  } else {
    start_flow(id, route, now);
  }
}

uint32_t Engine::new_latent_slot() {
  if (free_latent_.empty()) {
    const auto slot = static_cast<uint32_t>(latent_.size());
    PIPESIM_ASSERT(slot <= kIdMask, "fewer than 2^30 transfers in their latency");
    latent_.emplace_back();
    return slot;
  }
  const uint32_t slot = free_latent_.back();
  free_latent_.pop_back();
  return slot;
}

void Engine::start_flow(OpId id, const Route& route, Time now) {
  if (fold_) {
    for (LinkDirection h : route.hops) {
      const uint32_t r = held_by_[static_cast<size_t>(h)];
      if (r == kNoRing || (id >= graph_.size() && step_of(id).ring == r)) continue;
      if (rings_[r].mode == RingState::kFold) {
        // The images copy their originals' states: those must be re-rated first.
        commit_rates(now);
        unfold(r);
      } else {
        // The phase's flows join as they stand (their links carry no other flow, so no
        // change waiting for the commit touches them).
        split_phase(r, now);
      }
    }
  }
  for (LinkDirection h : route.hops) {
    const auto hu = static_cast<size_t>(h);
    if (link_active_[hu]++ == 0) link_since_[hu] = now;
    tl_.links[hu].peak_flows =
        std::max(tl_.links[hu].peak_flows, static_cast<int>(link_active_[hu]));
  }
  changed_.clear();
  network_.add(id, route, flow_bytes(id), now, changed_);
  after_rerate(now);
}

void Engine::end_flow(OpId id, Time now) {
  const Route& route = network_.route(id);
  network_.remove(id);
  for (LinkDirection h : route.hops) {
    const auto hu = static_cast<size_t>(h);
    if (--link_active_[hu] == 0) tl_.links[hu].busy += now - link_since_[hu];
  }
  if (id >= graph_.size()) {
    if (options_.record_links) {
      for (LinkDirection h : route.hops) record_link(h, now);
    }
    end_step(id, now);
    return;
  }
  finish(id, now, &route);
}

int64_t Engine::flow_bytes(OpId id) const {
  if (id < graph_.size()) return graph_.op(id).bytes;
  return graph_.rings()[steps_[id - graph_.size()].ring].chunk;
}

void Engine::commit_rates(Time now) {
  if (!network_.pending()) return;
  changed_.clear();
  network_.commit(now, changed_);
  after_rerate(now);
}

void Engine::after_rerate(Time now) {
  for (const FlowNetwork::Update& u : changed_) {
    if (u.flow >= graph_.size()) ++step_of(u.flow).pending;
    push(u.finish, u.flow, kFlowDone);
  }
  if (!options_.record_links) return;
  for (const FlowNetwork::Update& u : changed_) {
    for (LinkDirection h : network_.route(u.flow).hops) record_link(h, now);
  }
}

void Engine::record_link(LinkDirection h, Time now) {
  // (An orbit's samples are its representative's: expand gives them to the others.)
  const LinkDirection d = copies_ ? copies_->orbit_rep[static_cast<size_t>(h)] : h;
  const double cap = cluster_.direction_bandwidth(d);
  if (!std::isfinite(cap)) return;
  tl_.link_samples.push_back({now, d, static_cast<float>(network_.load(h) / cap)});
}

// `route`: the transfer's route, or null for a compact ring's member op (its steps
// recorded theirs) and compute ops.
void Engine::finish(OpId id, Time now, const Route* route) {
  const Op& op = graph_.op(id);
  tl_.end[id] = now;
  if (op.kind == OpKind::kTransfer) {
    if (options_.record_links && route != nullptr) {
      for (LinkDirection h : route->hops) record_link(h, now);
    }
    // (Every transfer that ends started in start_transfer, which counted it.)
    if (!pace_.empty() && slows_compute(id)) note_sending(op.device, -1, now);
  } else {
    const auto d = static_cast<size_t>(op.device);
    apply_memory(id, op.mem_at_end, now, true);
    tl_.devices[d].busy += now - tl_.start[id];
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

void Engine::apply_memory(OpId id, int64_t delta, Time now, bool at_end) {
  if (delta == 0) return;
  const Op& op = graph_.op(id);
  auto& mem = memory_[static_cast<size_t>(op.device)];
  auto& slot = mem[static_cast<size_t>(op.mem_category)];
  slot = checked_add(slot, delta, "a device's memory");
  PIPESIM_ASSERT(slot >= 0, "memory never goes negative");
  if (options_.record_memory) tl_.memory_changes.push_back({now, id, at_end});
  if (delta > 0) note_memory(op.device, now, id);
}

void Engine::note_memory(int d, Time now, OpId cause) {
  const auto du = static_cast<size_t>(d);
  const auto& mem = memory_[du];
  int64_t total = 0;
  for (int64_t v : mem) total = checked_add(total, v, "a device's memory");
  DeviceStats& ds = tl_.devices[du];
  if (total > ds.peak_memory) {
    ds.peak_memory = total;
    ds.at_peak = mem;
    ds.peak_time = now;
  }
  const int64_t capacity = cluster_.device(d).gpu.memory_bytes;
  // The first crossing; of crossings at the same moment (symmetric ranks), the lowest
  // device's, whatever order that moment's events ran in.
  // (Copies folded: the lowest of the device's images, which expand() reports.)
  const auto rank = [&](int x) {
    return copies_ ? copies_->lowest_image(x) : x;
  };
  if (total > capacity &&
      (!tl_.oom.oom || (now == tl_.oom.time && rank(d) < rank(tl_.oom.device))))
    tl_.oom = {true, d, cause, now, total, capacity};
}

}  // namespace replay

Timeline simulate(const TaskGraph& graph, const Cluster& cluster, const SimOptions& options) {
  return replay::Engine(graph, cluster, options).run();
}

}  // namespace pipesim
