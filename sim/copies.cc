#include "sim/copies.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/checked.h"
#include "core/error.h"
#include "sim/engine.h"
#include "sim/internal/copy_map.h"

namespace pipesim {
namespace {

using folding::DeviceMap;
using folding::DevicePairs;
using folding::links_match;
using folding::transfer_pairs;

bool same_op(const Op& a, const Op& b) {
  return a.kind == b.kind && a.mem_category == b.mem_category && a.comm == b.comm &&
         a.chunk == b.chunk && a.part == b.part && a.stage == b.stage &&
         a.micro_batch == b.micro_batch && a.iteration == b.iteration &&
         a.duration == b.duration && a.bytes == b.bytes && a.mem_at_start == b.mem_at_start &&
         a.mem_at_end == b.mem_at_end;
}

// The ops split by copy (their device's); `index` the position of each in its copy's list.
// False where an op's device is in no copy or the copies differ in size.
bool split_ops(const TaskGraph& g, const DeviceMap& m, CopyFold& f, std::vector<uint32_t>& index) {
  const auto K = static_cast<size_t>(f.copies);
  f.ops.assign(K, {});
  // (Copies left implicit hold no ops: copy 0 holds them all.)
  const auto built = static_cast<size_t>(std::max(1, g.built_copies() / m.group()));
  for (size_t k = 0; k < built && k < K; ++k) f.ops[k].reserve(g.size() / built + 1);
  index.resize(g.size());
  for (OpId id = 0; id < g.size(); ++id) {
    const int c = m.copy(g.op(id).device);
    if (c < 0) return false;
    auto& ops = f.ops[static_cast<size_t>(c)];
    index[id] = static_cast<uint32_t>(ops.size());
    ops.push_back(id);
  }
  // (Copies left implicit hold no ops.)
  if (g.built_copies() < g.copies())
    return std::all_of(f.ops.begin() + 1, f.ops.end(), [](const auto& ops) { return ops.empty(); });
  return std::all_of(f.ops.begin(), f.ops.end(),
                     [&](const auto& ops) { return ops.size() == f.ops[0].size(); });
}

// Every op of copy k is its copy-0 counterpart moved k copies on (the same fields, its
// devices the images, its deps the images of the counterpart's), and copy 0's ops wait
// for copy 0's only.
bool ops_match(const TaskGraph& g, const DeviceMap& m, const CopyFold& f,
               const std::vector<uint32_t>& index) {
  for (const OpId a : f.ops[0]) {
    for (const OpId x : g.deps(a)) {
      if (m.copy(g.op(x).device) != 0) return false;
    }
  }
  // (Copies left implicit are copy 0's by construction: LoweringInput::built_copies.)
  for (int k = 1; k < f.copies && g.built_copies() == g.copies(); ++k) {
    const auto& ops = f.ops[static_cast<size_t>(k)];
    for (size_t i = 0; i < ops.size(); ++i) {
      const OpId a = f.ops[0][i], b = ops[i];
      const Op& oa = g.op(a);
      const Op& ob = g.op(b);
      if (!same_op(oa, ob) || ob.device != m.image(oa.device, k)) return false;
      if (oa.kind == OpKind::kTransfer &&
          (oa.peer < 0 || m.copy(oa.peer) < 0 || ob.peer != m.image(oa.peer, k)))
        return false;
      // Deps are few: each of b's among the images of a's (a's are copy 0's, their images
      // at the same place in copy k's list), and as many.
      const auto da = g.deps(a), db = g.deps(b);
      if (da.size() != db.size()) return false;
      for (const OpId y : db) {
        if (std::none_of(da.begin(), da.end(), [&](OpId x) { return ops[index[x]] == y; }))
          return false;
      }
    }
  }
  return true;
}

// Each device of a copy runs its counterpart's stream, holds its resident memory and has
// its capacity.
bool devices_match(const TaskGraph& g, const Cluster& cluster, const DeviceMap& m,
                   const CopyFold& f, const std::vector<uint32_t>& index) {
  // Copies left implicit are copy 0's by construction (the same streams and resident
  // memory: LoweringInput::built_copies): on GPUs alike, nothing to tell them apart.
  if (g.built_copies() < g.copies() && cluster.same_memory()) return true;
  for (size_t i = 0; i < m.size(); ++i) {
    const int d = m.device(0, i);
    const auto s0 = g.stream(d);
    for (int k = 1; k < f.copies; ++k) {
      const int e = m.image(d, k);
      if (g.static_memory(e) != g.static_memory(d) ||
          cluster.device(e).gpu.memory_bytes != cluster.device(d).gpu.memory_bytes ||
          cluster.device(e).gpu.comm_interference != cluster.device(d).gpu.comm_interference)
        return false;
      if (g.built_copies() < g.copies()) continue;  // (no ops there)
      const auto sk = g.stream(e);
      if (sk.size() != s0.size()) return false;
      for (size_t j = 0; j < s0.size(); ++j) {
        if (sk[j] != f.ops[static_cast<size_t>(k)][index[s0[j]]]) return false;
      }
    }
  }
  return true;
}

// A ring inside one copy is the image of one of copy 0's; a ring across the copies holds r
// consecutive members in each, copy by copy, and moving one copy on moves its members r
// places along. Sets f.members.
bool rings_match(const TaskGraph& g, const DeviceMap& m, CopyFold& f,
                 const std::vector<uint32_t>& index) {
  const auto rings = g.rings();
  const int K = f.copies;
  std::unordered_map<OpId, uint32_t> ring_at;
  for (uint32_t r = 0; r < rings.size(); ++r) ring_at[rings[r].first] = r;
  const auto image = [&](OpId x, int k) {
    return f.ops[static_cast<size_t>((m.copy(g.op(x).device) + k) % K)][index[x]];
  };
  std::vector<char> seen(rings.size(), 0);
  f.members.assign(rings.size(), 0);
  const bool implicit = g.built_copies() < g.copies();
  for (uint32_t r = 0; r < rings.size(); ++r) {
    const CompactRing& cr = rings[r];
    if (implicit) {  // copy 0's members alone, the others' images by construction
      if (cr.held != 0 && cr.held * static_cast<uint32_t>(K) != cr.n) return false;
      for (uint32_t i = 0; i < cr.members(); ++i) {
        if (m.copy(g.op(cr.first + i).device) != 0) return false;
      }
      f.members[r] = cr.members();
      seen[r] = 1;
      continue;
    }
    if (cr.held != 0) return false;
    const int c0 = m.copy(g.op(cr.first).device);
    bool local = true;
    for (uint32_t i = 0; i < cr.n && local; ++i) local = m.copy(g.op(cr.first + i).device) == c0;
    f.members[r] = cr.n;
    if (!local) {
      const auto per = cr.n / static_cast<uint32_t>(K);
      if (cr.n % static_cast<uint32_t>(K) != 0) return false;
      for (uint32_t i = 0; i < cr.n; ++i) {
        if (m.copy(g.op(cr.first + i).device) != static_cast<int>(i / per) ||
            image(cr.first + i, 1) != cr.first + (i + per) % cr.n)
          return false;
      }
      f.members[r] = per;
      seen[r] = 1;
      continue;
    }
    if (c0 != 0) continue;
    seen[r] = 1;
    for (int k = 1; k < K; ++k) {
      const auto it = ring_at.find(image(cr.first, k));
      if (it == ring_at.end()) return false;
      const CompactRing& ik = rings[it->second];
      if (ik.n != cr.n || ik.steps != cr.steps || ik.chunk != cr.chunk) return false;
      for (uint32_t i = 0; i < cr.n; ++i) {
        if (image(cr.first + i, k) != ik.first + i) return false;
      }
      seen[it->second] = 1;
    }
  }
  return std::all_of(seen.begin(), seen.end(), [](char s) { return s != 0; });
}

// The orbits numbered in the order of their representatives (the lowest direction of
// each orbit comes first, so a pass in order meets it before the others).
void number_orbits_from_reps(CopyFold& f) {
  f.orbit.assign(f.rep.size(), -1);
  f.orbit_rep.clear();
  for (size_t h = 0; h < f.rep.size(); ++h) {
    const LinkDirection r = f.rep[h];
    if (r < 0) continue;
    if (static_cast<size_t>(r) == h) {
      f.orbit[h] = static_cast<int32_t>(f.orbit_rep.size());
      f.orbit_rep.push_back(r);
    } else {
      f.orbit[h] = f.orbit[static_cast<size_t>(r)];
    }
  }
}

// The fold that moves `group` copies of the graph at a time, where it holds.
std::optional<CopyFold> fold_by(const TaskGraph& graph, const Cluster& cluster, int group) {
  DeviceMap m(graph, group);
  if (!m.build()) return std::nullopt;
  CopyFold f;
  f.copies = m.copies();
  std::vector<uint32_t> index;
  // (The links first: where copies share a node's NIC, they fail there at little cost.)
  if (!split_ops(graph, m, f, index) ||
      !links_match(cluster, m, transfer_pairs(graph, f.ops[0]), f) ||
      !rings_match(graph, m, f, index) || !ops_match(graph, m, f, index) ||
      !devices_match(graph, cluster, m, f, index))
    return std::nullopt;
  // (A move of whole nodes numbered its orbits already: sim/copy_links.cc.)
  if (f.orbit.empty()) number_orbits_from_reps(f);
  f.simulated.assign(graph.size(), 0);
  for (const OpId a : f.ops[0]) f.simulated[a] = 1;
  const size_t per = m.size(), K = static_cast<size_t>(f.copies);
  f.per_copy = per;
  f.device_copy = std::move(m).take_copies_of_devices();
  // (The fold's copies lie one after another in the graph's list: its first K x per.)
  const auto all = graph.copy_devices();
  f.devices.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(K * per));
  return f;
}

// Whether the links would let `group` copies at a time fold, judged on a graph that builds
// one copy (`one`, built_copies 1): the group's transfers are copy 0's and their images in
// the next group - 1 copies (within a copy its pipeline and tensor transfers; its share of
// a ring across the copies, whose last member sends to the next copy, as the group's
// last copy does). The ops, rings and devices are checked once the group is built.
bool links_may_fold(const TaskGraph& one, const Cluster& cluster, int group) {
  DeviceMap by_copy(one, 1), by_group(one, group);
  if (!by_copy.build() || !by_group.build()) return false;
  std::vector<OpId> ops(one.size());
  for (OpId id = 0; id < one.size(); ++id) ops[id] = id;
  const DevicePairs copy0 = transfer_pairs(one, ops);
  DevicePairs pairs;
  std::unordered_set<int64_t> known;
  for (int c = 0; c < group; ++c) {
    for (const auto& [s, t] : copy0) {
      if (by_copy.copy(s) < 0 || by_copy.copy(t) < 0) return false;
      const int a = by_copy.image(s, c), b = by_copy.image(t, c);
      if (known.insert(int64_t{a} * one.num_devices() + b).second) pairs.emplace_back(a, b);
    }
  }
  CopyFold f;
  f.copies = by_group.copies();
  return links_match(cluster, by_group, pairs, f);
}

}  // namespace

