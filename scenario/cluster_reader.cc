// The cluster section: a GPU and links per node (the nodes x gpus_per_node shorthand) or
// an explicit graph of devices, switches and links.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

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
               {"preset", "like", "name", "memory", "peak", "peak_fp32", "vector_peak", "fp8_peak",
                "hbm_bandwidth", "reserved", "launch_overhead", "efficiency", "matrix_efficiency",
                "vector_efficiency", "memory_efficiency", "fp8_efficiency",
                "attention_efficiency"});
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
  if (const auto v = n["hbm_bandwidth"]; v.IsDefined())
    g.hbm_bytes_per_s = r.bandwidth(v, child_path(path, "hbm_bandwidth"));
  if (const auto v = n["reserved"]; v.IsDefined())
    g.reserved_bytes = r.bytes(v, child_path(path, "reserved"));
  if (const auto v = n["launch_overhead"]; v.IsDefined())
    g.launch_overhead = r.time(v, child_path(path, "launch_overhead"));
  if (const auto v = n["efficiency"]; v.IsDefined())
    g.efficiency = read_share(r, v, child_path(path, "efficiency"));
  if (const auto v = n["matrix_efficiency"]; v.IsDefined())
    g.matrix_efficiency = read_curve(r, v, child_path(path, "matrix_efficiency"), true);
  if (const auto v = n["vector_efficiency"]; v.IsDefined())
    g.vector_efficiency = read_curve(r, v, child_path(path, "vector_efficiency"), true);
  if (const auto v = n["fp8_efficiency"]; v.IsDefined())
    g.fp8_efficiency = read_curve(r, v, child_path(path, "fp8_efficiency"), true);
  if (const auto v = n["attention_efficiency"]; v.IsDefined())
    g.attention_efficiency = read_curve(r, v, child_path(path, "attention_efficiency"), true);
  if (const auto v = n["memory_efficiency"]; v.IsDefined())
    g.memory_efficiency = read_curve(r, v, child_path(path, "memory_efficiency"), false);
  if (g.memory_bytes <= 0)
    r.fail(n, child_path(path, "memory"), "GPU memory must be positive", "e.g. '32 GiB'");
  // A custom GPU's GEMM curve serves its fp8 GEMMs and fused attention unless given apart.
  if (!n["preset"].IsDefined() && !n["like"].IsDefined() && n["matrix_efficiency"].IsDefined()) {
    if (!n["fp8_efficiency"].IsDefined()) g.fp8_efficiency = g.matrix_efficiency;
    if (!n["attention_efficiency"].IsDefined()) g.attention_efficiency = g.matrix_efficiency;
  }
  // Curves the scenario gives are its own: all of them (a GPU without preset or like
  // needs only the three, its matrix curve serving fp8 and attention), or some of them on a
  // GPU that would otherwise run at the flat 0.5.
  const bool custom = !n["preset"].IsDefined() && !n["like"].IsDefined();
  const auto given = [&](const char* k) { return n[k].IsDefined(); };
  const bool three =
      given("matrix_efficiency") && given("vector_efficiency") && given("memory_efficiency");
  if (given("efficiency") ||
      (three && (custom || (given("attention_efficiency") && given("fp8_efficiency"))))) {
    g.curves = "the scenario's";
    g.curves_borrowed = false;
  } else if (custom && (given("matrix_efficiency") || given("vector_efficiency") ||
                        given("memory_efficiency") || given("attention_efficiency") ||
                        given("fp8_efficiency"))) {
    g.curves = "the scenario's where it gives them, a flat 0.5 share of the peaks elsewhere";
  }
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

}  // namespace

Cluster read_cluster(const Reader& r, const YAML::Node& n) {
  const std::string path = "cluster";
  r.expect_map(n, path,
               {"gpu", "nodes", "gpus_per_node", "intra_node", "inter_node", "fabric", "devices",
                "switches", "links"});
  if (!n["devices"].IsDefined()) {
    for (const char* k : {"switches", "links"}) {
      if (n[k].IsDefined())
        r.fail(n[k], child_path(path, k), "only allowed with cluster.devices",
               "the nodes x gpus_per_node shorthand or an explicit devices/switches/links graph");
    }
    const GpuSpec gpu = read_gpu(r, r.require(n, path, "gpu"), "cluster.gpu");
    const int nodes = n["nodes"].IsDefined()
                          ? static_cast<int>(r.integer(n["nodes"], "cluster.nodes", 1, 100'000))
                          : 1;
    const int per =
        n["gpus_per_node"].IsDefined()
            ? static_cast<int>(r.integer(n["gpus_per_node"], "cluster.gpus_per_node", 1, 1024))
            : 1;
    // Before anything is built: the work estimate's device limit.
    if (static_cast<double>(nodes) * per > kMaxDevices)
      r.fail(n["nodes"], "cluster.nodes",
             fmt::format("{} x {} = {} GPUs", nodes, per, int64_t{nodes} * per),
             fmt::format("nodes x gpus_per_node <= {:.0f}", kMaxDevices));
    ClusterBuilder::ShorthandOptions opts;
    LinkSpec intra = *find_link_preset("nvlink");
    if (const YAML::Node in = n["intra_node"]; in.IsDefined()) {
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
          opts.intra = r.choice<T>(in["topology"], "cluster.intra_node.topology",
                                   {{"mesh", T::kMesh},
                                    {"switch", T::kSwitch},
                                    {"hybrid-cube-mesh", T::kHybridCubeMesh},
                                    {"tree", T::kTree}});
        }
        if (in["gpus_per_switch"].IsDefined()) {
          opts.gpus_per_switch = static_cast<int>(
              r.integer(in["gpus_per_switch"], "cluster.intra_node.gpus_per_switch", 1, 1024));
        }
      }
      intra = r.at(in, "cluster.intra_node", [&] {
        return read_link(r, link.IsMap() && link.size() == 0 ? in : link, "cluster.intra_node",
                         kIntraKinds);
      });
    }
    if (const YAML::Node f = n["fabric"]; f.IsDefined()) {
      r.expect_map(f, "cluster.fabric", {"nodes_per_leaf", "oversubscription", "spine_latency"});
      opts.nodes_per_leaf =
          static_cast<int>(r.integer(r.require(f, "cluster.fabric", "nodes_per_leaf"),
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
    LinkSpec inter = default_link_preset(LinkKind::kEthernet);
    if (n["inter_node"].IsDefined()) {
      inter = read_link(r, n["inter_node"], "cluster.inter_node", kInterKinds);
      if (n["inter_node"].IsMap() && n["inter_node"]["nics"].IsDefined()) {
        opts.nics = static_cast<int>(
            r.integer(n["inter_node"]["nics"], "cluster.inter_node.nics", 1, std::max(1, per)));
      }
    } else if (nodes > 1) {
      r.fail(n, "cluster.inter_node", "missing required key (the cluster has several nodes)",
             "e.g. '{kind: ethernet, bandwidth: 25 Gbit/s, latency: 10 us}'");
    }
    return r.at(n, path,
                [&] { return ClusterBuilder::shorthand(nodes, per, gpu, intra, inter, opts); });
  }
  for (const char* k : {"nodes", "gpus_per_node", "intra_node", "inter_node", "fabric"}) {
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
  for (size_t i = 0; links.IsDefined() && i < links.size(); ++i) {
    const std::string p = fmt::format("cluster.links.{}", i);
    const YAML::Node l = links[i];
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
  return r.at(n, path, [&] { return b.build(); });
}

}  // namespace pipesim::internal
