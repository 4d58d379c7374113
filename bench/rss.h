// The process's peak resident memory so far, for benchmarks that report their footprint.
#pragma once

#include <sys/resource.h>

namespace pipesim {

inline double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

}  // namespace pipesim
