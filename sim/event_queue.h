// The event queue: events of equal time chained together, the chains in a 4-ary min-heap.
//
// Order is total: (time, seq), where seq is stamped when the event is scheduled, so
// equal-time events run in the order they were scheduled and every run of the same
// input is identical (ns-3's EventKey idea). No allocation per event beyond the
// vectors' amortised growth, no type erasure.
//
// Simulations schedule many events at few distinct times (a collective's members all
// step after the same latency and the same serialisation time), so the events of one
// time form a chain, a FIFO in scheduling (seq) order, and only the chains sit in the
// heap, keyed by (time, seq of their first event). A push finds the chain of its time
// through a small direct-mapped cache of chain tails; when the cache has lost it (another
// time took its line), the push starts a new chain for the same time. The old one receives
// nothing more, so every event of it precedes every event of the new one in seq order as
// well, and the heap's (time, first seq) key pops them in (time, seq) order. Popping from
// a chain that has more events leaves its heap entry in place.
//
// A heap entry packs (time, seq, chain head) into two 64-bit words so that the order is one
// unsigned 128-bit comparison, which compiles without branches (seqs are unique, so the
// head never decides). seq has 32 bits: a queue may schedule 4.29e9 events in its lifetime
// (the engine caps runs far below that).
//
//   operation   cost
//   push        O(1) onto an existing time's chain, O(log4 chains) for a new chain
//   pop         O(1) from a chain with more events, O(4 log4 chains) when it empties
//   size        O(1)
#pragma once

#include <array>
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
  EventQueue() { cache_.fill(Line{}); }
  void reserve(size_t n) {
    heap_.reserve(n);
    items_.reserve(n);
  }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // The earliest event's time (the queue must not be empty).
  Time top_time() const { return heap_.front().time; }

  // Times must be >= 0 (simulated time starts at zero and never goes back).
  void push(Time time, uint32_t payload) {
    PIPESIM_ASSERT(time >= Time::zero() && next_seq_ != UINT32_MAX,
                   "event time >= 0 and fewer than 2^32 events");
    const uint32_t seq = next_seq_++;
    uint32_t i = free_;
    if (i == kNone) {
      i = static_cast<uint32_t>(items_.size());
      items_.emplace_back();
    } else {
      free_ = items_[i].next;
    }
    items_[i] = {seq, payload, kNone};
    Line& line = cache_[line_of(time)];
    if (line.tail != kNone && line.time == time) {
      items_[line.tail].next = i;
    } else {
      line.time = time;
      heap_.push_back(Event{time, seq, i});  // the payload names the chain's head
      sift_up(heap_.size() - 1);
    }
    line.tail = i;
    ++size_;
  }

  Event pop() {
    Event& top = heap_.front();
    const uint32_t i = top.payload;
    const Item item = items_[i];
    const Event out{top.time, item.seq, item.payload};
    items_[i].next = free_;
    free_ = i;
    --size_;
    if (item.next != kNone) {
      top.payload = item.next;  // the chain keeps its key (time, first seq)
      return out;
    }
    Line& line = cache_[line_of(top.time)];
    if (line.tail == i) line.tail = kNone;  // the chain is gone
    const Event last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(last);
    return out;
  }

 private:
  static constexpr size_t kArity = 4;
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr int kCacheBits = 10;

  struct Item {
    uint32_t seq = 0, payload = 0;
    uint32_t next = kNone;  // the chain's next event, or the next free item
  };
  struct Line {
    Time time;
    uint32_t tail = kNone;  // last item of the newest chain of `time`, or kNone
  };

  static size_t line_of(Time t) {
    return static_cast<size_t>((static_cast<uint64_t>(t.ps_count()) * 0x9E3779B97F4A7C15ull) >>
                               (64 - kCacheBits));
  }

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

  std::vector<Event> heap_;  // one entry per chain: (time, first seq, head item)
  std::vector<Item> items_;  // pending events, and free items linked through `next`
  uint32_t free_ = kNone;
  std::array<Line, size_t{1} << kCacheBits> cache_;  // time's line -> its newest chain
  size_t size_ = 0;
  uint32_t next_seq_ = 0;
};

}  // namespace pipesim
