#include "topology/cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/connected_components.hpp>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include "core/checked.h"
#include "core/error.h"
#include "core/units.h"
#include "topology/internal/route_graph.h"
#include "topology/internal/shorthand_layout.h"

namespace pipesim {

using routing::EdgeProps;
using routing::Graph;
using routing::saturating_add;

namespace {
constexpr size_t kShards = 16;  // route shards (Cluster::Impl::shards)

// Routing weight of one edge, in half-picoseconds so that switch latency can be split
// evenly over the two edges that enter and leave it. Hop count dominates (2^40 per hop,
// far above any realistic latency sum); host attachments cost like 2^20 hops so they are
// a last resort and never a shortcut between two GPUs of a node (route lengths saturate:
// routing::saturating_add).
int64_t edge_weight(const LinkSpec& spec, Time lat_a, Time lat_b) {
  constexpr int64_t kHop = int64_t{1} << 40;
  const int64_t hops = spec.kind == LinkKind::kHost ? (int64_t{1} << 20) : 1;
  int64_t w = hops * kHop;
  for (const int64_t ps :
       {spec.latency.ps_count(), spec.latency.ps_count(), lat_a.ps_count(), lat_b.ps_count()})
    w = saturating_add(w, ps);
  return w;
}
}  // namespace

void UpPath::push_back(LinkDirection d) {
  PIPESIM_ASSERT(n < hops.size(), "a GPU's way up has at most three links");
  hops[n++] = d;
}

// Routes found so far, in shards by source so that threads rarely wait for each other.
// Each shard's lock guards its routes and the Dijkstra trees of its sources; no lock is
// held while taking another.
struct Cluster::RouteShard {
  std::mutex mutex;
  std::unordered_map<int64_t, Route> routes;
  // Per source: its Dijkstra tree, exact for the whole graph or (partial) for the GPUs of
  // the source's node alone.
  struct Tree {
    std::vector<int32_t> pred;  // 4 bytes a vertex: 10,000 sources of 10,000 vertices, 400 MB
    // partial: the predecessors of the vertices settled before the node's GPUs were.
    std::unordered_map<int32_t, int32_t> settled;
    bool partial = false;
  };
  std::unordered_map<int, Tree> predecessors;
};

struct Cluster::Impl {
  Graph graph;
  std::optional<ShorthandLayout> layout;
  std::unordered_map<std::string, int> vertex_by_name;  // names never change
  std::vector<int> device_of_vertex;                    // -1: a switch or NIC
  std::array<Cluster::RouteShard, kShards> shards;
};

Cluster::Cluster() : impl_(std::make_shared<Impl>()) { renew_revision(); }
Cluster::Cluster(const Cluster&) = default;
Cluster& Cluster::operator=(const Cluster&) = default;
Cluster::Cluster(Cluster&&) noexcept = default;
Cluster& Cluster::operator=(Cluster&&) noexcept = default;
Cluster::~Cluster() = default;

std::string Cluster::direction_name(LinkDirection d) const {
  const Link& l = links_.at(static_cast<size_t>(d / 2));
  const int from = (d % 2 == 0) ? l.a : l.b;
  const int to = (d % 2 == 0) ? l.b : l.a;
  return fmt::format("{}->{}", vertex_names_[static_cast<size_t>(from)],
                     vertex_names_[static_cast<size_t>(to)]);
}

bool Cluster::shorthand() const { return impl_->layout.has_value(); }

int Cluster::device_index(const std::string& name) const {
  const int v = vertex_index(name);
  return v < 0 ? -1 : impl_->device_of_vertex[static_cast<size_t>(v)];
}

int Cluster::vertex_index(const std::string& name) const {
  const auto it = impl_->vertex_by_name.find(name);
  return it == impl_->vertex_by_name.end() ? -1 : it->second;
}

std::vector<int> Cluster::links_between(int vertex_a, int vertex_b) const {
  std::vector<int> out;
  for (size_t i = 0; i < links_.size(); ++i) {
    const Link& l = links_[i];
    if ((l.a == vertex_a && l.b == vertex_b) || (l.a == vertex_b && l.b == vertex_a))
      out.push_back(static_cast<int>(i));
  }
  return out;
}

void Cluster::set_layout(ShorthandLayout layout) {
  impl_->layout = std::move(layout);
  ShorthandLayout& l = *impl_->layout;
  const auto nodes = static_cast<int>(l.model_node.size());
  l.intra_links = -1;
  if (nodes < 2 || !l.leaf_of.empty() || l.nic_up.size() != static_cast<size_t>(nodes * l.nics))
    return;
  // Node n's links, as node 0's: as many, at the same places inside the node and at the
  // fabric, each of the same spec (bandwidth, latency, kind).
  const int intra = l.end_link[0] - l.first_link[0];
  const int fabric = l.nic_up[static_cast<size_t>(l.nics)] / 2 - l.nic_up[0] / 2;
  const int fabric_first = l.nic_up[0] / 2;
  if (l.first_link[0] != 0 || fabric_first != nodes * intra ||
      fabric_first + nodes * fabric != num_links())
    return;
  // (The builder lays every node of one group out alike, so its links match node 0's
  // one by one; a slowed link is a later change, checked when asked.)
  const auto alike = [&](int a, int b) {
    const LinkSpec &x = links_[static_cast<size_t>(a)].spec, &y = links_[static_cast<size_t>(b)].spec;
    return x.bytes_per_s == y.bytes_per_s && x.latency == y.latency && x.kind == y.kind;
  };
  for (int n = 1; n < nodes; ++n) {
    const auto nu = static_cast<size_t>(n);
    if (l.model_node[nu] != 0 || l.first_link[nu] != n * intra ||
        l.end_link[nu] != (n + 1) * intra ||
        l.first_device[nu + 1] - l.first_device[nu] != l.first_device[1] ||
        l.nic_up[nu * static_cast<size_t>(l.nics)] / 2 != fabric_first + n * fabric)
      return;
    for (int i = 0; i < intra; ++i) {
      if (!alike(i, n * intra + i)) return;
    }
    for (int i = 0; i < fabric; ++i) {
      if (!alike(fabric_first + i, fabric_first + n * fabric + i)) return;
    }
  }
  l.intra_links = intra;
  l.fabric_first = fabric_first;
  l.fabric_links = fabric;
}

void Cluster::renew_revision() {
  static std::atomic<uint64_t> next{1};
  revision_ = next.fetch_add(1, std::memory_order_relaxed);
}

void Cluster::own_routes() {
  if (impl_.use_count() == 1) return;
  auto own = std::make_shared<Impl>();
  own->graph = impl_->graph;
  own->layout = impl_->layout;
  own->vertex_by_name = impl_->vertex_by_name;
  own->device_of_vertex = impl_->device_of_vertex;
  impl_ = std::move(own);
}

void Cluster::slow_down_device(int device, double factor) {
  PIPESIM_ASSERT(slowdowns_on_, "slowdowns are added while on");
  devices_.at(static_cast<size_t>(device)).slowdown *= factor;
  slowdowns_.push_back({false, device, factor});
  renew_revision();
}

void Cluster::slow_down_link(int link, double share) {
  PIPESIM_ASSERT(slowdowns_on_, "slowdowns are added while on");
  if (full_bandwidth_.empty()) {
    for (const Link& l : links_) full_bandwidth_.push_back(l.spec.bytes_per_s);
  }
  PIPESIM_ASSERT(link >= 0 && link < num_links(), "a link of the cluster");
  slowdowns_.push_back({true, link, share});
  set_slowdowns(true);  // applies it; cached routes carry the old bottleneck
}

void Cluster::set_slowdowns(bool on) {
  own_routes();
  renew_revision();
  slowdowns_on_ = on;
  for (Device& d : devices_) d.slowdown = 1.0;
  for (size_t i = 0; i < full_bandwidth_.size(); ++i)
    links_[i].spec.bytes_per_s = full_bandwidth_[i];
  if (on) {
    for (const Slowdown& x : slowdowns_) {
      if (x.link)
        links_[static_cast<size_t>(x.index)].spec.bytes_per_s *= x.factor;
      else
        devices_[static_cast<size_t>(x.index)].slowdown *= x.factor;
    }
  }
  for (RouteShard& shard : impl_->shards) {
    std::lock_guard lock(shard.mutex);
    shard.routes.clear();
  }
}

namespace {

// The link directions from `src` to `dst` along a Dijkstra tree rooted at `src`.
template <class Pred>  // int(int vertex): its predecessor
std::vector<LinkDirection> tree_hops(const Graph& g, const std::vector<Link>& links,
                                     const Pred& pred, int src, int dst) {
  std::vector<LinkDirection> hops;
  for (int v = dst; v != src;) {
    const int u = pred(v);
    PIPESIM_ASSERT(u != v, "cluster build guarantees connectivity");
    // Among parallel edges u-v take the cheapest, as Dijkstra did.
    int best_link = -1;
    int64_t best_w = std::numeric_limits<int64_t>::max();
    for (auto [e, end] = boost::out_edges(static_cast<Graph::vertex_descriptor>(u), g); e != end;
         ++e) {
      if (static_cast<int>(boost::target(*e, g)) == v && g[*e].weight < best_w) {
        best_w = g[*e].weight;
        best_link = g[*e].link;
      }
    }
    hops.push_back(2 * best_link + (links[static_cast<size_t>(best_link)].a == u ? 0 : 1));
    v = u;
  }
  std::reverse(hops.begin(), hops.end());
  return hops;
}

}  // namespace

Route Cluster::make_route(std::vector<LinkDirection> hops) const {
  Route r;
  r.bottleneck_bytes_per_s = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < hops.size(); ++i) {
    const Link& l = links_[static_cast<size_t>(hops[i] / 2)];
    r.latency = checked_add(r.latency, l.spec.latency, "a route's latency");
    r.bottleneck_bytes_per_s = std::min(r.bottleneck_bytes_per_s, l.spec.bytes_per_s);
    if (i > 0) {  // the vertex this hop leaves is a switch or GPU in the middle of the path
      const int from = hops[i] % 2 == 0 ? l.a : l.b;
      r.latency =
          checked_add(r.latency, vertex_latency_[static_cast<size_t>(from)], "a route's latency");
    }
  }
  r.hops = std::move(hops);
  return r;
}

