// The cluster section: a GPU and links per node (the nodes x gpus_per_node shorthand) or
// an explicit graph of devices, switches and links.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <set>

#include "scenario/internal/reader.h"
#include "scenario/internal/sections.h"
#include "scenario/work_estimate.h"
#include "topology/cluster.h"
#include "topology/presets.h"

namespace pipesim::internal {
namespace {

// A share of a peak: a plain number in (0, 1].
double read_share(const Reader& r, const YAML::Node& v, const std::string& path) {
  const std::string e = r.scalar(v, path, "a number in (0, 1]");
  char* end = nullptr;
  const double share = std::strtod(e.c_str(), &end);
  if (end == e.c_str() || *end != '\0' || !(share > 0 && share <= 1))
    r.fail(v, path, fmt::format("'{}' is not a share of the peak", e),
           "a number in (0, 1], e.g. 0.45");
  return share;
}

// A share of the compute speed lost while communicating: a plain number in [0, 0.9].
double read_interference(const Reader& r, const YAML::Node& v, const std::string& path) {
  const std::string e = r.scalar(v, path, "a number in [0, 0.9]");
  char* end = nullptr;
  const double share = std::strtod(e.c_str(), &end);
  if (end == e.c_str() || *end != '\0' || !(share >= 0 && share <= 0.9))
    r.fail(v, path, fmt::format("'{}' is not a share of the compute speed", e),
           "a number in [0, 0.9], e.g. 0.15 (0: communication takes nothing from compute)");
  return share;
}

// The FLOPs of one operation: a number with FLOP, KFLOP, MFLOP, GFLOP, TFLOP or PFLOP.
double read_flop_amount(const Reader& r, const YAML::Node& v, const std::string& path) {
  const std::string allowed =
      "a number with FLOP, KFLOP, MFLOP, GFLOP, TFLOP or PFLOP, e.g. 16 GFLOP";
  const std::string text = r.scalar(v, path, allowed);
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  std::string unit(end == nullptr ? "" : end);
  unit.erase(0, unit.find_first_not_of(' '));
  const std::vector<std::pair<std::string, double>> units{{"FLOP", 1},     {"KFLOP", 1e3},
                                                          {"MFLOP", 1e6},  {"GFLOP", 1e9},
                                                          {"TFLOP", 1e12}, {"PFLOP", 1e15}};
  for (const auto& [name, scale] : units) {
    if (end != text.c_str() && unit == name && x >= 0 && x * scale < 1e30) return x * scale;
  }
  r.fail(v, path, fmt::format("'{}' is not an amount of FLOPs", text), allowed);
}

// An efficiency curve: [{flops: 1 GFLOP, efficiency: 0.6}, ...] (or bytes: for memory),
// sizes strictly increasing.
EfficiencyCurve read_curve(const Reader& r, const YAML::Node& n, const std::string& path,
                           bool flops) {
  const char* key = flops ? "flops" : "bytes";
  const std::string example =
      flops ? "[{flops: 1 GFLOP, efficiency: 0.6}, {flops: 16 GFLOP, efficiency: 0.9}]"
            : "[{bytes: 1 MB, efficiency: 0.6}, {bytes: 100 MB, efficiency: 0.9}]";
  if (!n.IsSequence() || n.size() == 0)
    r.fail(n, path, "expected a non-empty list of points", example);
  EfficiencyCurve c;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string p = fmt::format("{}.{}", path, i);
    r.expect_map(n[i], p, {key, "efficiency"});
    const YAML::Node size = r.require(n[i], p, key);
    EfficiencyPoint pt;
    pt.size = flops ? read_flop_amount(r, size, child_path(p, key))
                    : static_cast<double>(r.bytes(size, child_path(p, key)));
    pt.efficiency = read_share(r, r.require(n[i], p, "efficiency"), child_path(p, "efficiency"));
    if (!c.points.empty() && !(pt.size > c.points.back().size))
      r.fail(size, child_path(p, key), "sizes must increase from one point to the next", example);
    c.points.push_back(pt);
  }
  return c;
}

// The curves a GPU mapping gives: a custom GPU's GEMM curve serves its fp8 GEMMs and fused
// attention unless given apart, and GpuSpec::curves says whose the curves are.
void note_curves(const YAML::Node& n, GpuSpec& g) {
  const bool custom = !n["preset"].IsDefined() && !n["like"].IsDefined();
  const auto given = [&](const char* k) { return n[k].IsDefined(); };
  if (custom && given("matrix_efficiency")) {
    if (!given("fp8_efficiency")) g.fp8_efficiency = g.matrix_efficiency;
    if (!given("attention_efficiency")) g.attention_efficiency = g.matrix_efficiency;
  }
  // NVFP4 GEMMs take the fp8 GEMMs' curve unless given apart (as the presets' do).
  if (!given("fp4_efficiency") && (custom || given("fp8_efficiency") || given("matrix_efficiency")))
    g.fp4_efficiency = g.fp8_efficiency;
  // An attention curve given (or a custom GPU's) serves the Triton kernel too unless that
  // one is given apart.
  if (!given("triton_attention_efficiency") && (custom || given("attention_efficiency")))
    g.triton_attention_efficiency = g.attention_efficiency;
  // Curves the scenario gives are its own: all of them (a GPU without preset or like
  // needs only the three, its matrix curve serving fp8 and attention), or some of them on a
  // GPU that would otherwise run at the flat 0.5.
  const bool three =
      given("matrix_efficiency") && given("vector_efficiency") && given("memory_efficiency");
  if (given("efficiency") ||
      (three && (custom || (given("attention_efficiency") && given("fp8_efficiency"))))) {
    g.curves = "the scenario's";
    g.curves_borrowed = false;
  } else if (custom && (given("matrix_efficiency") || given("vector_efficiency") ||
                        given("memory_efficiency") || given("attention_efficiency") ||
                        given("triton_attention_efficiency") || given("fp8_efficiency") ||
                        given("fp4_efficiency"))) {
    g.curves = "the scenario's where it gives them, a flat 0.5 share of the peaks elsewhere";
  }
  // A datasheet's change to the attention level no longer holds once the scenario gives it.
  // (The Triton kernel's alone leaves the CUDA kernels' doubled level, and the note, as they are.)
  if (given("efficiency") || given("attention_efficiency")) g.curves_note.clear();
}

GpuSpec read_gpu(const Reader& r, const YAML::Node& n, const std::string& path) {
  const std::string allowed = "a preset (" + join(gpu_preset_names()) +
                              ") or a mapping {name, memory, peak, hbm_bandwidth}";
  if (n.IsScalar()) {
    const GpuSpec* g = find_gpu_preset(n.Scalar());
    if (g == nullptr)
      r.fail(n, path,
             fmt::format("unknown GPU preset '{}'{}", n.Scalar(),
                         suggestion(n.Scalar(), gpu_preset_names())),
             allowed);
    return *g;
  }
  r.expect_map(n, path,
               {"preset",
                "like",
                "name",
                "memory",
                "peak",
                "peak_fp32",
                "vector_peak",
                "fp8_peak",
                "fp4_peak",
                "hbm_bandwidth",
                "host_bandwidth",
                "tdp",
                "power_limit",
                "reserved",
                "launch_overhead",
                "efficiency",
                "matrix_efficiency",
                "vector_efficiency",
                "memory_efficiency",
                "fp8_efficiency",
                "fp4_efficiency",
                "attention_efficiency",
                "triton_attention_efficiency",
                "comm_interference"});
  GpuSpec g;
  if (const auto p = n["preset"]; p.IsDefined()) {
    if (n["like"].IsDefined())
      r.fail(n["like"], child_path(path, "like"), "a preset already brings its curves",
             "preset: NAME (datasheet and curves) or like: NAME (curves only), not both");
    g = read_gpu(r, p, child_path(path, "preset"));
  } else if (const auto l = n["like"]; l.IsDefined()) {
    // A GPU of its own datasheet figures on a preset's generation: its efficiency curves.
    if (!l.IsScalar())
      r.fail(l, child_path(path, "like"), "like names a preset", "e.g. 'like: h100-80gb'");
    g.name = "custom";
    g.take_curves(read_gpu(r, l, child_path(path, "like")));
    g.curves_borrowed = true;  // another GPU's fit, whatever that GPU's own standing
  } else {
    g.name = "custom";
    g.curves = "a flat 0.5 share of the peaks, for want of a preset or like:";
    g.curves_borrowed = true;
  }
  if (const auto v = n["name"]; v.IsDefined()) g.name = r.scalar(v, child_path(path, "name"));
  if (const auto v = n["memory"]; v.IsDefined())
    g.memory_bytes = r.bytes(v, child_path(path, "memory"));
  else if (!n["preset"].IsDefined())
    r.fail(n, child_path(path, "memory"), "missing required key", "e.g. 'memory: 32 GiB'");
  if (const auto v = n["peak"]; v.IsDefined()) g.peak_flops = r.flops(v, child_path(path, "peak"));
  if (const auto v = n["peak_fp32"]; v.IsDefined())
    g.peak_fp32_flops = r.flops(v, child_path(path, "peak_fp32"));
  if (const auto v = n["vector_peak"]; v.IsDefined())
    g.vector_flops = r.flops(v, child_path(path, "vector_peak"));
  if (const auto v = n["fp8_peak"]; v.IsDefined())
    g.fp8_flops = r.flops(v, child_path(path, "fp8_peak"));
  if (const auto v = n["fp4_peak"]; v.IsDefined())
    g.fp4_flops = r.flops(v, child_path(path, "fp4_peak"));
  if (const auto v = n["hbm_bandwidth"]; v.IsDefined())
    g.hbm_bytes_per_s = r.bandwidth(v, child_path(path, "hbm_bandwidth"));
  if (const auto v = n["host_bandwidth"]; v.IsDefined())
    g.host_bytes_per_s = r.bandwidth(v, child_path(path, "host_bandwidth"));
  if (const auto v = n["tdp"]; v.IsDefined()) g.tdp_watts = r.power(v, child_path(path, "tdp"));
  if (const auto v = n["power_limit"]; v.IsDefined()) {
    g.power_limit_watts = r.power(v, child_path(path, "power_limit"));
    if (!(g.tdp_watts > 0))
      r.fail(v, child_path(path, "power_limit"),
             "a power limit needs the GPU's rated board power to scale its clock from",
             "a preset, or tdp: the board power its peaks are rated at (e.g. 'tdp: 700 W')");
    // GPUs accept limits down to a quarter or so of their rating (an H100 SXM's least is
    // 200 W); below that the clock law has nothing to stand on.
    if (g.power_limit_watts < 0.25 * g.tdp_watts)
      r.fail(v, child_path(path, "power_limit"),
             fmt::format("{:g} W is below a quarter of {}'s rated {:g} W", g.power_limit_watts,
                         g.name, g.tdp_watts),
             fmt::format("at least {:g} W", 0.25 * g.tdp_watts));
  }
  if (const auto v = n["reserved"]; v.IsDefined())
    g.reserved_bytes = r.bytes(v, child_path(path, "reserved"));
  if (const auto v = n["launch_overhead"]; v.IsDefined())
    g.launch_overhead = r.time(v, child_path(path, "launch_overhead"));
  if (const auto v = n["efficiency"]; v.IsDefined())
    g.efficiency = read_share(r, v, child_path(path, "efficiency"));
  if (const auto v = n["comm_interference"]; v.IsDefined())
    g.comm_interference = read_interference(r, v, child_path(path, "comm_interference"));
  if (const auto v = n["matrix_efficiency"]; v.IsDefined())
    g.matrix_efficiency = read_curve(r, v, child_path(path, "matrix_efficiency"), true);
  if (const auto v = n["vector_efficiency"]; v.IsDefined())
    g.vector_efficiency = read_curve(r, v, child_path(path, "vector_efficiency"), true);
  if (const auto v = n["fp8_efficiency"]; v.IsDefined())
    g.fp8_efficiency = read_curve(r, v, child_path(path, "fp8_efficiency"), true);
  if (const auto v = n["fp4_efficiency"]; v.IsDefined())
    g.fp4_efficiency = read_curve(r, v, child_path(path, "fp4_efficiency"), true);
  if (const auto v = n["attention_efficiency"]; v.IsDefined())
    g.attention_efficiency = read_curve(r, v, child_path(path, "attention_efficiency"), true);
  if (const auto v = n["triton_attention_efficiency"]; v.IsDefined())
    g.triton_attention_efficiency =
        read_curve(r, v, child_path(path, "triton_attention_efficiency"), true);
  if (const auto v = n["memory_efficiency"]; v.IsDefined())
    g.memory_efficiency = read_curve(r, v, child_path(path, "memory_efficiency"), false);
  if (g.memory_bytes <= 0)
    r.fail(n, child_path(path, "memory"), "GPU memory must be positive", "e.g. '32 GiB'");
  note_curves(n, g);
  return g;
}

// `read_by_caller`: a key of the mapping the caller reads (cluster.links' `between`).
LinkSpec read_link(const Reader& r, const YAML::Node& n, const std::string& path,
                   const std::vector<LinkKind>& kinds, const char* read_by_caller = nullptr) {
  std::vector<std::string> kind_names;
  for (LinkKind k : kinds) kind_names.emplace_back(to_string(k));
  std::vector<std::string> presets;
  for (const auto& p : link_preset_names()) {
    if (std::find(kinds.begin(), kinds.end(), find_link_preset(p)->kind) != kinds.end())
      presets.push_back(p);
  }
  const std::string allowed = "a preset (" + join(presets) +
                              ") or a mapping {kind, bandwidth, latency} with kind " +
                              join(kind_names, " | ");
  auto check_kind = [&](const YAML::Node& at, const std::string& p, LinkKind k) {
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) {
      r.fail(at, p, fmt::format("link kind '{}' is not allowed here", to_string(k)),
             "kinds: " + join(kind_names, " | "));
    }
  };
  if (n.IsScalar()) {
    const LinkSpec* l = find_link_preset(n.Scalar());
    if (l == nullptr)
      r.fail(n, path,
             fmt::format("unknown link preset '{}'{}", n.Scalar(), suggestion(n.Scalar(), presets)),
             allowed);
    check_kind(n, path, l->kind);
    return *l;
  }
  std::vector<std::string> keys{"preset", "kind", "bandwidth", "latency"};
  if (path == "cluster.inter_node") keys.emplace_back("nics");  // read by the shorthand
  if (read_by_caller != nullptr) keys.emplace_back(read_by_caller);
  r.expect_map(n, path, keys);
  LinkSpec l;
  if (const auto p = n["preset"]; p.IsDefined()) {
    l = read_link(r, p, child_path(path, "preset"), kinds);
  } else {
    const YAML::Node k = r.require(n, path, "kind");
    const std::string s = r.scalar(k, child_path(path, "kind"));
    const auto kind = parse_link_kind(s);
    if (!kind)
      r.fail(k, child_path(path, "kind"),
             fmt::format("unknown link kind '{}'{}", s, suggestion(s, kind_names)),
             join(kind_names, " | "));
    check_kind(k, child_path(path, "kind"), *kind);
    l = default_link_preset(*kind);
  }
  if (n["preset"].IsDefined() && n["kind"].IsDefined()) {
    r.fail(n["kind"], child_path(path, "kind"), "give either preset or kind, not both", allowed);
  }
  if (n["bandwidth"].IsDefined() || n["latency"].IsDefined()) l.preset = "custom";
  if (const auto v = n["bandwidth"]; v.IsDefined())
    l.bytes_per_s = r.bandwidth(v, child_path(path, "bandwidth"));
  if (const auto v = n["latency"]; v.IsDefined())
    l.latency = r.time(v, child_path(path, "latency"));
  return l;
}