int CopyFold::lowest_image(int d) const {
  const int c = device_copy[static_cast<size_t>(d)];
  if (c < 0) return d;  // (in no copy: its own image)
  // d's place i in its copy; its images hold place i in every copy.
  const auto per = static_cast<std::ptrdiff_t>(per_copy);
  const auto first = devices.begin() + c * per;
  const auto i = static_cast<size_t>(std::find(first, first + per, d) - first);
  int32_t low = d;
  for (size_t k = 0; k < static_cast<size_t>(copies); ++k)
    low = std::min(low, devices[k * per_copy + i]);
  return low;
}

std::vector<int> fold_groups(int copies) {
  std::vector<int> out;
  for (int group = 1; group <= kFoldLargestGroup && group <= copies / 2; group *= 2) {
    if (copies % group == 0) out.push_back(group);
  }
  return out;
}

std::optional<CopyFold> fold_copies(const TaskGraph& graph, const Cluster& cluster) {
  // Copies taken one at a time, else two, four...: copies that share a node (and its NICs)
  // map onto each other only a node at a time.
  const int K = graph.copies();
  if (graph.built_copies() < K) return fold_by(graph, cluster, graph.built_copies());
  for (const int group : fold_groups(K)) {
    if (auto f = fold_by(graph, cluster, group)) return f;
  }
  return std::nullopt;
}