Route Cluster::searched_route(int src_device, int dst_device) const {
  const int src = devices_[static_cast<size_t>(src_device)].vertex;
  const int dst = devices_[static_cast<size_t>(dst_device)].vertex;
  const std::vector<int32_t> pred = routing::dijkstra_tree(impl_->graph, src);
  return make_route(tree_hops(
      impl_->graph, links_, [&](int v) { return pred[static_cast<size_t>(v)]; }, src, dst));
}

bool Cluster::shorthand_hops(int src_device, int dst_device,
                             std::vector<LinkDirection>& hops) const {
  const ShorthandLayout& l = *impl_->layout;
  const int ns = devices_[static_cast<size_t>(src_device)].node;
  const int nd = devices_[static_cast<size_t>(dst_device)].node;
  const auto at = [](const std::vector<int>& v, int i) { return v[static_cast<size_t>(i)]; };
  hops.clear();
  if (ns == nd) {  // the model node's route, moved to this node's links
    const int m = at(l.model_node, ns);
    const int shift = at(l.first_device, m) - at(l.first_device, ns);
    const auto& model = route(src_device + shift, dst_device + shift).hops;
    hops.assign(model.begin(), model.end());
    for (LinkDirection& h : hops) {
      // Through the NIC (intra-node latencies so long that the host attachments win): no
      // closed form.
      if (h / 2 < at(l.first_link, m) || h / 2 >= at(l.end_link, m)) return false;
      h += 2 * (at(l.first_link, ns) - at(l.first_link, m));
    }
    return true;
  }
  const auto& up = l.up[static_cast<size_t>(src_device)];
  hops.assign(up.begin(), up.end());
  const auto port = [&](int device, int node) {
    return static_cast<size_t>((device - at(l.first_device, node)) % l.nics);
  };
  const auto nics = static_cast<size_t>(l.nics);
  hops.push_back(l.nic_up[static_cast<size_t>(ns) * nics + port(src_device, ns)]);
  if (!l.leaf_of.empty()) {
    const int ls = l.leaf_of[static_cast<size_t>(ns)], ld = l.leaf_of[static_cast<size_t>(nd)];
    if (ls != ld) {
      hops.push_back(l.leaf_up[static_cast<size_t>(ls)]);
      hops.push_back(reversed(l.leaf_up[static_cast<size_t>(ld)]));
    }
  }
  hops.push_back(reversed(l.nic_up[static_cast<size_t>(nd) * nics + port(dst_device, nd)]));
  const UpPath& down = l.up[static_cast<size_t>(dst_device)];
  for (auto i = down.n; i-- > 0;) hops.push_back(reversed(down.hops[i]));
  return true;
}

