#include "schedules/lower.h"

#include <algorithm>

#include "core/error.h"

namespace pipesim {

std::vector<StageProfile> stage_profiles(const Model& model, const std::vector<StageSpec>& stages) {
  std::vector<StageProfile> out;
  out.reserve(stages.size());
  for (const StageSpec& s : stages) {
    StageProfile p;
    for (int l = s.first_layer; l <= s.last_layer; ++l) {
      const Layer& layer = model.layers.at(static_cast<size_t>(l));
      p.forward += layer.forward;
      p.backward_input += layer.backward_input;
      p.backward_weight += layer.backward_weight;
      p.optimizer += layer.optimizer;
      p.activation_bytes += layer.activation_bytes;
      p.params += layer.params;
    }
    p.output_bytes = model.layers.at(static_cast<size_t>(s.last_layer)).output_bytes;
    out.push_back(p);
  }
  return out;
}

namespace {

Time split_time(Time t, int r) {
  return Time::ps((t.ps_count() + r - 1) / r);
}
int64_t split_bytes(int64_t b, int r) {
  return (b + r - 1) / r;
}

// Samples replica i of r1 and replica j of r2 share, in units of 1 / (r1 * r2) of a
// micro-batch: replica i covers [i * r2, (i + 1) * r2).
int64_t overlap(int i, int r1, int j, int r2) {
  const int64_t lo = std::max<int64_t>(int64_t{i} * r2, int64_t{j} * r1);
  const int64_t hi = std::min<int64_t>(int64_t{i + 1} * r2, int64_t{j + 1} * r1);
  return std::max<int64_t>(0, hi - lo);
}

constexpr OpId kNone = UINT32_MAX;

}  // namespace

TaskGraph lower(const LoweringInput& in) {
  const int copies = static_cast<int>(in.placement.size());
  PIPESIM_ASSERT(copies > 0, "at least one pipeline copy");
  const int positions = static_cast<int>(in.placement[0].size());
  const int num_stages = static_cast<int>(in.stages.size());
  PIPESIM_ASSERT(positions > 0 && num_stages % positions == 0,
                 "stages are a multiple of positions");
  PIPESIM_ASSERT(static_cast<int>(in.order.size()) == positions, "one order per position");
  const int M = in.micro_batches;
  const int iters = in.iterations;
  int max_r = 1;
  for (const auto& pos : in.placement[0]) max_r = std::max(max_r, static_cast<int>(pos.size()));
  auto replicas_of = [&](int g) {
    return static_cast<int>(in.placement[0][static_cast<size_t>(g % positions)].size());
  };
  auto device_of = [&](int c, int g, int j) {
    return in.placement[static_cast<size_t>(c)][static_cast<size_t>(g % positions)]
                       [static_cast<size_t>(j)];
  };
  bool runs_w = false;
  for (const auto& steps : in.order) {
    for (const Step& s : steps) runs_w = runs_w || s.kind == OpKind::kWeightGrad;
  }

  TaskGraphBuilder b(in.num_devices);
  size_t steps_total = 0;
  for (const auto& steps : in.order) steps_total += steps.size();
  b.reserve(static_cast<size_t>(copies) * iters * max_r * (steps_total * 2 + positions),
            static_cast<size_t>(copies) * iters * max_r * steps_total * 3);

  // Static memory: every replica holds its stages' full weights.
  for (int c = 0; c < copies; ++c) {
    for (int g = 0; g < num_stages; ++g) {
      for (int j = 0; j < replicas_of(g); ++j) {
        const int d = device_of(c, g, j);
        const int64_t p = in.stages[static_cast<size_t>(g)].params;
        b.add_static_memory(d, MemCategory::kWeights, p * in.param_bytes.weights);
        b.add_static_memory(d, MemCategory::kGradients, p * in.param_bytes.gradients);
        b.add_static_memory(d, MemCategory::kOptimizer, p * in.param_bytes.optimizer);
      }
    }
  }
  for (size_t d = 0; d < in.reserved_bytes.size(); ++d) {
    b.add_static_memory(static_cast<int>(d), MemCategory::kOther, in.reserved_bytes[d]);
  }

  // Compute ops, device by device in stream order. index[kind] maps
  // (copy, iteration, stage, micro-batch, replica) to the op.
  const size_t slots = static_cast<size_t>(copies) * iters * num_stages * M * max_r;
  auto slot = [&](int c, int it, int g, int m, int j) {
    return (((static_cast<size_t>(c) * iters + it) * num_stages + g) * M + m) * max_r + j;
  };
  std::vector<OpId> fwd(slots, kNone), bwd(slots, kNone), wgt(slots, kNone), rec(slots, kNone);
  for (int c = 0; c < copies; ++c) {
    for (int p = 0; p < positions; ++p) {
      const auto& devs = in.placement[static_cast<size_t>(c)][static_cast<size_t>(p)];
      const int r = static_cast<int>(devs.size());
      for (int j = 0; j < r; ++j) {
        const int d = devs[static_cast<size_t>(j)];
        for (int it = 0; it < iters; ++it) {
          Time optimizer;
          for (int g = p; g < num_stages; g += positions)
            optimizer += in.stages[static_cast<size_t>(g)].optimizer;
          for (const Step& s : in.order[static_cast<size_t>(p)]) {
            const int g = s.chunk * positions + p;
            PIPESIM_ASSERT(g < num_stages && s.micro_batch >= 0 && s.micro_batch < M,
                           "step within range");
            const StageProfile& sp = in.stages[static_cast<size_t>(g)];
            const int64_t act = split_bytes(sp.activation_bytes, r);
            Op op;
            op.kind = s.kind;
            op.chunk = static_cast<int16_t>(s.chunk);
            op.device = d;
            op.stage = g;
            op.micro_batch = it * M + s.micro_batch;
            op.iteration = it;
            OpId* target = nullptr;
            switch (s.kind) {
              case OpKind::kForward:
                op.duration = split_time(sp.forward, r);
                op.mem_at_start = act;
                target = &fwd[slot(c, it, g, s.micro_batch, j)];
                break;
              case OpKind::kBackward:
                op.duration = split_time(
                    runs_w ? sp.backward_input : sp.backward_input + sp.backward_weight, r);
                if (!runs_w) op.mem_at_end = -act;
                target = &bwd[slot(c, it, g, s.micro_batch, j)];
                break;
              case OpKind::kWeightGrad:
                op.duration = split_time(sp.backward_weight, r);
                op.mem_at_end = -act;
                target = &wgt[slot(c, it, g, s.micro_batch, j)];
                break;
              case OpKind::kRecompute:
                op.duration = split_time(sp.forward, r);
                target = &rec[slot(c, it, g, s.micro_batch, j)];
                break;
              default:
                PIPESIM_ASSERT(false, "orders hold F, B, W and R steps only");
            }
            PIPESIM_ASSERT(*target == kNone, "each step appears once per iteration");
            *target = b.add(op);
          }
          Op opt;
          opt.kind = OpKind::kOptimizer;
          opt.device = d;
          opt.stage = p;
          opt.iteration = it;
          opt.duration = optimizer;
          b.add(opt);
        }
      }
    }
  }

  auto transfer = [&](OpId from, int src, int dst, int g, int mb, int it, int64_t bytes, OpId to) {
    if (src == dst) {
      b.add_dep(to, from);
      return;
    }
    Op t;
    t.kind = OpKind::kTransfer;
    t.mem_category = MemCategory::kOther;
    t.device = src;
    t.peer = dst;
    t.stage = g;
    t.micro_batch = mb;
    t.iteration = it;
    t.bytes = bytes;
    const OpId id = b.add(t);
    b.add_dep(id, from);
    b.add_dep(to, id);
  };

  for (int c = 0; c < copies; ++c) {
    for (int it = 0; it < iters; ++it) {
      for (int g = 0; g < num_stages; ++g) {
        const int r = replicas_of(g);
        for (int m = 0; m < M; ++m) {
          const int mb = it * M + m;
          for (int j = 0; j < r; ++j) {
            const OpId f = fwd[slot(c, it, g, m, j)];
            const OpId bk = bwd[slot(c, it, g, m, j)];
            PIPESIM_ASSERT(f != kNone && bk != kNone,
                           "every micro-batch has F and B on every stage");
            if (const OpId w = wgt[slot(c, it, g, m, j)]; w != kNone) b.add_dep(w, bk);
            if (const OpId rc = rec[slot(c, it, g, m, j)]; rc != kNone) b.add_dep(bk, rc);
            if (g == num_stages - 1) b.add_dep(bk, f);
          }
          if (g + 1 == num_stages) continue;
          // Output of g to g+1 and the gradient back, between every overlapping pair.
          const int r2 = replicas_of(g + 1);
          const int64_t out = in.stages[static_cast<size_t>(g)].output_bytes;
          for (int i = 0; i < r; ++i) {
            for (int j = 0; j < r2; ++j) {
              const int64_t share = overlap(i, r, j, r2);
              if (share == 0) continue;
              const int64_t bytes = out * share / (int64_t{r} * r2);
              const int src = device_of(c, g, i);
              const int dst = device_of(c, g + 1, j);
              transfer(fwd[slot(c, it, g, m, i)], src, dst, g, mb, it, bytes,
                       fwd[slot(c, it, g + 1, m, j)]);
              transfer(bwd[slot(c, it, g + 1, m, j)], dst, src, g + 1, mb, it, bytes,
                       bwd[slot(c, it, g, m, i)]);
            }
          }
        }
      }
    }
  }

  TaskGraph graph = std::move(b).build();
  if (auto problem = graph.validate()) PIPESIM_ASSERT(false, problem->c_str());
  return graph;
}

}  // namespace pipesim