TaskGraph lower_folded(LoweringInput in, const Cluster& cluster, double max_full_ops,
                       double estimated_full_ops) {
  const auto copies = static_cast<int>(in.placement->size());
  // Every copy's graph: from the groups built, else (none may be built) the caller's word.
  double full_ops = 0;
  bool built = false;
  std::optional<TaskGraph> one;  // the graph of copy 0 alone, where it was built
  for (const int group : fold_groups(copies)) {
    if (!may_build_copies(in, group)) continue;
    // (Nor is a group past the limit itself.)
    if (estimated_full_ops * group / copies > max_full_ops) continue;
    // (Larger groups cost their size to build: where the links already say no, they are not.)
    if (one && !links_may_fold(*one, cluster, group)) continue;
    in.built_copies = group;
    TaskGraph g = lower(in);
    if (auto f = fold_copies(g, cluster)) {
      g.keep_fold(std::make_shared<const CopyFold>(std::move(*f)), cluster.revision());
      return g;
    }
    full_ops = std::max(full_ops, static_cast<double>(g.size()) * copies / group);
    built = true;
    if (group == 1) one = std::move(g);
  }
  if (!built && copies > 1) full_ops = estimated_full_ops;
  if (full_ops > max_full_ops) {
    throw CopiesDoNotFold(
        fmt::format("this run would simulate about {:.3g} ops: its {} data-parallel copies do "
                    "not fold into groups simulated once",
                    full_ops, copies),
        fmt::format("at most {:.3g}; lower training.iterations, global_batch / micro_batch, "
                    "replicas or data",
                    max_full_ops),
        "strategy");
  }
  in.built_copies = 0;
  return lower(in);
}