int Cluster::nics_per_node() const {
  return impl_->layout ? std::max(1, impl_->layout->nics) : 1;
}

int Cluster::gpus_of_node(int node) const {
  return static_cast<int>(std::count_if(devices_.begin(), devices_.end(),
                                        [&](const Device& d) { return d.node == node; }));
}

int Cluster::nic_of(int device) const {
  const Device& d = this->device(device);
  if (!impl_->layout) return d.node;
  const ShorthandLayout& l = *impl_->layout;
  const int ports = std::max(1, l.nics);
  return d.node * ports + (device - l.first_device[static_cast<size_t>(d.node)]) % ports;
}

const Route& Cluster::route(int src_device, int dst_device) const {
  PIPESIM_ASSERT(src_device >= 0 && src_device < num_devices() && dst_device >= 0 &&
                     dst_device < num_devices(),
                 "route endpoints out of range");
  const int64_t key = static_cast<int64_t>(src_device) * num_devices() + dst_device;
  RouteShard& shard = impl_->shards[static_cast<size_t>(src_device) % kShards];
  {
    std::lock_guard lock(shard.mutex);
    if (auto it = shard.routes.find(key); it != shard.routes.end()) return it->second;
    const ShorthandLayout* l = impl_->layout ? &*impl_->layout : nullptr;
    const int node = devices_[static_cast<size_t>(src_device)].node;
    if (l == nullptr || (node == devices_[static_cast<size_t>(dst_device)].node &&
                         l->model_node[static_cast<size_t>(node)] == node))
      return searched_and_cached(shard, key, src_device, dst_device);
  }
  // Closed form, composed without holding the lock (it may look up a first-node route).
  std::vector<LinkDirection> hops;
  const bool closed = shorthand_hops(src_device, dst_device, hops);
  std::lock_guard lock(shard.mutex);
  if (!closed) return searched_and_cached(shard, key, src_device, dst_device);
  // A racing thread's equal route may stand already; emplace keeps it.
  return shard.routes.emplace(key, make_route(std::move(hops))).first->second;
}

