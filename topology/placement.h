// Which GPUs run which stage. DAPPLE (Fan et al., PPoPP'21, section 4.2) names three
// policies; each takes the stages in pipeline order (copy by copy) and gives stage s its
// `replicas` GPUs:
//   fresh-first   take GPUs from an untouched server first, so a stage's replicas share
//                 a server (NVLink for their all-reduce);
//   append-first  take GPUs from servers already in use first, filling servers before
//                 opening new ones (less fragmentation);
//   scatter-first take GPUs round-robin across servers, spreading stages out.
// Inside a server, stragglers (Device::slowdown > 1) are taken last, so a strategy that
// leaves GPUs idle leaves the slowest ones idle.
#pragma once

#include <string_view>
#include <vector>

#include "core/placement.h"
#include "topology/cluster.h"

namespace pipesim {

enum class PlacementPolicy { kFreshFirst, kAppendFirst, kScatterFirst };

std::string_view to_string(PlacementPolicy p);

// result[copy][stage] = device indices of that stage's replicas. Throws InputError when
// the cluster has fewer GPUs than copies * sum(replicas).
// `group` > 1 allocates in units of that many GPUs (a tensor-parallel group), each unit on
// one server whenever a server has room for a whole unit.
std::vector<std::vector<std::vector<int>>> place(const Cluster& cluster,
                                                 const std::vector<int>& replicas, int copies,
                                                 PlacementPolicy policy,
                                                 const std::vector<int>& group = {});
// Megatron-Core's rank order, for context or expert parallelism: each stage's `copies`
// copies (data-parallel copies x `context` ranks) placed as one block of tensor ranks, then
// context ranks, then copies (units of group x context GPUs), so that consecutive copies
// (an expert group) share a node when they fit. Copy c takes the block's lanes c x
// replicas[s] onwards.
std::vector<std::vector<std::vector<int>>> place_rank_ordered(const Cluster& cluster,
                                                              const std::vector<int>& replicas,
                                                              int copies, int context,
                                                              PlacementPolicy policy,
                                                              const std::vector<int>& group);
// The same with a policy per stage (`policies[s]` for stage s of every copy).
std::vector<std::vector<std::vector<int>>> place(const Cluster& cluster,
                                                 const std::vector<int>& replicas, int copies,
                                                 const std::vector<PlacementPolicy>& policies,
                                                 const std::vector<int>& group = {});

}  // namespace pipesim
