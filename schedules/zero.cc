#include "schedules/zero.h"

#include "core/checked.h"

namespace pipesim {

ZeroBytes zero_resident_bytes(int64_t params, const ParamBytes& pb, int stage, int ranks) {
  const char* what = "a device's parameter memory";
  auto part = [&](int64_t per_param, int from_stage) {
    const int64_t whole = checked_mul(params, per_param, what);
    if (stage < from_stage || ranks < 2) return whole;
    return ceil_div(whole, ranks);
  };
  return {part(pb.weights, 3), part(pb.gradients, 2), part(pb.optimizer, 1)};
}

}  // namespace pipesim
