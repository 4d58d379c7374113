// A virtual device's memory arena. Ops allocate and release activation (and other) bytes
// in the order their device's stream runs them, through their memory deltas; the resident
// state (weights, gradients, optimizer state, reserved) is allocated when the arena is made.
// The arena counts bytes: it does not place tensors, so fragmentation is not modelled and
// the high-water mark equals the simulator's peak whenever both apply the same deltas in
// the same order (which the stream order guarantees).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "schedules/task_graph.h"

namespace pipesim {

class Arena {
 public:
  explicit Arena(const MemBreakdown& resident) {
    for (int64_t b : resident) in_use_ += b;
    peak_ = in_use_;
  }
  void apply(int64_t delta) {
    in_use_ += delta;
    PIPESIM_ASSERT(in_use_ >= 0, "an arena never releases more than it holds");
    peak_ = std::max(peak_, in_use_);
  }
  int64_t in_use() const { return in_use_; }
  int64_t peak() const { return peak_; }

 private:
  int64_t in_use_ = 0;
  int64_t peak_ = 0;
};

}  // namespace pipesim