void Cluster::route_hops(int src_device, int dst_device, std::vector<LinkDirection>& hops) const {
  PIPESIM_ASSERT(src_device >= 0 && src_device < num_devices() && dst_device >= 0 &&
                     dst_device < num_devices(),
                 "route endpoints out of range");
  const int node = devices_[static_cast<size_t>(src_device)].node;
  const ShorthandLayout* l = impl_->layout ? &*impl_->layout : nullptr;
  // (A model node's own routes are searched once and kept: the others' are moved from them.)
  if (l != nullptr &&
      (node != devices_[static_cast<size_t>(dst_device)].node ||
       l->model_node[static_cast<size_t>(node)] != node) &&
      shorthand_hops(src_device, dst_device, hops))
    return;
  const auto& kept = route(src_device, dst_device).hops;
  hops.assign(kept.begin(), kept.end());
}

bool Cluster::nodes_interchangeable() const {
  if (!impl_->layout || impl_->layout->intra_links < 0) return false;
  // A slowed link (SPEC section 10) is unlike its counterparts.
  return !slowdowns_on_ || std::none_of(slowdowns_.begin(), slowdowns_.end(),
                                         [](const Slowdown& x) { return x.link; });
}

int Cluster::link_node(LinkDirection d) const {
  const ShorthandLayout& l = *impl_->layout;
  const int link = d / 2;
  if (link < l.fabric_first) return link / l.intra_links;
  return (link - l.fabric_first) / l.fabric_links;
}