const std::vector<LinkKind> kIntraKinds{LinkKind::kNvLink, LinkKind::kNvSwitch, LinkKind::kPcie};
const std::vector<LinkKind> kInterKinds{LinkKind::kEthernet, LinkKind::kInfiniBand};
const std::vector<LinkKind> kAllKinds{LinkKind::kNvLink, LinkKind::kNvSwitch, LinkKind::kPcie,
                                      LinkKind::kEthernet, LinkKind::kInfiniBand};

// A node's inside (cluster.intra_node, or a node group's): the link, and the layout keys
// the shorthand reads (topology, gpus_per_switch).
void read_intra(const Reader& r, const YAML::Node& in, const std::string& path,
                ClusterBuilder::NodeGroup& g) {
  g.intra = *find_link_preset("nvlink");
  if (!in.IsDefined()) return;
  // The link keys go to read_link; the layout keys are the shorthand's.
  // (Node::operator= would write through `link` into `in`: rebind with reset().)
  YAML::Node link;
  link.reset(in);
  if (in.IsMap()) {
    link.reset(YAML::Node(YAML::NodeType::Map));
    for (auto it = in.begin(); it != in.end(); ++it) {
      const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
      if (key != "topology" && key != "gpus_per_switch") link[key] = it->second;
    }
    if (in["topology"].IsDefined()) {
      using T = ClusterBuilder::IntraTopology;
      g.topology = r.choice<T>(in["topology"], child_path(path, "topology"),
                               {{"mesh", T::kMesh},
                                {"switch", T::kSwitch},
                                {"hybrid-cube-mesh", T::kHybridCubeMesh},
                                {"tree", T::kTree}});
    }
    if (in["gpus_per_switch"].IsDefined()) {
      g.gpus_per_switch = static_cast<int>(
          r.integer(in["gpus_per_switch"], child_path(path, "gpus_per_switch"), 1, 1024));
    }
  }
  g.intra = r.at(in, path, [&] {
    return read_link(r, link.IsMap() && link.size() == 0 ? in : link, path, kIntraKinds);
  });
}

