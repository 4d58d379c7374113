// The event queue: a 4-ary min-heap of small plain events over one vector.
//
// Order is total: (time, seq), where seq is stamped when the event is scheduled, so
// equal-time events run in the order they were scheduled and every run of the same
// input is identical (ns-3's EventKey idea). No allocation per event beyond the
// vector's amortised growth, no type erasure.
//
//   operation   cost
//   push        O(log4 n)
//   pop         O(4 log4 n)
//   top, size   O(1)
#pragma once

#include <cstdint>
#include <vector>

#include "core/time.h"

namespace pipesim {

struct Event {
  Time time;
  uint64_t seq = 0;
  uint32_t payload = 0;  // what the owner needs to dispatch it (an op id for the engine)
};

inline bool event_before(const Event& a, const Event& b) {
  return a.time < b.time || (a.time == b.time && a.seq < b.seq);
}

class EventQueue {
 public:
  void reserve(size_t n) { heap_.reserve(n); }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }

  void push(Time time, uint32_t payload) {
    heap_.push_back(Event{time, next_seq_++, payload});
    sift_up(heap_.size() - 1);
  }

  Event pop() {
    Event out = heap_.front();
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
    return out;
  }

 private:
  static constexpr size_t kArity = 4;

  void sift_up(size_t i) {
    const Event e = heap_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / kArity;
      if (!event_before(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  void sift_down(size_t i) {
    const Event e = heap_[i];
    const size_t n = heap_.size();
    for (;;) {
      const size_t first = i * kArity + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t last = first + kArity < n ? first + kArity : n;
      for (size_t c = first + 1; c < last; ++c) {
        if (event_before(heap_[c], heap_[best])) best = c;
      }
      if (!event_before(heap_[best], e)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = e;
  }

  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace pipesim
