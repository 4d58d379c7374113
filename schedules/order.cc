#include "schedules/order.h"

#include <fmt/format.h>

#include <algorithm>

namespace pipesim {

ScheduleOrder gpipe_order(int stages, int micro_batches) {
  ScheduleOrder order(static_cast<size_t>(stages));
  for (auto& steps : order) {
    for (int m = 0; m < micro_batches; ++m) steps.push_back({OpKind::kForward, m, 0});
    for (int m = 0; m < micro_batches; ++m) steps.push_back({OpKind::kBackward, m, 0});
  }
  return order;
}

ScheduleOrder one_f_one_b_order(int stages, int micro_batches) {
  ScheduleOrder order(static_cast<size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    auto& steps = order[static_cast<size_t>(s)];
    // Megatron-LM schedules.py: num_warmup_microbatches = min(S - s - 1, M).
    const int warmup = std::min(stages - s - 1, micro_batches);
    int next_f = 0;
    int next_b = 0;
    for (; next_f < warmup; ++next_f) steps.push_back({OpKind::kForward, next_f, 0});
    while (next_f < micro_batches) {
      steps.push_back({OpKind::kForward, next_f++, 0});
      steps.push_back({OpKind::kBackward, next_b++, 0});
    }
    while (next_b < micro_batches) steps.push_back({OpKind::kBackward, next_b++, 0});
  }
  return order;
}

ScheduleOrder schedule_order(ScheduleKind kind, int stages, int micro_batches) {
  switch (kind) {
    case ScheduleKind::kGpipe:
      return gpipe_order(stages, micro_batches);
    case ScheduleKind::kDapple:
      return one_f_one_b_order(stages, micro_batches);
  }
  return {};
}

std::string format_steps(const std::vector<Step>& steps, bool show_chunks) {
  std::string out;
  for (const Step& s : steps) {
    if (!out.empty()) out += ' ';
    out += fmt::format("{}{}", op_letter(s.kind), s.micro_batch);
    if (show_chunks) out += fmt::format(".c{}", s.chunk);
  }
  return out;
}

}  // namespace pipesim