// One kind of node: `nodes` of them (cluster.nodes, or a node group's), their GPU, GPUs per
// node and inside.
ClusterBuilder::NodeGroup read_node_group(const Reader& r, const YAML::Node& n,
                                          const std::string& path) {
  const std::string base = path.empty() ? "cluster" : path;
  const auto key = [&](const char* k) { return child_path(base, k); };
  ClusterBuilder::NodeGroup g;
  g.gpu = read_gpu(r, r.require(n, base, "gpu"), key("gpu"));
  if (n["nodes"].IsDefined())
    g.nodes = static_cast<int>(r.integer(n["nodes"], key("nodes"), 1, 100'000));
  if (n["gpus_per_node"].IsDefined())
    g.gpus_per_node =
        static_cast<int>(r.integer(n["gpus_per_node"], key("gpus_per_node"), 1, 1024));
  read_intra(r, n["intra_node"], key("intra_node"), g);
  return g;
}

// cluster.fabric: a leaf/spine network instead of one fabric switch.
void read_fabric(const Reader& r, const YAML::Node& f, ClusterBuilder::ShorthandOptions& opts) {
  r.expect_map(f, "cluster.fabric", {"nodes_per_leaf", "oversubscription", "spine_latency"});
  opts.nodes_per_leaf = static_cast<int>(r.integer(r.require(f, "cluster.fabric", "nodes_per_leaf"),
                                                   "cluster.fabric.nodes_per_leaf", 1, 1'000'000));
  if (f["oversubscription"].IsDefined()) {
    const std::string s =
        r.scalar(f["oversubscription"], "cluster.fabric.oversubscription", "a number >= 1");
    char* end = nullptr;
    opts.oversubscription = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0' || !(opts.oversubscription >= 1.0) ||
        opts.oversubscription > 1e6) {
      r.fail(f["oversubscription"], "cluster.fabric.oversubscription",
             fmt::format("'{}' is not a ratio >= 1", s), "a number >= 1, e.g. 2 for 2:1");
    }
  }
  if (f["spine_latency"].IsDefined())
    opts.spine_latency = r.time(f["spine_latency"], "cluster.fabric.spine_latency");
}

// The nodes x gpus_per_node shorthand, or its heterogeneous form cluster.node_groups.
Cluster read_shorthand(const Reader& r, const YAML::Node& n) {
  const std::string path = "cluster";
  for (const char* k : {"switches", "links"}) {
    if (n[k].IsDefined())
      r.fail(n[k], child_path(path, k), "only allowed with cluster.devices",
             "the nodes x gpus_per_node shorthand or an explicit devices/switches/links graph");
  }
  std::vector<ClusterBuilder::NodeGroup> groups;
  const YAML::Node list = n["node_groups"];
  if (list.IsDefined()) {
    for (const char* k : {"gpu", "nodes", "gpus_per_node", "intra_node"}) {
      if (n[k].IsDefined())
        r.fail(n[k], child_path(path, k), "cannot be combined with cluster.node_groups",
               "each node group's own gpu, nodes, gpus_per_node and intra_node");
    }
    if (!list.IsSequence() || list.size() == 0)
      r.fail(list, "cluster.node_groups", "expected a non-empty list of node groups",
             "e.g. '[{nodes: 2, gpu: a100-80gb, gpus_per_node: 8}, {nodes: 2, gpu: h100-80gb, "
             "gpus_per_node: 8}]'");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string p = fmt::format("cluster.node_groups.{}", i);
      r.expect_map(list[i], p, {"nodes", "gpu", "gpus_per_node", "intra_node"});
      r.require(list[i], p, "nodes");
      groups.push_back(read_node_group(r, list[i], p));
    }
  } else {
    groups.push_back(read_node_group(r, n, ""));
  }
  double gpus = 0;
  int64_t nodes = 0;
  int fewest = 1 << 30;
  for (const auto& g : groups) {
    gpus += static_cast<double>(g.nodes) * g.gpus_per_node;
    nodes += g.nodes;
    fewest = std::min(fewest, g.gpus_per_node);
  }
  // Before anything is built: the work estimate's device limit.
  if (gpus > kMaxDevices) {
    const std::string allowed = fmt::format("nodes x gpus_per_node <= {:.0f}", kMaxDevices);
    if (list.IsDefined())
      r.fail(list, "cluster.node_groups", fmt::format("{:.0f} GPUs", gpus), allowed);
    r.fail(n["nodes"], "cluster.nodes",
           fmt::format("{} x {} = {:.0f} GPUs", groups[0].nodes, groups[0].gpus_per_node, gpus),
           allowed);
  }
  ClusterBuilder::ShorthandOptions opts;
  if (const YAML::Node f = n["fabric"]; f.IsDefined()) read_fabric(r, f, opts);
  LinkSpec inter = default_link_preset(LinkKind::kEthernet);
  if (n["inter_node"].IsDefined()) {
    inter = read_link(r, n["inter_node"], "cluster.inter_node", kInterKinds);
    if (n["inter_node"].IsMap() && n["inter_node"]["nics"].IsDefined()) {
      opts.nics = static_cast<int>(
          r.integer(n["inter_node"]["nics"], "cluster.inter_node.nics", 1, std::max(1, fewest)));
    }
  } else if (nodes > 1) {
    r.fail(n, "cluster.inter_node", "missing required key (the cluster has several nodes)",
           "e.g. '{kind: ethernet, bandwidth: 25 Gbit/s, latency: 10 us}'");
  }
  return r.at(n, path, [&] { return ClusterBuilder::shorthand(groups, inter, opts); });
}