std::array<std::pair<int, int>, 2> Cluster::node_links(int node) const {
  const ShorthandLayout& l = *impl_->layout;
  const int fabric = l.fabric_first + node * l.fabric_links;
  return {{{node * l.intra_links, (node + 1) * l.intra_links}, {fabric, fabric + l.fabric_links}}};
}

LinkDirection Cluster::moved_link(LinkDirection d, int to_node) const {
  const ShorthandLayout& l = *impl_->layout;
  const int per = d / 2 < l.fabric_first ? l.intra_links : l.fabric_links;
  return d + 2 * per * (to_node - link_node(d));
}

Time Cluster::leaving_latency(LinkDirection d) const {
  const Link& l = links_[static_cast<size_t>(d / 2)];
  return vertex_latency_[static_cast<size_t>(d % 2 == 0 ? l.a : l.b)];
}

// Dijkstra from the source, its tree kept for the source's other destinations. The
// caller holds the shard's lock.
const Route& Cluster::searched_and_cached(RouteShard& shard, int64_t key, int src_device,
                                          int dst_device) const {
  const int src = devices_[static_cast<size_t>(src_device)].vertex;
  auto& tree = shard.predecessors[src];
  // A shorthand cluster searches routes inside a node only (routes between nodes have a
  // closed form): Dijkstra stops once that node's GPUs (consecutive vertices) are settled,
  // before the rest of a large cluster.
  const int node = devices_[static_cast<size_t>(src_device)].node;
  const bool inside = impl_->layout && node == devices_[static_cast<size_t>(dst_device)].node;
  if ((tree.pred.empty() && !tree.partial) || (tree.partial && !inside)) {
    std::optional<std::pair<int, int>> targets;
    if (inside) {
      const auto& first = impl_->layout->first_device;
      const auto vertex = [&](int d) { return devices_[static_cast<size_t>(d)].vertex; };
      const int lo = first[static_cast<size_t>(node)], hi = first[static_cast<size_t>(node) + 1];
      if (vertex(hi - 1) + 1 - vertex(lo) == hi - lo) targets = {vertex(lo), vertex(hi - 1) + 1};
    }
    if (targets) {
      tree = {{},
              routing::partial_dijkstra_tree(impl_->graph, src, targets->first, targets->second),
              true};
    } else {
      tree = {routing::dijkstra_tree(impl_->graph, src), {}, false};
    }
  }
  const auto pred = [&](int v) {
    return tree.partial ? tree.settled.at(v) : tree.pred[static_cast<size_t>(v)];
  };
  Route r = make_route(tree_hops(impl_->graph, links_, pred, src,
                                 devices_[static_cast<size_t>(dst_device)].vertex));
  return shard.routes.emplace(key, std::move(r)).first->second;
}

Time Cluster::transfer_time(int src_device, int dst_device, int64_t bytes) const {
  if (src_device == dst_device) return Time::zero();
  return transfer_time(route(src_device, dst_device), bytes);
}

Time Cluster::transfer_time(const Route& r, int64_t bytes) {
  if (std::isinf(r.bottleneck_bytes_per_s)) return r.latency;
  return checked_add(r.latency, serialization_time(bytes, r.bottleneck_bytes_per_s),
                     "a transfer time");
}

