#include "schedules/order.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <numeric>

#include "core/error.h"
#include "schedules/zero_bubble_auto.h"
#include "schedules/zero_bubble_v.h"

namespace pipesim {
namespace {

Step F(int m, int c = 0) {
  return {OpKind::kForward, m, c};
}
Step B(int m, int c = 0) {
  return {OpKind::kBackward, m, c};
}
Step W(int m, int c = 0) {
  return {OpKind::kWeightGrad, m, c};
}

bool is_backward(const Step& s) {
  return s.kind == OpKind::kBackward || s.kind == OpKind::kWeightGrad;
}

// Warm-up forwards, then (forward, backward) pairs, then the remaining backwards, over
// micro-batches 0..M-1 of chunk 0.
StepList warmup_then_pairs(int micro_batches, int warmup) {
  std::vector<int> mbs(static_cast<size_t>(micro_batches));
  std::iota(mbs.begin(), mbs.end(), 0);
  return pipedream_rank_order(mbs, warmup);
}

// W(m) right after B(m) of the same chunk: how a split backward runs in schedules that do
// not place W themselves.
StepList with_weight_grads(const StepList& in) {
  StepList out;
  for (const Step& s : in) {
    out.push_back(s);
    if (s.kind == OpKind::kBackward) out.push_back(W(s.micro_batch, s.chunk));
  }
  return out;
}

// R(m) right before B(m) on the chunks that recompute: the forward re-runs when the
// gradient arrives, then the backward consumes it.
StepList with_recomputes(const StepList& in, int position, int positions, bool v_shape,
                         const std::vector<char>& recompute) {
  StepList out;
  for (const Step& s : in) {
    const auto g = static_cast<size_t>(stage_of_position(position, s.chunk, positions, v_shape));
    if (s.kind == OpKind::kBackward && g < recompute.size() && recompute[g])
      out.push_back({OpKind::kRecompute, s.micro_batch, s.chunk});
    out.push_back(s);
  }
  return out;
}

// Optimizer step k after the last backward of mini-batch k (micro-batches
// [k * M, (k + 1) * M)); a mini-batch with no backward in this list gets its step right
// after the previous one, so steps stay in order.
StepList with_optimizer_steps(const StepList& in, int micro_batches_per_step, int steps) {
  std::vector<int> after(static_cast<size_t>(steps), -1);  // insert after in[after[k]]
  for (size_t i = 0; i < in.size(); ++i) {
    if (!is_backward(in[i])) continue;
    const int k = std::min(in[i].micro_batch / micro_batches_per_step, steps - 1);
    after[static_cast<size_t>(k)] = static_cast<int>(i);
  }
  for (int k = 1; k < steps; ++k) {
    after[static_cast<size_t>(k)] =
        std::max(after[static_cast<size_t>(k)], after[static_cast<size_t>(k) - 1]);
  }
  StepList out;
  size_t k = 0;
  for (; k < after.size() && after[k] < 0; ++k)
    out.push_back({OpKind::kOptimizer, static_cast<int>(k), 0});
  for (size_t i = 0; i < in.size(); ++i) {
    out.push_back(in[i]);
    for (; k < after.size() && after[k] == static_cast<int>(i); ++k) {
      out.push_back({OpKind::kOptimizer, static_cast<int>(k), 0});
    }
  }
  return out;
}

}  // namespace

StepList pipedream_rank_order(const std::vector<int>& micro_batches, int warmup) {
  StepList steps;
  const int n = static_cast<int>(micro_batches.size());
  warmup = std::clamp(warmup, 0, n);
  int next_f = 0, next_b = 0;
  for (; next_f < warmup; ++next_f) steps.push_back(F(micro_batches[static_cast<size_t>(next_f)]));
  while (next_f < n) {
    steps.push_back(F(micro_batches[static_cast<size_t>(next_f++)]));
    steps.push_back(B(micro_batches[static_cast<size_t>(next_b++)]));
  }
  while (next_b < n) steps.push_back(B(micro_batches[static_cast<size_t>(next_b++)]));
  return steps;
}

ScheduleOrder gpipe_order(int stages, int micro_batches) {
  ScheduleOrder order(static_cast<size_t>(stages));
  for (auto& steps : order) {
    for (int m = 0; m < micro_batches; ++m) steps.push_back(F(m));
    for (int m = 0; m < micro_batches; ++m) steps.push_back(B(m));
  }
  return order;
}

ScheduleOrder gpipe_recompute_order(int stages, int micro_batches) {
  ScheduleOrder order(static_cast<size_t>(stages));
  for (auto& steps : order) {
    for (int m = 0; m < micro_batches; ++m) steps.push_back(F(m));
    for (int m = 0; m < micro_batches; ++m) {
      steps.push_back({OpKind::kRecompute, m, 0});
      steps.push_back(B(m));
    }
  }
  return order;
}

ScheduleOrder one_f_one_b_order(int stages, int micro_batches, const std::vector<int>& in_flight) {
  ScheduleOrder order;
  // Megatron-LM schedules.py: num_warmup_microbatches = min(S - s - 1, M); one more
  // forward starts the steady state, so S - s are in flight at the first backward.
  for (int s = 0; s < stages; ++s) {
    const int depth = in_flight.empty() ? stages - s : in_flight[static_cast<size_t>(s)];
    PIPESIM_ASSERT(depth >= 1, "at least one micro-batch in flight");
    order.push_back(warmup_then_pairs(micro_batches, depth - 1));
  }
  return order;
}

int interleaved_warmup(int stages, int virtual_stages, int micro_batches, int s) {
  return std::min((stages - s - 1) * 2 + (virtual_stages - 1) * stages,
                  micro_batches * virtual_stages);
}

ScheduleOrder interleaved_order(int stages, int virtual_stages, int micro_batches) {
  PIPESIM_ASSERT(micro_batches % stages == 0, "callers check M % S == 0");
  const int S = stages, v = virtual_stages, total = micro_batches * virtual_stages;
  // The k-th forward (backward) of a device: micro-batches go in groups of S, each group
  // through chunk 0, 1, ... (backwards through the chunks in reverse).
  auto step = [&](int k, bool forward) {
    const int group = k / (S * v), in_group = k % (S * v);
    const int chunk = in_group / S;
    const int mb = group * S + in_group % S;
    return forward ? F(mb, chunk) : B(mb, v - 1 - chunk);
  };
  ScheduleOrder order(static_cast<size_t>(S));
  for (int s = 0; s < S; ++s) {
    // Megatron-LM's rule since micro-batch groups (microbatch_group_size_per_vp_stage = S)
    // and PyTorch's ScheduleInterleaved1F1B: no special case for M = S (earlier Megatron-LM
    // ran every forward first then; now the later stages start their 1F1B).
    const int warmup = interleaved_warmup(S, v, micro_batches, s);
    auto& steps = order[static_cast<size_t>(s)];
    for (int k = 0; k < warmup; ++k) steps.push_back(step(k, true));
    for (int k = 0; k < total - warmup; ++k) {
      steps.push_back(step(warmup + k, true));
      steps.push_back(step(k, false));
    }
    for (int k = total - warmup; k < total; ++k) steps.push_back(step(k, false));
  }
  return order;
}

ScheduleOrder zero_bubble_order(int stages, int micro_batches, int c) {
  ScheduleOrder order;
  for (int s = 0; s < stages; ++s) {
    const StepList base =
        warmup_then_pairs(micro_batches, std::min((stages - s - 1) * c, micro_batches));
    const int delay = c * s;
    StepList steps;
    int next_w = 0;
    for (const Step& st : base) {
      steps.push_back(st);
      if (st.kind == OpKind::kBackward && st.micro_batch >= delay) steps.push_back(W(next_w++));
    }
    while (next_w < micro_batches) steps.push_back(W(next_w++));
    order.push_back(std::move(steps));
  }
  return order;
}

std::string format_steps(const StepList& steps, bool show_chunks) {
  std::string out;
  for (const Step& s : steps) {
    if (!out.empty()) out += ' ';
    out += fmt::format("{}{}", op_letter(s.kind), s.micro_batch);
    if (show_chunks) out += fmt::format(".c{}", s.chunk);
  }
  return out;
}

std::optional<std::string> parse_steps(std::string_view line, StepList& out) {
  size_t i = 0;
  auto number = [&](int& v) {
    const auto [ptr, ec] = std::from_chars(line.data() + i, line.data() + line.size(), v);
    if (ec != std::errc() || v < 0) return false;
    i = static_cast<size_t>(ptr - line.data());
    return true;
  };
  while (i < line.size()) {
    if (line[i] == ' ' || line[i] == '\t') {
      ++i;
      continue;
    }
    const size_t start = i;
    Step s;
    switch (line[i]) {
      case 'F':
        s.kind = OpKind::kForward;
        break;
      case 'B':
        s.kind = OpKind::kBackward;
        break;
      case 'W':
        s.kind = OpKind::kWeightGrad;
        break;
      case 'R':
        s.kind = OpKind::kRecompute;
        break;
      default:
        return fmt::format("'{}' at column {} is not a step", line.substr(i, 1), i + 1);
    }
    ++i;
    if (!number(s.micro_batch))
      return fmt::format("step at column {} lacks a micro-batch number", start + 1);
    if (line.substr(i, 2) == ".c") {
      i += 2;
      if (!number(s.chunk))
        return fmt::format("step at column {} lacks a chunk number after '.c'", start + 1);
    }
    if (i < line.size() && line[i] != ' ' && line[i] != '\t') {
      return fmt::format("unexpected '{}' at column {}", line.substr(i, 1), i + 1);
    }
    out.push_back(s);
  }
  return std::nullopt;
}

namespace {

// PipeDream and PipeDream-2BW: no flush, one block of all iterations' micro-batches, an
// optimizer step after every mini-batch.
SlotOrders async_orders(const OrderSpec& spec) {
  const int P = spec.positions, M = spec.micro_batches;
  SlotOrders out;
  out.steps.resize(static_cast<size_t>(P));
  const int N = M * spec.iterations;
  out.blocks = 1;
  out.micro_batches = N;
  const int total_ranks = std::accumulate(spec.replicas.begin(), spec.replicas.end(), 0);
  out.round_robin =
      replicas_take_turns(spec.kind) &&
      std::any_of(spec.replicas.begin(), spec.replicas.end(), [](int r) { return r > 1; });
  int ranks_before = 0;
  for (int p = 0; p < P; ++p) {
    const int r = spec.replicas[static_cast<size_t>(p)];
    for (int j = 0; j < (out.round_robin ? r : 1); ++j) {
      std::vector<int> mbs;
      for (int m = out.round_robin ? j : 0; m < N; m += out.round_robin ? r : 1) mbs.push_back(m);
      // PipeDream runtime: (num_ranks - 1 - ranks in earlier stages) // ranks in this stage.
      const int warmup = out.round_robin ? (total_ranks - 1 - ranks_before) / r : P - p - 1;
      StepList steps = pipedream_rank_order(mbs, warmup);
      if (spec.split_backward) steps = with_weight_grads(steps);
      // A recompute re-runs the forward (with the stashed weights) before the backward.
      steps = with_recomputes(steps, p, P, false, spec.recompute);
      out.steps[static_cast<size_t>(p)].push_back(with_optimizer_steps(steps, M, spec.iterations));
    }
    if (!out.round_robin)
      out.steps[static_cast<size_t>(p)].resize(static_cast<size_t>(r),
                                               out.steps[static_cast<size_t>(p)][0]);
    ranks_before += r;
  }
  return out;
}

// A generated synchronous schedule's order; `places_w` whether it places W itself.
ScheduleOrder generated_order(const OrderSpec& spec, bool& places_w) {
  const int P = spec.positions, M = spec.micro_batches;
  places_w = false;
  switch (spec.kind) {
    case ScheduleKind::kGpipe:
      return gpipe_order(P, M);
    case ScheduleKind::kGpipeRecompute:
      return gpipe_recompute_order(P, M);
    case ScheduleKind::kDapple:
      return one_f_one_b_order(P, M, spec.in_flight);
    case ScheduleKind::kInterleaved:
      return interleaved_order(P, spec.virtual_stages, M);
    case ScheduleKind::kZbH1:
      places_w = true;
      return zero_bubble_order(P, M, 1);
    case ScheduleKind::kZbH2:
      places_w = true;
      return zero_bubble_order(P, M, 2);
    case ScheduleKind::kZb1p:
    case ScheduleKind::kZb2p:
      PIPESIM_ASSERT(spec.costs != nullptr, "zb-1p and zb-2p order from the stage costs");
      places_w = true;
      return zero_bubble_auto_order(*spec.costs, M, spec.kind == ScheduleKind::kZb1p ? 1 : 2);
    case ScheduleKind::kZbV: {
      PIPESIM_ASSERT(spec.costs != nullptr, "zb-v orders from the stage costs");
      auto v = zero_bubble_v_order(*spec.costs, M);
      if (!v) {
        throw InputError(fmt::format("zb-v cannot order {} micro-batches on {} devices", M, P),
                         "at least as many micro-batches per iteration as devices in the pipeline",
                         "strategy.schedule");
      }
      places_w = true;
      return std::move(*v);
    }
    default:
      PIPESIM_ASSERT(false, "asynchronous schedules are handled apart");
  }
  return {};
}

}  // namespace

SlotOrders build_orders(const OrderSpec& spec) {
  if (is_async(spec.kind)) return async_orders(spec);
  const int P = spec.positions, M = spec.micro_batches;
  SlotOrders out;
  out.steps.resize(static_cast<size_t>(P));
  out.blocks = spec.iterations;
  out.micro_batches = M;
  ScheduleOrder base;
  bool places_w = false;
  if (spec.user != nullptr) {
    base = *spec.user;
    places_w = true;  // the user decides where (and whether) W runs
    out.generated = false;
  } else {
    base = generated_order(spec, places_w);
  }
  out.early_input_grad = places_w;
  if (spec.kind == ScheduleKind::kInterleaved && spec.user == nullptr) {
    for (int p = 0; p < P; ++p)
      out.pair_from.push_back(interleaved_warmup(P, spec.virtual_stages, M, p));
  }
  for (int p = 0; p < P; ++p) {
    StepList steps = base[static_cast<size_t>(p)];
    if (spec.split_backward && !places_w) steps = with_weight_grads(steps);
    if (spec.user == nullptr && spec.kind != ScheduleKind::kGpipeRecompute)
      steps = with_recomputes(steps, p, P, is_v_shape(spec.kind), spec.recompute);
    steps.push_back({OpKind::kOptimizer, 0, 0});
    out.steps[static_cast<size_t>(p)].assign(
        static_cast<size_t>(spec.replicas[static_cast<size_t>(p)]), steps);
  }
  return out;
}

}  // namespace pipesim