// The links `name` ("A->B") stands for: those joining vertices A and B, or for two nodes
// ("node0->node1") every link on the routes from GPU i of A to GPU i of B. Throws InputError.
std::vector<int> named_links(const Cluster& c, const std::string& name) {
  const std::string allowed =
      "'A->B' with A and B the ends of a link (GPU, switch or NIC names, as the report's links "
      "list them) or two nodes, e.g. 'node0->node1'";
  const size_t arrow = name.find("->");
  if (arrow == std::string::npos)
    throw InputError(fmt::format("'{}' does not name a link", name), allowed);
  const std::string a = name.substr(0, arrow), b = name.substr(arrow + 2);
  const int va = c.vertex_index(a), vb = c.vertex_index(b);
  if (va >= 0 && vb >= 0) {
    std::vector<int> links = c.links_between(va, vb);
    if (links.empty()) throw InputError(fmt::format("no link joins '{}' and '{}'", a, b), allowed);
    return links;
  }
  const auto node = [&](const std::string& x) {
    int k = -1;
    const auto [ptr, ec] =
        std::from_chars(x.data() + std::min<size_t>(4, x.size()), x.data() + x.size(), k);
    const bool ok = x.rfind("node", 0) == 0 && ec == std::errc() && ptr == x.data() + x.size() &&
                    k >= 0 && k < c.num_nodes();
    return ok ? k : -1;
  };
  const int na = node(a), nb = node(b);
  if (na < 0 || nb < 0 || na == nb) {
    const std::string& bad = va < 0 && na < 0 ? a : b;
    throw InputError(na == nb && na >= 0 ? fmt::format("'{}' joins a node to itself", name)
                                         : fmt::format("no GPU, switch, NIC or node '{}'", bad),
                     allowed);
  }
  std::vector<int> in_a, in_b;
  for (int d = 0; d < c.num_devices(); ++d) {
    if (c.device(d).node == na) in_a.push_back(d);
    if (c.device(d).node == nb) in_b.push_back(d);
  }
  std::set<int> links;
  for (size_t i = 0; i < std::min(in_a.size(), in_b.size()); ++i) {
    for (LinkDirection h : c.route(in_a[i], in_b[i]).hops) {
      if (c.link(h / 2).spec.kind != LinkKind::kHost) links.insert(h / 2);
    }
  }
  return {links.begin(), links.end()};
}

