#include "backend/host_links.h"

#include <algorithm>
#include <cstring>

namespace pipesim {
namespace {
// How often a transfer's copy catches up with its progress (wall clock).
constexpr auto kTick = std::chrono::microseconds(200);
}  // namespace

LinkEmulator::LinkEmulator(const TaskGraph& g, const Cluster& c, const ScaledClock& clock,
                           Done done)
    : graph_(g),
      cluster_(c),
      clock_(clock),
      done_(std::move(done)),
      network_(c, g.size()),
      started_(g.size()),
      src_(static_cast<size_t>(kCopyCap), 1),
      dst_(static_cast<size_t>(kCopyCap), 0) {
  for (const Op& op : g.ops()) remaining_ += op.kind == OpKind::kTransfer ? 1 : 0;
}

void LinkEmulator::submit(OpId id, Time ready) {
  {
    const std::lock_guard lk(mu_);
    incoming_.emplace_back(id, ready);
  }
  cv_.notify_one();
}

void LinkEmulator::run() {
  while (remaining_ > 0) {
    std::vector<std::pair<OpId, Time>> fresh;
    {
      std::unique_lock lk(mu_);
      auto next = std::chrono::steady_clock::now() + (copies_.empty() ? 50 * kTick : kTick);
      if (!events_.empty()) next = std::min(next, clock_.wall(events_.front().time));
      cv_.wait_until(lk, next, [&] { return !incoming_.empty(); });
      fresh.swap(incoming_);
    }
    // New transfers start when they became ready, in order, each after the events due by
    // then, so the flow model sees every change in time order.
    std::sort(fresh.begin(), fresh.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
    for (const auto& [id, ready] : fresh) {
      due(ready);
      start(id, max(ready, model_now_));
    }
    const Time now = clock_.now();
    due(now);
    pace(now);
  }
}

// Handles the events due by `t`, in time order.
void LinkEmulator::due(Time t) {
  while (!events_.empty() && events_.front().time <= t) {
    std::pop_heap(events_.begin(), events_.end(), std::greater<>());
    const Event e = events_.back();
    events_.pop_back();
    model_now_ = max(model_now_, e.time);
    if (e.latency) {
      start_flow(e.op, e.time);
    } else if (network_.is_current(e.op, e.time)) {
      end_flow(e.op, e.time);
    }
  }
}

void LinkEmulator::start(OpId id, Time now) {
  const Op& op = graph_.op(id);
  model_now_ = now;
  started_[id] = now;
  const Route& route = cluster_.route(op.device, op.peer);
  if (route.latency > Time::zero()) {
    events_.push_back({now + route.latency, seq_++, id, true});
    std::push_heap(events_.begin(), events_.end(), std::greater<>());
  } else {
    start_flow(id, now);
  }
}

void LinkEmulator::start_flow(OpId id, Time t) {
  const Op& op = graph_.op(id);
  copies_.push_back({id, std::min(op.bytes, kCopyCap), 0, t, t});
  changed_.clear();
  network_.add(id, cluster_.route(op.device, op.peer), op.bytes, t, changed_);
  project(t);
}

// Each start and end is re-rated at once (the copies run in real time).
void LinkEmulator::project(Time t) {
  network_.commit(t, changed_);
  for (const FlowNetwork::Update& u : changed_) {
    events_.push_back({u.finish, seq_++, u.flow, false});
    std::push_heap(events_.begin(), events_.end(), std::greater<>());
    for (Copy& c : copies_) {
      if (c.op == u.flow) c.finish = u.finish;
    }
  }
}

void LinkEmulator::end_flow(OpId id, Time t) {
  changed_.clear();
  network_.remove(id);
  project(t);
  const auto it =
      std::find_if(copies_.begin(), copies_.end(), [&](const Copy& c) { return c.op == id; });
  if (it != copies_.end()) {
    std::memcpy(dst_.data() + it->copied, src_.data() + it->copied,
                static_cast<size_t>(it->total - it->copied));
    copies_.erase(it);
  }
  --remaining_;
  done_(id, started_[id], clock_.now());
}

// Each flow copies the share of its bytes its model progress has reached.
void LinkEmulator::pace(Time now) {
  for (Copy& c : copies_) {
    const Time span = c.finish - c.model_start;
    int64_t target = c.total;
    if (span > Time::zero() && now < c.finish) {
      target = static_cast<int64_t>(static_cast<double>(c.total) *
                                    ((now - c.model_start).seconds() / span.seconds()));
    }
    target = std::clamp(target, c.copied, c.total);
    std::memcpy(dst_.data() + c.copied, src_.data() + c.copied,
                static_cast<size_t>(target - c.copied));
    c.copied = target;
  }
}

}  // namespace pipesim