namespace {

// Each of copy 0's memory changes, followed by its images' at the same moment (the order
// stays the order of time).
void expand_memory_changes(const CopyFold& f, Timeline& tl) {
  if (tl.memory_changes.empty()) return;
  const auto& ops0 = f.ops[0];
  std::vector<MemoryChange> out;
  out.reserve(tl.memory_changes.size() * f.ops.size());
  for (const MemoryChange& c : tl.memory_changes) {
    out.push_back(c);
    const auto at = std::lower_bound(ops0.begin(), ops0.end(), c.op);
    if (at == ops0.end() || *at != c.op) continue;  // an op of no copy
    const auto i = static_cast<size_t>(at - ops0.begin());
    for (size_t k = 1; k < f.ops.size(); ++k) out.push_back({c.time, f.ops[k][i], c.at_end});
  }
  tl.memory_changes = std::move(out);
}

// A representative link's samples on every link of its orbit, each carrying `share` times
// the flows copy 0's saw there: that much of its utilisation.
void expand_link_samples(const CopyFold& f, Timeline& tl) {
  if (tl.link_samples.empty()) return;
  std::vector<std::vector<int32_t>> orbit(f.rep.size());
  for (size_t l = 0; l < f.rep.size(); ++l) {
    if (f.rep[l] >= 0) orbit[static_cast<size_t>(f.rep[l])].push_back(static_cast<int32_t>(l));
  }
  std::vector<LinkSample> out;
  out.reserve(tl.link_samples.size());
  for (const LinkSample& s : tl.link_samples) {
    // (Copy 0's routes name each orbit by its representative: engine.cc.)
    PIPESIM_ASSERT(!orbit[static_cast<size_t>(s.link)].empty(),
                   "link samples fall on orbits' representatives");
    for (const int32_t l : orbit[static_cast<size_t>(s.link)]) {
      out.push_back({s.time, static_cast<LinkDirection>(l),
                     s.utilisation * static_cast<float>(f.share_of(l))});
    }
  }
  tl.link_samples = std::move(out);
}

}  // namespace

