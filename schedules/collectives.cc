#include "schedules/collectives.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "schedules/internal/collective_builder.h"

namespace pipesim {

std::string_view to_string(AllReduceAlgo a) {
  switch (a) {
    case AllReduceAlgo::kRing:
      return "ring";
    case AllReduceAlgo::kTree:
      return "tree";
    case AllReduceAlgo::kHierarchical:
      return "hierarchical";
  }
  return "?";
}

namespace collective {

OpId Builder::send(int from, int to, int64_t bytes, const Deps& deps, OpId extra) {
  return send_to(from, m_[static_cast<size_t>(to)].device, bytes, deps, extra);
}

OpId Builder::send_to(int from, int device, int64_t bytes, const Deps& deps, OpId extra) {
  const OpId id = b_.add(transfer_op(m_[static_cast<size_t>(from)].device, device, bytes, kind_,
                                     tag_.stage, -1, tag_.iteration));
  for (OpId d : deps) {
    if (d != kNone) b_.add_dep(id, d);
  }
  if (extra != kNone) b_.add_dep(id, extra);
  return id;
}

void Builder::ring(const std::vector<int>& ranks, int steps, int64_t chunk,
                   std::vector<Deps>& incoming, bool spans) {
  const size_t n = ranks.size();
  const int copies = spans ? images_.copies : 1;
  const size_t all = n * static_cast<size_t>(copies);
  if (all < 2 || steps < 1) return;
  PIPESIM_ASSERT(copies == 1 || b_.compact_rings(), "implicit copies in compact rings");
  if (b_.compact_rings()) {
    const int64_t sent = checked_mul(chunk, steps, "the bytes of a collective");
    CompactRing ring{0, static_cast<uint32_t>(all), static_cast<uint32_t>(steps), chunk,
                     copies > 1 ? static_cast<uint32_t>(n) : 0};
    for (size_t i = 0; i < n; ++i) {
      const Deps& deps = incoming[static_cast<size_t>(ranks[i])];
      const OpId id =
          copies > 1 && i + 1 == n
              ? send_to(ranks[i], images_.next[static_cast<size_t>(ranks.front())], sent, deps)
              : send(ranks[i], ranks[(i + 1) % n], sent, deps);
      if (i == 0) ring.first = id;
    }
    b_.add_ring(ring);
    for (size_t i = 0; i < n; ++i)
      incoming[static_cast<size_t>(ranks[i])] = {ring.first + static_cast<OpId>(i)};
    return;
  }
  // A member's part ends no earlier than it joins: what waits for the collective waits for
  // the last chunk to arrive and for the member's own ready ops.
  std::vector<Deps> ready(n);
  for (size_t i = 0; i < n; ++i) ready[i] = incoming[static_cast<size_t>(ranks[i])];
  for (int s = 0; s < steps; ++s) {
    std::vector<OpId> next(n);
    for (size_t i = 0; i < n; ++i) {
      next[(i + 1) % n] =
          send(ranks[i], ranks[(i + 1) % n], chunk, incoming[static_cast<size_t>(ranks[i])]);
    }
    for (size_t i = 0; i < n; ++i) incoming[static_cast<size_t>(ranks[i])] = {next[i]};
  }
  for (size_t i = 0; i < n; ++i) {
    // The chunk first: report.cc walks a ring's chain by deps[0].
    Deps& d = incoming[static_cast<size_t>(ranks[i])];
    d.insert(d.end(), ready[i].begin(), ready[i].end());
  }
}

void Builder::tree(int64_t bytes, std::vector<Deps>& incoming) {
  const int n = static_cast<int>(m_.size());
  const int K = tree_chunks(bytes);
  const int64_t chunk = ceil_div(bytes, 2 * int64_t{K});
  std::vector<Deps> finals(static_cast<size_t>(n));
  for (int t = 0; t < 2; ++t) {
    // Tree 0 is heap-shaped over ranks 0..n-1; tree 1 the same over the reversed ranks.
    auto rank = [&](int pos) { return t == 0 ? pos : n - 1 - pos; };
    std::vector<OpId> up_prev(static_cast<size_t>(n), kNone),
        down_prev(static_cast<size_t>(n), kNone);
    for (int k = 0; k < K; ++k) {
      std::vector<OpId> up(static_cast<size_t>(n), kNone), down(static_cast<size_t>(n), kNone);
      // Reduce: children before parents.
      for (int pos = n - 1; pos >= 1; --pos) {
        const int r = rank(pos), parent = rank((pos - 1) / 2);
        const OpId id = send(r, parent, chunk, incoming[static_cast<size_t>(r)],
                             up_prev[static_cast<size_t>(pos)]);
        for (int c : {2 * pos + 1, 2 * pos + 2}) {
          if (c < n) b_.add_dep(id, up[static_cast<size_t>(c)]);
        }
        up[static_cast<size_t>(pos)] = id;
      }
      // Broadcast: parents before children; the root once its children's chunk is in.
      for (int pos = 1; pos < n; ++pos) {
        const int r = rank(pos), ppos = (pos - 1) / 2, parent = rank(ppos);
        Deps deps{down_prev[static_cast<size_t>(pos)]};
        if (ppos == 0) {
          for (OpId d : incoming[static_cast<size_t>(rank(0))]) deps.push_back(d);
          for (int c : {1, 2}) {
            if (c < n) deps.push_back(up[static_cast<size_t>(c)]);
          }
        } else {
          deps.push_back(down[static_cast<size_t>(ppos)]);
        }
        down[static_cast<size_t>(pos)] = send(parent, r, chunk, deps);
      }
      up_prev = up;
      down_prev = down;
    }
    for (int pos = 0; pos < n; ++pos) {
      Deps& f = finals[static_cast<size_t>(rank(pos))];
      if (pos > 0) {
        f.push_back(down_prev[static_cast<size_t>(pos)]);
      } else {
        for (int c : {1, 2}) {
          if (c < n) f.push_back(up_prev[static_cast<size_t>(c)]);
        }
      }
    }
  }
  incoming = std::move(finals);
}

std::vector<std::vector<int>> Builder::by_node() const {
  std::map<int, std::vector<int>> groups;
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(m_.size()); ++i) {
    auto& g = groups[m_[static_cast<size_t>(i)].node];
    if (g.empty()) order.push_back(m_[static_cast<size_t>(i)].node);
    g.push_back(i);
  }
  std::vector<std::vector<int>> out;
  for (int node : order) out.push_back(groups[node]);
  for (const auto& g : out) {
    if (g.size() != out.front().size()) return {};
  }
  return out;
}

std::vector<Deps> ready_of(const std::vector<CollectiveMember>& members) {
  std::vector<Deps> out;
  out.reserve(members.size());
  for (const CollectiveMember& m : members) out.push_back(m.ready);
  return out;
}

void wait_for_done(TaskGraphBuilder& b, const std::vector<CollectiveMember>& members,
                   const std::vector<Deps>& incoming) {
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].done == kNone) continue;
    for (OpId d : incoming[i]) {
      if (d != kNone) b.add_dep(members[i].done, d);
    }
  }
}

}  // namespace collective

