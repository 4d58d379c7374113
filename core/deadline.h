// A caller's time limit (plan --time-limit), checked inside long computations: the
// simulator's event loop and the baseline planners stop with DeadlinePassed once it is past.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>

namespace pipesim {

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

struct DeadlinePassed : std::runtime_error {
  DeadlinePassed() : std::runtime_error("stopped at the time limit") {}
};

// `seconds` after t0.
inline Deadline after(std::chrono::steady_clock::time_point t0, double seconds) {
  return t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(seconds));
}
inline bool passed(const Deadline& d) {
  return d && std::chrono::steady_clock::now() > *d;
}
inline void check(const Deadline& d) {
  if (passed(d)) throw DeadlinePassed();
}

}  // namespace pipesim