LinkStats Timeline::link(LinkDirection l) const {
  if (!orbits) return links[static_cast<size_t>(l)];
  const int32_t o = orbits->orbit[static_cast<size_t>(l)];
  return o < 0 ? LinkStats{} : links[static_cast<size_t>(o)];
}

size_t Timeline::num_link_directions() const {
  return orbits ? orbits->orbit.size() : links.size();
}

void expand(const std::shared_ptr<const CopyFold>& fold, Timeline& tl) {
  const CopyFold& f = *fold;
  tl.folded_copies = f.copies;
  const auto& ops0 = f.ops[0];
  const bool implicit = std::all_of(f.ops.begin() + 1, f.ops.end(),
                                    [](const auto& ops) { return ops.empty(); });
  for (size_t k = 1; k < f.ops.size() && !implicit; ++k) {
    for (size_t i = 0; i < ops0.size(); ++i) {
      tl.start[f.ops[k][i]] = tl.start[ops0[i]];
      tl.end[f.ops[k][i]] = tl.end[ops0[i]];
    }
  }
  if (implicit) {
    // (The engine kept statistics up to the last device of no implicit copy.)
    tl.figures_of.resize(f.device_copy.size());
    for (size_t d = 0; d < tl.figures_of.size(); ++d) tl.figures_of[d] = static_cast<int32_t>(d);
  }
  // (Devices of copies left implicit point at their image, Timeline::device: their own
  // statistics are not copied.)
  const size_t per = f.per_copy;
  for (size_t c = 1; c < static_cast<size_t>(f.copies); ++c) {
    for (size_t i = 0; i < per; ++i) {
      const auto d = static_cast<size_t>(f.devices[c * per + i]);
      if (implicit)
        tl.figures_of[d] = f.devices[i];
      else
        tl.devices[d] = tl.devices[static_cast<size_t>(f.devices[i])];
    }
  }
  // (The engine's links are the orbits: every link direction gets its orbit's figures.)
  // (Every link of an orbit has its share: each gets the orbit's figures times it.)
  std::vector<LinkStats> orbits = std::move(tl.links);
  for (size_t o = 0; o < orbits.size(); ++o) {
    const int32_t share = f.share_of(f.orbit_rep[o]);
    LinkStats& s = orbits[o];
    s.bytes = checked_mul(s.bytes, int64_t{share}, "the bytes a link carries");
    s.peak_flows *= share;
  }
  if (implicit) {  // (each direction read through its orbit, Timeline::link)
    tl.links = std::move(orbits);
    tl.orbits = fold;
  } else {
    tl.links.resize(f.orbit.size());
    for (size_t l = 0; l < tl.links.size(); ++l) {
      const int32_t o = f.orbit[l];
      tl.links[l] = o < 0 ? LinkStats{} : orbits[static_cast<size_t>(o)];
    }
  }
  if (!implicit) expand_memory_changes(f, tl);
  expand_link_samples(f, tl);
  if (!tl.oom.oom) return;
  const int d = tl.oom.device;
  const int low = f.lowest_image(d);
  if (low == d) return;
  tl.oom.device = low;
  // (Copies left implicit hold no ops: the op is copy 0's, its image by its fields.)
  if (tl.oom.op == UINT32_MAX || implicit) return;
  const auto i = static_cast<size_t>(std::lower_bound(ops0.begin(), ops0.end(), tl.oom.op) -
                                     ops0.begin());
  const int k = (f.device_copy[static_cast<size_t>(low)] - f.device_copy[static_cast<size_t>(d)] +
                 f.copies) %
                f.copies;
  tl.oom.op = f.ops[static_cast<size_t>(k)][i];
}

}  // namespace pipesim