// cluster.slowdown: [{device: NAME, compute: 1.25}, {link: A->B, bandwidth: 0.5}], applied
// after presets (SPEC section 10). A link is named by its two ends (GPU, switch or NIC
// names, as the report's links list them), or by two nodes: then every link on the routes
// between their GPUs (GPU i of one to GPU i of the other).
void read_slowdown(const Reader& r, const YAML::Node& list, Cluster& c) {
  const std::string example =
      "e.g. '[{device: node0/gpu3, compute: 1.25}, {link: node0->node1, bandwidth: 0.5}]'";
  if (!list.IsSequence() || list.size() == 0)
    r.fail(list, "cluster.slowdown", "expected a non-empty list", example);
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string p = fmt::format("cluster.slowdown.{}", i);
    const YAML::Node e = list[i];
    r.expect_map(e, p, {"device", "compute", "link", "bandwidth"});
    const bool device = e["device"].IsDefined();
    if (device == e["link"].IsDefined())
      r.fail(e, p + ".device", device ? "give device or link, not both" : "missing required key",
             example);
    if (device) {
      if (e["bandwidth"].IsDefined())
        r.fail(e["bandwidth"], p + ".bandwidth", "a GPU's slowdown is its compute",
               "'compute: 1.25' (25 % longer per op)");
      const std::string name = r.scalar(e["device"], p + ".device");
      const int d = c.device_index(name);
      if (d < 0) {
        std::vector<std::string> names;
        for (const Device& x : c.devices()) names.push_back(x.name);
        r.fail(e["device"], p + ".device",
               fmt::format("no device '{}'{}", name, suggestion(name, names)),
               fmt::format("a GPU name, {} to {}", names.front(), names.back()));
      }
      const double f = r.real(r.require(e, p, "compute"), p + ".compute", 1, 1000);
      if (c.device(d).slowdown * f > 1000)
        r.fail(e["compute"], p + ".compute",
               fmt::format("{} is slowed down {:g}x in all", name, c.device(d).slowdown * f),
               "slowdowns of one GPU multiplying to at most 1000");
      c.slow_down_device(d, f);
      continue;
    }
    if (e["compute"].IsDefined())
      r.fail(e["compute"], p + ".compute", "a link's slowdown is its bandwidth",
             "'bandwidth: 0.5' (half its bandwidth)");
    const double share = r.real(r.require(e, p, "bandwidth"), p + ".bandwidth", 1e-6, 1);
    const std::string name = r.scalar(e["link"], p + ".link");
    const std::vector<int> links =
        r.at(e["link"], p + ".link", [&] { return named_links(c, name); });
    for (int l : links) {
      // A link slowed down again keeps at least 1 kB/s (times stay within 64 bits).
      if (c.link(l).spec.bytes_per_s * share < 1e3)
        r.fail(e["bandwidth"], p + ".bandwidth",
               fmt::format("{} would carry {:g} B/s", c.direction_name(2 * l),
                           c.link(l).spec.bytes_per_s * share),
               "slowdowns of one link leaving it at least 1 kB/s");
      c.slow_down_link(l, share);
    }
  }
}

