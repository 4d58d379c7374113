// ZB-V (Qi et al. 2024, arXiv 2401.10241 v2, section 6): two chunks per device in a V.
// Device d holds chunk 0 = global stage d and chunk 1 = global stage 2S - 1 - d, so the
// forward runs down the devices and back up, and the loss (and the first backward) is on
// device 0 again. The order is the greedy builder of sail-sg/zero-bubble-pipeline-parallelism
// (`v_schedule.py`, `PipelineGraph.try_v_schedule` and `get_v_schedule`): forwards of
// chunk 0 fill the warm-up until chunk 1's first forward comes back, then every round runs
// one backward and one forward per device, W steps filling waits for transfers, under the
// memory limit of S micro-batches of the device's activations (p M_B, as for ZB-H1).
#pragma once

#include <optional>

#include "schedules/order.h"
#include "schedules/stage_costs.h"

namespace pipesim {

// Per-device orders (Step::chunk 0 or 1) for `micro_batches` micro-batches; `costs` covers
// the 2S global stages. Empty when the builder cannot order this many micro-batches on
// this many devices (its rules assume enough micro-batches to fill the V).
std::optional<ScheduleOrder> zero_bubble_v_order(const StageCosts& costs, int micro_batches);

}  // namespace pipesim