int ClusterBuilder::add_gpu(std::string name, GpuSpec gpu, int node) {
  const int device = static_cast<int>(devices_.size());
  vertex_by_name_.emplace(name, static_cast<int>(vertices_.size()));
  vertices_.push_back({name, device, Time::zero()});
  devices_.push_back(
      {std::move(name), std::move(gpu), node, static_cast<int>(vertices_.size()) - 1});
  return device;
}

int ClusterBuilder::add_switch(std::string name, Time latency) {
  vertex_by_name_.emplace(name, static_cast<int>(vertices_.size()));
  vertices_.push_back({std::move(name), -1, latency});
  return static_cast<int>(vertices_.size()) - 1;
}

int ClusterBuilder::vertex_of(const std::string& name) const {
  const auto it = vertex_by_name_.find(name);  // the first vertex of that name
  return it == vertex_by_name_.end() ? -1 : it->second;
}

void ClusterBuilder::add_link(int vertex_a, int vertex_b, LinkSpec spec) {
  PIPESIM_ASSERT(vertex_a >= 0 && vertex_b >= 0 && vertex_a < static_cast<int>(vertices_.size()) &&
                     vertex_b < static_cast<int>(vertices_.size()),
                 "link endpoints must exist");
  links_.push_back({vertex_a, vertex_b, std::move(spec)});
}

Cluster ClusterBuilder::build() {
  if (devices_.empty()) throw InputError("the cluster has no GPUs", "at least one device");
  std::set<std::string> names;
  for (const Vertex& v : vertices_) {
    if (!names.insert(v.name).second) {
      throw InputError(fmt::format("name '{}' is used twice", v.name),
                       "unique device and switch names");
    }
  }
  Cluster c;
  Graph& g = c.impl_->graph;
  g = Graph(vertices_.size());
  for (size_t i = 0; i < links_.size(); ++i) {
    const Link& l = links_[i];
    if (l.a == l.b) {
      throw InputError(
          fmt::format("link {} joins '{}' to itself", i, vertices_[static_cast<size_t>(l.a)].name),
          "two different endpoints");
    }
    const int64_t w = edge_weight(l.spec, vertices_[static_cast<size_t>(l.a)].latency,
                                  vertices_[static_cast<size_t>(l.b)].latency);
    boost::add_edge(static_cast<Graph::vertex_descriptor>(l.a),
                    static_cast<Graph::vertex_descriptor>(l.b), EdgeProps{static_cast<int>(i), w},
                    g);
  }
  std::vector<int> component(vertices_.size());
  boost::connected_components(g, component.data());
  const int first = component[static_cast<size_t>(devices_.front().vertex)];
  for (const Device& d : devices_) {
    if (component[static_cast<size_t>(d.vertex)] != first) {
      throw InputError(
          fmt::format("device '{}' cannot reach device '{}'", d.name, devices_.front().name),
          "links that connect every GPU");
    }
  }
  c.devices_ = devices_;
  c.links_ = links_;
  c.impl_->vertex_by_name = vertex_by_name_;
  for (const Vertex& v : vertices_) c.impl_->device_of_vertex.push_back(v.device);
  for (const Vertex& v : vertices_) {
    c.vertex_names_.push_back(v.name);
    c.vertex_latency_.push_back(v.latency);
  }
  int max_node = 0;
  for (const Device& d : devices_) max_node = std::max(max_node, d.node);
  c.num_nodes_ = max_node + 1;
  const GpuSpec& g0 = devices_.front().gpu;
  c.same_memory_ = std::all_of(devices_.begin(), devices_.end(), [&](const Device& d) {
    return d.gpu.memory_bytes == g0.memory_bytes && d.gpu.comm_interference == g0.comm_interference;
  });
  c.same_overheads_ = std::all_of(devices_.begin(), devices_.end(), [&](const Device& d) {
    return d.gpu.reserved_bytes == g0.reserved_bytes && d.gpu.launch_overhead == g0.launch_overhead;
  });
  c.device_nodes_.reserve(devices_.size());
  for (const Device& d : devices_) c.device_nodes_.push_back(d.node);
  return c;
}

}  // namespace pipesim
