#include "schedules/warmup.h"

#include <algorithm>
#include <numeric>

namespace pipesim {

std::vector<int> warmup_depths(const std::vector<Warmup>& modes, Time cycle,
                               const std::vector<Time>& round_trip_hops, int micro_batches) {
  const int S = static_cast<int>(modes.size());
  std::vector<int> out(static_cast<size_t>(S));
  int next = 0;  // k of position s + 1 under the auto rule
  for (int st = S - 1; st >= 0; --st) {
    const Warmup w = modes[static_cast<size_t>(st)];
    const int shallow = S - st, deep = 2 * (S - st) - 1;
    int automatic = 1;
    if (st + 1 < S) {
      // Position s runs k - 1 forwards and k - 1 backwards between F(m) and B(m): (k - 1)
      // cycles must cover position s + 1's own (k' - 1) cycles, its F and B (one cycle) and
      // the hop there and back, so k = k' + 1 + ceil(hop / cycle). A hop under 2 % of the
      // cycle is left exposed rather than paid for with another micro-batch of memory.
      const Time hop = round_trip_hops[static_cast<size_t>(st)];
      int64_t extra = 0;
      if (hop * 50 > cycle) {
        extra = cycle <= Time::zero()
                    ? deep
                    : hop.ps_count() / cycle.ps_count() + (hop.ps_count() % cycle.ps_count() != 0);
      }
      automatic = static_cast<int>(std::min<int64_t>(next + 1 + extra, deep));
    }
    next = automatic;
    const int depth = w == Warmup::kDeep ? deep : w == Warmup::kAuto ? automatic : shallow;
    out[static_cast<size_t>(st)] = std::max(1, std::min(depth, micro_batches));
  }
  return out;
}

std::vector<int> stashed_versions(ScheduleKind schedule, const std::vector<int>& replicas) {
  std::vector<int> out(replicas.size(), 0);
  if (schedule == ScheduleKind::kPipeDream2BW) out.assign(replicas.size(), 1);
  if (schedule == ScheduleKind::kPipeDream) {
    const int total = std::accumulate(replicas.begin(), replicas.end(), 0);
    int before = 0;
    for (size_t p = 0; p < replicas.size(); ++p) {
      out[p] = (total - 1 - before) / replicas[p];
      before += replicas[p];
    }
  }
  return out;
}

}  // namespace pipesim