// cluster.links.i of an explicit graph, between two devices or switches `b` has.
void add_graph_link(const Reader& r, const YAML::Node& l, const std::string& p,
                    ClusterBuilder& b) {
  r.expect_map(l, p, {"between", "preset", "kind", "bandwidth", "latency"});
  const YAML::Node between = r.require(l, p, "between");
  if (!between.IsSequence() || between.size() != 2)
    r.fail(between, p + ".between", "expected two endpoint names", "e.g. '[g0, sw0]'");
  int ends[2];
  for (size_t e = 0; e < 2; ++e) {
    const std::string name = r.scalar(between[e], fmt::format("{}.between.{}", p, e));
    ends[e] = b.vertex_of(name);
    if (ends[e] < 0)
      r.fail(between[e], fmt::format("{}.between.{}", p, e),
             fmt::format("no device or switch named '{}'", name),
             "a name from cluster.devices or cluster.switches");
  }
  if (ends[0] == ends[1])
    r.fail(between, p + ".between", "a link must join two different endpoints",
           "two different names");
  if (!l["preset"].IsDefined() && !l["kind"].IsDefined())
    r.fail(l, p + ".kind", "missing required key", "a link kind or preset");
  // The link's own node (a copy into a new node would merge yaml-cpp's memory with the
  // whole document's, once per link: quadratic in the links).
  const LinkSpec ls = r.at(l, p, [&] { return read_link(r, l, p, kAllKinds, "between"); });
  b.add_link(ends[0], ends[1], ls);
}

