// The event queue: a 4-ary min-heap of 16-byte plain events over one vector.
//
// Order is total: (time, seq), where seq is stamped when the event is scheduled, so
// equal-time events run in the order they were scheduled and every run of the same
// input is identical (ns-3's EventKey idea). No allocation per event beyond the
// vector's amortised growth, no type erasure.
//
// An event packs (time, seq, payload) into two 64-bit words so that the order is one
// unsigned 128-bit comparison, which compiles without branches; heap order costs
// branch mispredictions, not instructions. seq has 32 bits: a queue may schedule
// 4.29e9 events in its lifetime (the engine caps runs far below that).
//
//   operation   cost
//   push        O(log4 n)
//   pop         O(4 log4 n)
//   top, size   O(1)
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/time.h"

namespace pipesim {

struct Event {
  Time time;
  uint32_t seq = 0;
  uint32_t payload = 0;  // what the owner needs to dispatch it (an op id for the engine)
};

__extension__ using EventKey = unsigned __int128;

inline EventKey event_key(const Event& e) {
  return (static_cast<EventKey>(static_cast<uint64_t>(e.time.ps_count())) << 64) |
         (static_cast<uint64_t>(e.seq) << 32) | e.payload;
}
inline bool event_before(const Event& a, const Event& b) {
  return event_key(a) < event_key(b);
}

class EventQueue {
 public:
  void reserve(size_t n) { heap_.reserve(n); }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }

  // Times must be >= 0 (simulated time starts at zero and never goes back).
  void push(Time time, uint32_t payload) {
    PIPESIM_ASSERT(time >= Time::zero() && next_seq_ != UINT32_MAX,
                   "event time >= 0 and fewer than 2^32 events");
    heap_.push_back(Event{time, next_seq_++, payload});
    sift_up(heap_.size() - 1);
  }

  Event pop() {
    const Event out = heap_.front();
    const Event last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(last);
    return out;
  }

 private:
  static constexpr size_t kArity = 4;

  void sift_up(size_t i) {
    const Event e = heap_[i];
    const EventKey k = event_key(e);
    while (i > 0) {
      const size_t parent = (i - 1) / kArity;
      if (!(k < event_key(heap_[parent]))) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  // Moves `e` down from the root (its old slot is the hole left by the popped top).
  void sift_down(const Event& e) {
    const EventKey k = event_key(e);
    const size_t n = heap_.size();
    size_t i = 0;
    for (;;) {
      const size_t first = i * kArity + 1;
      if (first >= n) break;
      size_t best = first;
      EventKey best_key = event_key(heap_[first]);
      const size_t last = first + kArity < n ? first + kArity : n;
      for (size_t c = first + 1; c < last; ++c) {
        const EventKey ck = event_key(heap_[c]);
        const bool less = ck < best_key;
        best = less ? c : best;
        best_key = less ? ck : best_key;
      }
      if (!(best_key < k)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = e;
  }

  std::vector<Event> heap_;
  uint32_t next_seq_ = 0;
};

}  // namespace pipesim
