// Static memory and every collective of a lowered schedule: the tensor-parallel
// all-reduces (or reduce-scatter + all-gather), the data-parallel gradient all-reduce or
// ZeRO's reduce-scatter, and ZeRO's weight all-gathers.
#include "schedules/internal/lowering.h"

namespace pipesim::lowering {

void Lowering::add_static_memory() {
  // (Every copy holds the same at a position: worked out once, written to each device.)
  for (int p = 0; p < P_; ++p) {
    const int64_t params = rank_params(p);
    const int extra =
        in_.stashed_versions.empty() ? 0 : in_.stashed_versions[static_cast<size_t>(p)];
    // Routed experts' state is sharded over the ranks holding the same experts.
    ZeroBytes z = zero_resident_bytes(dense_rank_params(p), in_.param_bytes, in_.zero,
                                      zero_ranks(p));
    const ZeroBytes ze = zero_resident_bytes(expert_rank_params(p), in_.param_bytes, in_.zero,
                                             zero_ranks(p) > 1 ? expert_data_ranks(p) : 1);
    const char* what = "a device's parameter memory";
    MemBreakdown m{};
    m[static_cast<size_t>(MemCategory::kWeights)] =
        checked_add(checked_add(z.weights, ze.weights, what), gather_buffer(p), what);
    m[static_cast<size_t>(MemCategory::kGradients)] = checked_add(z.gradients, ze.gradients, what);
    m[static_cast<size_t>(MemCategory::kOptimizer)] = checked_add(z.optimizer, ze.optimizer, what);
    m[static_cast<size_t>(MemCategory::kStashedWeights)] =
        checked_mul(extra, checked_mul(params, in_.param_bytes.weights, what), what);
    if (in_.bucket_buffers && (replicas(p) > 1 || copies_ > 1))
      m[static_cast<size_t>(MemCategory::kOther)] =
          checked_mul(params, in_.gradient_bytes_per_param, what);
    // (The copies' devices in one list where the builder has it: position p's lanes at the
    // same place in each copy.)
    const auto all = b_.copy_devices();
    if (all.empty()) {
      for (const int d : placement_[0][static_cast<size_t>(p)]) b_.add_static_memory(d, m);
      continue;
    }
    size_t first = 0;
    for (int q = 0; q < p; ++q) first += static_cast<size_t>(lanes(q));
    const size_t per = all.size() / static_cast<size_t>(copies_);
    const auto n = static_cast<size_t>(lanes(p));
    for (size_t at = first; at < all.size(); at += per) {
      for (size_t j = 0; j < n; ++j) b_.add_static_memory(all[at + j], m);
    }
  }
  for (size_t d = 0; d < in_.reserved_bytes.size(); ++d) {
    if (in_.reserved_bytes[d] != 0)
      b_.add_static_memory(static_cast<int>(d), MemCategory::kOther, in_.reserved_bytes[d]);
  }
}

// The segment a collective issued before part `k` runs beside (its consumer): the first
// part from `k` with compute time (parts of no time issue the next collectives), or the
// number of parts when no part after it could wait.
size_t Lowering::consumer_part(const TpParts& r, size_t k) const {
  for (size_t i = k; i + 1 < r.parts.size(); ++i) {
    if (b_.op(r.parts[i]).duration > Time::zero()) return i;
  }
  return r.parts.size();
}

// A collective issued when part `k` of `r` ends waits for `ready`, that part and what fed
// it (TpParts::gated): a consumer that ran beside its all-gather ends only once the gather
// is in.
std::vector<OpId> Lowering::ready_after(const TpParts& r, size_t k, std::vector<OpId> ready) {
  ready.push_back(r.parts[k]);
  for (const auto& [part, ops] : r.gated) {
    if (part == k) ready.insert(ready.end(), ops.begin(), ops.end());
  }
  return ready;
}

// The collectives between the segments of every tensor-parallel op: ranks of one replica
// all-reduce (or all-gather) after each segment, and each rank's next segment waits for
// the result.
void Lowering::add_tensor_collectives() {
  for (int c = 0; c < built_; ++c) {
    for (int p = 0; p < P_; ++p) {
      const int t = tensor(p);
      if (t == 1) continue;
      for (int blk = 0; blk < blocks_; ++blk) {
        for (const int g : stages_of(p)) {
          for (int m = 0; m < Mb_; ++m) {
            for (int j = 0; j < replicas(p); ++j) {
              const Share share = sample_share(p, j);
              for (const auto* index : {&fwd_, &rec_, &bwd_}) {
                std::vector<TpParts*> ranks;
                for (int k = 0; k < t; ++k) {
                  const OpId first = (*index)[slot(c, blk, g, m, j * t + k)];
                  const auto it = tp_parts_.find(first);
                  if (it != tp_parts_.end()) ranks.push_back(&it->second);
                }
                if (ranks.size() != static_cast<size_t>(t)) continue;
                const TpParts& r0 = *ranks.front();
                for (size_t q = 0; q < r0.collectives.size(); ++q) {
                  const TpCollective& coll = r0.collectives[q];
                  if (coll.bytes == 0 || coll.group != CollectiveGroup::kTensor) continue;
                  // Overlapped with the weight-gradient segment after it (tp_segments):
                  // what follows that segment waits.
                  const bool beside = coll.beside > Time::zero();
                  std::vector<CollectiveMember> members;
                  for (const TpParts* r : ranks) {
                    const int d = b_.op(r->parts[q]).device;
                    members.push_back(
                        {d, node_of(d), ready_after(*r, q, {}), r->parts[q + (beside ? 2 : 1)]});
                  }
                  // The replica's share of the micro-batch's activation.
                  const int64_t bytes = split_bytes(coll.bytes, share);
                  if (coll.kind == TpCollective::Kind::kAllGather) {
                    add_all_gather(b_, members, coll.gather_fp8 ? bytes / 2 : bytes, {g, blk});
                    continue;
                  }
                  if (!in_.sequence_parallel) {
                    add_allreduce(b_, AllReduceAlgo::kRing, members, bytes, {g, blk});
                    continue;
                  }
                  // Sequence parallelism: reduce-scatter into the sequence-split region
                  // (layer norm, dropout), all-gather out of it. Overlapped, the
                  // reduce-scatter runs beside the compute that produces it (`backward`:
                  // the input gradient's, beside the dW GEMM) and the all-gather starts
                  // when both end. Under `backward` what follows waits for the all-gather;
                  // under `full` it runs beside the segment it feeds (Transformer Engine
                  // pipelines it with that GEMM), which waits for the reduce-scatter (the
                  // residual add and norm before that GEMM read its result), and the
                  // segment after that waits for the gather; the collectives issued when
                  // that segment ends wait for it too (gated).
                  const size_t consumer = beside && in_.tensor_overlap == TensorOverlap::kFull
                                              ? consumer_part(r0, q + 2)
                                              : r0.parts.size();
                  const bool feeds = consumer < r0.parts.size();
                  std::vector<CollectiveMember> scatter = members;
                  for (size_t i = 0; i < scatter.size(); ++i)
                    scatter[i].done = feeds ? ranks[i]->parts[consumer] : kNone;
                  const auto shards = add_reduce_scatter(
                      b_, scatter, coll.scatter_fp8 ? bytes / 2 : bytes, {g, blk});
                  for (size_t i = 0; i < members.size(); ++i) {
                    members[i].ready =
                        beside ? ready_after(*ranks[i], q + 1, shards[i]) : shards[i];
                    if (feeds) members[i].done = ranks[i]->parts[consumer + 1];
                  }
                  const auto gathered =
                      add_all_gather(b_, members, coll.gather_fp8 ? bytes / 2 : bytes, {g, blk});
                  for (size_t i = 0; feeds && i < members.size(); ++i)
                    ranks[i]->gated.emplace_back(consumer, gathered[i]);
                }
              }
            }
          }
        }
      }
    }
  }
}

void Lowering::add_group_collectives() {
  using K = TpCollective::Kind;
  for (const CollectiveGroup group :
       {CollectiveGroup::kContext, CollectiveGroup::kExpert, CollectiveGroup::kExpertTensor}) {
    const int n = group == CollectiveGroup::kContext ? in_.context
                  : group == CollectiveGroup::kExpert ? in_.expert
                                                      : in_.expert_tensor;
    if (n < 2) continue;
    for (int p = 0; p < P_; ++p) {
      for (const std::vector<std::pair<int, int>>& members_of : group_members(p, group)) {
        for (int blk = 0; blk < blocks_; ++blk) {
          for (const int g : stages_of(p)) {
            if (!in_.stages[static_cast<size_t>(g)].pieces) continue;
            for (int m = 0; m < Mb_; ++m) {
              for (const auto* index : {&fwd_, &rec_, &bwd_}) {
                // (Members of implicit copies: none of their ops, AllToAllImages.)
                std::vector<const TpParts*> ranks;
                AllToAllImages images;
                for (const auto& [c, lane] : members_of) {
                  if (c >= built_) {
                    images.built.resize(members_of.size(), 1);
                    images.built[ranks.size()] = 0;
                    ranks.push_back(nullptr);
                    continue;
                  }
                  const auto it = tp_parts_.find((*index)[slot(c, blk, g, m, lane)]);
                  if (it != tp_parts_.end()) ranks.push_back(&it->second);
                }
                if (ranks.size() != members_of.size()) continue;
                images.shift = built_ * lanes(p);
                const TpParts& r0 = *ranks.front();
                for (size_t q = 0; q < r0.collectives.size(); ++q) {
                  const TpCollective& coll = r0.collectives[q];
                  if (coll.bytes == 0 || coll.group != group) continue;
                  const bool beside = coll.beside > Time::zero();
                  std::vector<CollectiveMember> members;
                  for (size_t i = 0; i < ranks.size(); ++i) {
                    if (ranks[i] == nullptr) {
                      const auto& [c, lane] = members_of[i];
                      const int d = placement_[static_cast<size_t>(c)][static_cast<size_t>(p)]
                                              [static_cast<size_t>(lane)];
                      members.push_back({d, node_of(d), {}, kNone});
                      continue;
                    }
                    const TpParts* r = ranks[i];
                    const int d = b_.op(r->parts[q]).device;
                    members.push_back(
                        {d, node_of(d), ready_after(*r, q, {}), r->parts[q + (beside ? 2 : 1)]});
                  }
                  const CollectiveTag tag{g, blk};
                  // A replica's share of the micro-batch's bytes.
                  const int64_t bytes = split_bytes(
                      coll.bytes, sample_share(p, members_of.front().second / tensor(p)));
                  PIPESIM_ASSERT(images.built.empty() || coll.kind == K::kAllToAll,
                                 "expert groups across copies exchange all-to-all");
                  if (coll.kind == K::kAllToAll)
                    add_all_to_all(b_, members, bytes, tag, {coll.top_k, coll.experts}, images);
                  else if (coll.kind == K::kReduceScatter)
                    add_reduce_scatter(b_, members, bytes, tag);
                  else
                    add_all_gather(b_, members, bytes, tag);
                }
              }
            }
          }
        }
      }
    }
  }
}

// Gradient all-reduce among the devices of each position before each optimizer step.
void Lowering::add_allreduces() {
  for (auto& [key, members] : optimizers_) {
    // (position, tensor rank, iteration); plain names, so the lambdas below may capture them.
    const int p = std::get<0>(key), it = std::get<2>(key);
    const AllReduceAlgo algo = allreduce_algo(p);
    std::vector<CollectiveMember> group;
    for (const OptimizerStep& m : members) {
      const int d = b_.op(m.op).device;
      group.push_back({d, node_of(d), {m.before}, m.op});
    }
    // ZeRO: each rank reduces its shard of the gradients (ring reduce-scatter); stages 1
    // and 2 then all-gather the updated weights, which the next compute op waits for.
    const bool zero = zero_ranks(p) > 1;
    const auto reduce = [&](int64_t bytes) {
      return zero ? add_reduce_scatter(b_, group, bytes, {p, it}, algo, images_of(group))
                  : add_allreduce(b_, algo, group, bytes, {p, it}, images_of(group));
    };
    if (zero && !gathers_weights(p) && in_.overlap_param_gather) {
      const auto previous = optimizers_.find({p, std::get<1>(key), it - 1});
      add_overlapped_gathers(p, it, members,
                             previous == optimizers_.end() ? nullptr : &previous->second, algo);
    } else if (zero && !gathers_weights(p)) {
      std::vector<CollectiveMember> after;
      for (const OptimizerStep& m : members) {
        const int d = b_.op(m.op).device;
        after.push_back({d, node_of(d), {m.op}, m.next});
      }
      add_all_gather(b_, after, weight_bytes(p), {p, it}, algo, images_of(after));
    }
    // (Experts: once per position and iteration, over every tensor rank's devices.)
    if (separate_experts(p) && std::get<1>(key) == 0) {
      std::vector<OptimizerStep> all;
      for (int k = 0; k < tensor(p); ++k) {
        const auto& lane = optimizers_.at({p, k, it});
        all.insert(all.end(), lane.begin(), lane.end());
      }
      add_expert_reduction(p, it, all);
    }
    const OptimizerStep& first = members.front();
    if (first.buckets.empty()) {  // gradients all ready at once
      const int64_t params = separate_experts(p) ? dense_rank_params(p) : rank_params(p);
      reduce(checked_mul(params, in_.gradient_bytes_per_param, "a gradient all-reduce"));
      continue;
    }
    // One all-reduce per bucket, each once its layers are done on a member and the
    // previous bucket's has finished there (one communication stream per device, as
    // PyTorch DDP with NCCL); the optimizer waits for the last.
    std::vector<std::vector<OpId>> previous(members.size());
    for (size_t b = 0; b < first.buckets.size(); ++b) {
      for (size_t i = 0; i < members.size(); ++i) {
        PIPESIM_ASSERT(members[i].buckets.size() == first.buckets.size(),
                       "replicas share the bucket layout");
        group[i].ready = previous[i];
        group[i].ready.push_back(members[i].buckets[b]);
        group[i].done = b + 1 == first.buckets.size() ? members[i].op : kNone;
      }
      previous = reduce(first.bytes[b]);
    }
  }
}

// overlap_param_gather: the weights the previous step updated (none before the first
// iteration: its gather stands for the steady state's), gathered chunk by chunk in chunk
// order on the device's one communication stream, each beside its chunk's first compute op
// of the iteration and before its second (Megatron-Core dispatches a model chunk's gather
// at the previous chunk's first forward and waits for it before the chunk's forward). Each
// chunk gathers its share of the position's weights (its rank's parameters' share).
void Lowering::add_overlapped_gathers(int p, int it, const std::vector<OptimizerStep>& members,
                                      const std::vector<OptimizerStep>* previous,
                                      AllReduceAlgo algo) {
  const std::vector<int> chunks = stages_of(p);
  int64_t total_params = 0;
  for (const int g : chunks)
    total_params = checked_add(total_params, gathered_params(g), "a device's parameter count");
  const int64_t total = weight_bytes(p);
  int64_t sent = 0, params_before = 0;
  std::vector<std::vector<OpId>> before(members.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    params_before += gathered_params(chunks[c]);
    // (The last chunk takes what rounding left: the gathers move the position's bytes.)
    const int64_t upto =
        c + 1 == chunks.size() || total_params == 0
            ? total
            : static_cast<int64_t>(static_cast<long double>(total) * params_before / total_params);
    const int64_t bytes = upto - sent;
    sent = upto;
    std::vector<CollectiveMember> during;
    for (size_t i = 0; i < members.size(); ++i) {
      const int d = b_.op(members[i].op).device;
      // (The first gather built waits for the previous step; the rest for the gather before.)
      std::vector<OpId> ready = before[i];
      if (ready.empty() && previous != nullptr) ready.push_back(previous->at(i).op);
      const OpId second = c < members[i].second.size() ? members[i].second[c] : kNone;
      during.push_back({d, node_of(d), std::move(ready), second});
    }
    if (bytes <= 0) continue;
    before = add_all_gather(b_, during, bytes, {chunks.size() > 1 ? chunks[c] : p, it}, algo,
                            images_of(during));
  }
}

int Lowering::image_device(int d) const {
  const auto& [c, p, lane] = where_.at(d);
  return placement_[static_cast<size_t>((c + built_) % copies_)][static_cast<size_t>(p)]
                      [static_cast<size_t>(lane)];
}

// Routed experts' gradients, reduced among the devices holding the same experts (member
// index c x lanes + lane alike modulo expert x expert_tensor: Megatron-Core's
// expert-data-parallel group) once each member's
// stage is done with its backward, before its optimizer step; under ZeRO-1 reduce-scattered,
// and the updated experts all-gathered before the next compute op.
void Lowering::add_expert_reduction(int p, int it, const std::vector<OptimizerStep>& members) {
  // By expert (and expert-tensor) rank: member index (copy x lanes + lane) modulo their
  // product.
  std::map<int, std::vector<CollectiveMember>> groups, after;
  for (const OptimizerStep& m : members) {
    const int d = b_.op(m.op).device;
    const int rank =
        expert_ranks() > 1 ? member_of_device_.at(static_cast<size_t>(d)) % expert_ranks() : 0;
    OpId ready = m.before;
    if (!m.buckets.empty()) ready = m.buckets.back();
    groups[rank].push_back({d, node_of(d), {ready}, m.op});
    after[rank].push_back({d, node_of(d), {m.op}, m.next});
  }
  const int64_t bytes =
      checked_mul(expert_rank_params(p), in_.gradient_bytes_per_param, "an expert all-reduce");
  const AllReduceAlgo algo = allreduce_algo(p);
  for (auto& [key, group] : groups) {
    // (With copies implicit, a ring's members are the built copies' share of it; one expert
    // group over every member leaves each expert's gradients on one GPU.)
    if (group.size() * static_cast<size_t>(copies_ / built_) < 2 || expert_data_ranks(p) < 2)
      continue;
    // (Copies built a group at a time hold whole expert groups, so each group's members of
    // this ring are alike and the ring reaches the implicit ones through their images.)
    if (in_.zero == 0) {
      add_allreduce(b_, algo, group, bytes, {p, it}, images_of(group));
      continue;
    }
    add_reduce_scatter(b_, group, bytes, {p, it}, algo, images_of(group));
    add_all_gather(b_, after[key],
                   checked_mul(expert_rank_params(p), in_.param_bytes.gathered, "a weight gather"),
                   {p, it}, algo, images_of(after[key]));
  }
}

// ZeRO-3: before each layer's part of F, R and B, the devices holding copies of its stage
// all-gather the layer's weights (their tensor rank's share), each starting when its
// device is ready.
// Gathers are built in the order the slots issue them, so each can wait for the one
// before it on the same device.
void Lowering::add_weight_gathers() {
  for (const GatherKey& key : gather_order_) {
    Gather& gather = gathers_.at(key);
    for (size_t i = 0; i < gather.members.size(); ++i) {
      if (const auto& before = gather.after[i]) {
        for (OpId d : gathers_.at(before->first).result.at(before->second))
          gather.members[i].ready.push_back(d);
      }
    }
    const int g = std::get<2>(key), p = position(g);
    gather.result = add_all_gather(b_, gather.members,
                                   checked_mul(split_bytes(gather.params, tensor(p)),
                                               in_.param_bytes.gathered, "a weight gather"),
                                   {g, std::get<1>(key) / in_.micro_batches_per_iteration},
                                   allreduce_algo(p), images_of(gather.members));
  }
}

}  // namespace pipesim::lowering