// cluster.devices, switches and links: an explicit graph.
Cluster read_graph(const Reader& r, const YAML::Node& n) {
  const std::string path = "cluster";
  for (const char* k :
       {"nodes", "gpus_per_node", "intra_node", "inter_node", "fabric", "node_groups"}) {
    if (n[k].IsDefined())
      r.fail(n[k], child_path(path, k), "cannot be combined with cluster.devices",
             "the nodes x gpus_per_node shorthand or an explicit devices/switches/links graph");
  }
  std::optional<GpuSpec> default_gpu;
  if (n["gpu"].IsDefined()) default_gpu = read_gpu(r, n["gpu"], "cluster.gpu");
  ClusterBuilder b;
  auto list = [&](const char* key) {
    const YAML::Node l = n[key];
    if (l.IsDefined() && !l.IsSequence())
      r.fail(l, child_path(path, key), fmt::format("expected a list, got {}", Reader::kind(l)),
             "a list of mappings");
    return l;
  };
  const YAML::Node devices = list("devices");
  if (devices.size() == 0)
    r.fail(devices, "cluster.devices", "the list is empty", "at least one device");
  if (static_cast<double>(devices.size()) > kMaxDevices)
    r.fail(devices, "cluster.devices", fmt::format("{} devices", devices.size()),
           fmt::format("at most {:.0f}", kMaxDevices));
  auto check_name = [&](const YAML::Node& at, const std::string& p, const std::string& name) {
    if (name.empty()) r.fail(at, p, "empty name", "a non-empty name");
    if (b.vertex_of(name) >= 0)
      r.fail(at, p, fmt::format("name '{}' is used twice", name), "unique device and switch names");
  };
  for (size_t i = 0; i < devices.size(); ++i) {
    const std::string p = fmt::format("cluster.devices.{}", i);
    const YAML::Node d = devices[i];
    r.expect_map(d, p, {"name", "gpu", "node"});
    const std::string name = r.scalar(r.require(d, p, "name"), p + ".name");
    check_name(d["name"], p + ".name", name);
    GpuSpec gpu;
    if (d["gpu"].IsDefined())
      gpu = read_gpu(r, d["gpu"], p + ".gpu");
    else if (default_gpu)
      gpu = *default_gpu;
    else
      r.fail(d, p + ".gpu", "missing required key (and no cluster.gpu to default to)",
             "a GPU preset or mapping");
    const int node = d["node"].IsDefined()
                         ? static_cast<int>(r.integer(d["node"], p + ".node", 0, 1'000'000))
                         : 0;
    b.add_gpu(name, gpu, node);
  }
  const YAML::Node switches = list("switches");
  for (size_t i = 0; switches.IsDefined() && i < switches.size(); ++i) {
    const std::string p = fmt::format("cluster.switches.{}", i);
    const YAML::Node s = switches[i];
    r.expect_map(s, p, {"name", "latency"});
    const std::string name = r.scalar(r.require(s, p, "name"), p + ".name");
    check_name(s["name"], p + ".name", name);
    b.add_switch(name,
                 s["latency"].IsDefined() ? r.time(s["latency"], p + ".latency") : Time::zero());
  }
  const YAML::Node links = list("links");
  for (size_t i = 0; links.IsDefined() && i < links.size(); ++i)
    add_graph_link(r, links[i], fmt::format("cluster.links.{}", i), b);
  return r.at(n, path, [&] { return b.build(); });
}

}  // namespace

Cluster read_cluster(const Reader& r, const YAML::Node& n) {
  const std::string path = "cluster";
  r.expect_map(n, path,
               {"gpu", "nodes", "gpus_per_node", "intra_node", "inter_node", "fabric", "devices",
                "switches", "links", "node_groups", "slowdown"});
  Cluster c = n["devices"].IsDefined() ? read_graph(r, n) : read_shorthand(r, n);
  if (n["slowdown"].IsDefined()) read_slowdown(r, n["slowdown"], c);
  return c;
}

}  // namespace pipesim::internal