std::vector<std::vector<OpId>> add_allreduce(TaskGraphBuilder& b, AllReduceAlgo algo,
                                             const std::vector<CollectiveMember>& members,
                                             int64_t bytes, CollectiveTag tag,
                                             const CopyImages& images) {
  using collective::Deps;
  const int n = static_cast<int>(members.size());
  const int all = n * images.copies;
  std::vector<Deps> incoming = collective::ready_of(members);
  PIPESIM_ASSERT(images.copies == 1 || algo != AllReduceAlgo::kTree, "implicit copies in rings");
  if (all >= 2 && bytes > 0) {
    collective::Builder build(b, members, tag, CommKind::kAllReduce, images);
    std::vector<int> ranks(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) ranks[static_cast<size_t>(i)] = i;
    std::vector<std::vector<int>> nodes;
    if (algo == AllReduceAlgo::kHierarchical) nodes = build.by_node();
    // (The servers of the implicit copies too: those given are whole servers.)
    const auto N = static_cast<int64_t>(nodes.size()) * images.copies;
    if (N > 1 && nodes.front().size() > 1) {
      const auto g = static_cast<int64_t>(nodes.front().size());
      for (const auto& local : nodes)
        build.ring(local, static_cast<int>(g - 1), ceil_div(bytes, g), incoming, false);
      for (size_t l = 0; l < static_cast<size_t>(g); ++l) {
        std::vector<int> across;
        for (const auto& local : nodes) across.push_back(local[l]);
        build.ring(across, static_cast<int>(2 * (N - 1)), ceil_div(bytes, g * N), incoming);
      }
      for (const auto& local : nodes)
        build.ring(local, static_cast<int>(g - 1), ceil_div(bytes, g), incoming, false);
    } else if (algo == AllReduceAlgo::kTree) {
      build.tree(bytes, incoming);
    } else {
      build.ring(ranks, 2 * (all - 1), ceil_div(bytes, all), incoming);
    }
  }
  collective::wait_for_done(b, members, incoming);
  return incoming;
}

}  // namespace pipesim
