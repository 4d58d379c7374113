// Two schedule rules on plain inputs (scenario/setup.cc gathers them from a scenario):
// DAPPLE's warm-up depth of the 1F1B schedules and PipeDream's weight stash.
#pragma once

#include <vector>

#include "core/units.h"
#include "schedules/model.h"

namespace pipesim {

// Micro-batches each of the S pipeline positions has in flight at its first backward, for
// each position's warm-up mode: schedule: S - s; deep: 2(S - s) - 1; auto: k_{S-1} = 1 and
// k_s = k_{s+1} + 1 + ceil(hop_s / cycle) (0 when hop_s < 2 % of the cycle), capped at
// deep; all capped at M. `cycle` is the slowest position's F + B + W per replica;
// `round_trip_hops[s]` (s < S - 1) the idle-route time of position s's output to s + 1 and
// of its gradient back. See docs/schedules.md.
std::vector<int> warmup_depths(const std::vector<Warmup>& modes, Time cycle,
                               const std::vector<Time>& round_trip_hops, int micro_batches);

// Extra weight versions each position keeps, given its replicas: PipeDream stashes one per
// micro-batch in flight beyond the current one ((ranks - 1 - ranks in earlier positions) /
// ranks here: S - s - 1 on a straight pipeline), 2BW keeps one, the rest none.
std::vector<int> stashed_versions(ScheduleKind schedule, const std::vector<int>& replicas);

}  // namespace pipesim
