#include "scenario/scenario.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <sstream>

#include "core/checked.h"
#include "core/error.h"
#include "core/units.h"
#include "scenario/default_scenario.h"
#include "scenario/models.h"
#include "scenario/shapes.h"
#include "scenario/zoo.h"
#include "schedules/partition.h"

namespace pipesim {
namespace {

// Upper bound on the ops one scenario may generate, so a typo in a batch size gives an
// error instead of exhausting memory.
constexpr int64_t kMaxComputeOps = 20'000'000;

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string join(const std::vector<std::string>& items, std::string_view sep = ", ") {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

// "; did you mean 'x'?" when a candidate is close enough, else "".
std::string suggestion(std::string_view given, const std::vector<std::string>& candidates) {
  size_t best = std::numeric_limits<size_t>::max();
  std::string pick;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(given, c);
    if (d < best) {
      best = d;
      pick = c;
    }
  }
  if (!pick.empty() && best <= std::max<size_t>(2, given.size() / 3))
    return fmt::format("; did you mean '{}'?", pick);
  return {};
}

// A file's whole contents; nothing when it cannot be read or is a directory.
std::optional<std::string> read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in || std::filesystem::is_directory(path)) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string child_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key);
}

// Reads one YAML document with locations and the list of keys set by --set.
class Reader {
 public:
  Reader(std::string file, std::vector<std::string> overridden)
      : file_(std::move(file)), overridden_(std::move(overridden)) {}

  Location where(const YAML::Node& n, const std::string& path) const {
    for (const auto& o : overridden_) {
      if (path == o || path.starts_with(o + ".")) return {"--set", 0, 0};
    }
    if (!n.IsDefined()) return {file_, 0, 0};
    const YAML::Mark m = n.Mark();
    if (m.is_null()) return {file_, 0, 0};
    return {file_, m.line + 1, m.column + 1};
  }

  [[noreturn]] void fail(const YAML::Node& n, const std::string& path, std::string what,
                         std::string allowed = {}) const {
    throw InputError(std::move(what), std::move(allowed), path, where(n, path));
  }

  // Runs f; an InputError without key/location thrown inside gets this node's.
  template <typename F>
  auto at(const YAML::Node& n, const std::string& path, F&& f) const {
    try {
      return f();
    } catch (InputError& e) {
      e.set_key_if_empty(path);
      e.set_location_if_empty(where(n, path));
      throw;
    }
  }

  void expect_map(const YAML::Node& n, const std::string& path,
                  const std::vector<std::string>& keys) const {
    if (!n.IsMap())
      fail(n, path, fmt::format("expected a mapping, got {}", kind(n)), "keys: " + join(keys));
    std::set<std::string> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar())
        fail(it->first, path, "a key must be a plain name", "keys: " + join(keys));
      const auto key = it->first.Scalar();
      const std::string p = child_path(path, key);
      if (!seen.insert(key).second) fail(it->first, p, "duplicate key", "each key once");
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        fail(it->first, p, "unknown key" + suggestion(key, keys), "keys here: " + join(keys));
      }
    }
  }

  YAML::Node require(const YAML::Node& map, const std::string& path, const std::string& key) const {
    const YAML::Node c = map[key];
    if (!c.IsDefined() || c.IsNull()) fail(map, child_path(path, key), "missing required key");
    return c;
  }

  static std::string kind(const YAML::Node& n) {
    if (n.IsMap()) return "a mapping";
    if (n.IsSequence()) return "a list";
    if (n.IsNull()) return "nothing";
    return fmt::format("'{}'", n.Scalar());
  }

  std::string scalar(const YAML::Node& n, const std::string& path,
                     const std::string& allowed = "a string") const {
    if (!n.IsScalar())
      fail(n, path, fmt::format("expected a single value, got {}", kind(n)), allowed);
    return n.Scalar();
  }

  int64_t integer(const YAML::Node& n, const std::string& path, int64_t lo, int64_t hi) const {
    const std::string allowed = hi == std::numeric_limits<int64_t>::max()
                                    ? fmt::format("a whole number >= {}", lo)
                                    : fmt::format("a whole number from {} to {}", lo, hi);
    const std::string s = scalar(n, path, allowed);
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size())
      fail(n, path, fmt::format("'{}' is not a whole number", s), allowed);
    if (v < lo || v > hi) fail(n, path, fmt::format("{} is out of range", v), allowed);
    return v;
  }

  template <typename Parse>
  auto quantity(const YAML::Node& n, const std::string& path, Parse parse,
                std::string_view units) const {
    const std::string s = scalar(n, path, std::string(units));
    return at(n, path, [&] { return parse(s); });
  }
  Time time(const YAML::Node& n, const std::string& p) const {
    return quantity(n, p, parse_time, kTimeUnits);
  }
  int64_t bytes(const YAML::Node& n, const std::string& p) const {
    return quantity(n, p, parse_bytes, kByteUnits);
  }
  double bandwidth(const YAML::Node& n, const std::string& p) const {
    return quantity(n, p, parse_bandwidth, kBandwidthUnits);
  }
  double flops(const YAML::Node& n, const std::string& p) const {
    return quantity(n, p, parse_flops, kComputeUnits);
  }
  int64_t count(const YAML::Node& n, const std::string& p) const {
    return quantity(n, p, parse_count, kCountUnits);
  }

  template <typename E>
  E choice(const YAML::Node& n, const std::string& path,
           const std::vector<std::pair<std::string, E>>& options) const {
    std::vector<std::string> names;
    for (const auto& [name, v] : options) names.push_back(name);
    const std::string s = scalar(n, path, join(names, " | "));
    for (const auto& [name, v] : options) {
      if (name == s) return v;
    }
    fail(n, path, fmt::format("unknown value '{}'{}", s, suggestion(s, names)), join(names, " | "));
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::vector<std::string> overridden_;
};

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
  r.expect_map(
      n, path,
      {"preset", "name", "memory", "peak", "peak_fp32", "hbm_bandwidth", "reserved", "efficiency"});
  GpuSpec g;
  if (const auto p = n["preset"]; p.IsDefined())
    g = read_gpu(r, p, child_path(path, "preset"));
  else
    g.name = "custom";
  if (const auto v = n["name"]; v.IsDefined()) g.name = r.scalar(v, child_path(path, "name"));
  if (const auto v = n["memory"]; v.IsDefined())
    g.memory_bytes = r.bytes(v, child_path(path, "memory"));
  else if (!n["preset"].IsDefined())
    r.fail(n, child_path(path, "memory"), "missing required key", "e.g. 'memory: 32 GiB'");
  if (const auto v = n["peak"]; v.IsDefined()) g.peak_flops = r.flops(v, child_path(path, "peak"));
  if (const auto v = n["peak_fp32"]; v.IsDefined())
    g.peak_fp32_flops = r.flops(v, child_path(path, "peak_fp32"));
  if (const auto v = n["hbm_bandwidth"]; v.IsDefined())
    g.hbm_bytes_per_s = r.bandwidth(v, child_path(path, "hbm_bandwidth"));
  if (const auto v = n["reserved"]; v.IsDefined())
    g.reserved_bytes = r.bytes(v, child_path(path, "reserved"));
  if (const auto v = n["efficiency"]; v.IsDefined()) {
    const std::string e = r.scalar(v, child_path(path, "efficiency"), "a number in (0, 1]");
    char* end = nullptr;
    g.efficiency = std::strtod(e.c_str(), &end);
    if (end == e.c_str() || *end != '\0' || !(g.efficiency > 0 && g.efficiency <= 1)) {
      r.fail(v, child_path(path, "efficiency"), fmt::format("'{}' is not a share of the peak", e),
             "a number in (0, 1], e.g. 0.45");
    }
  }
  if (g.memory_bytes <= 0)
    r.fail(n, child_path(path, "memory"), "GPU memory must be positive", "e.g. '32 GiB'");
  return g;
}

LinkSpec read_link(const Reader& r, const YAML::Node& n, const std::string& path,
                   const std::vector<LinkKind>& kinds) {
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
  r.expect_map(n, path, {"preset", "kind", "bandwidth", "latency"});
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
    if (int64_t{nodes} * per > 1'000'000)
      r.fail(n["nodes"], "cluster.nodes", "more than 1,000,000 GPUs",
             "nodes x gpus_per_node <= 1000000");
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
    YAML::Node spec(YAML::NodeType::Map);
    for (const char* k : {"preset", "kind", "bandwidth", "latency"}) {
      if (l[k].IsDefined()) spec[k] = l[k];
    }
    // Re-read without `between`, reporting at the link's own location.
    const LinkSpec ls = r.at(l, p, [&] { return read_link(r, spec, p, kAllKinds); });
    b.add_link(ends[0], ends[1], ls);
  }
  return r.at(n, path, [&] { return b.build(); });
}

YAML::Node parse_yaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(
        fmt::format("invalid YAML: {}", e.msg), "a YAML mapping", "",
        {source, e.mark.is_null() ? 0 : e.mark.line + 1, e.mark.is_null() ? 0 : e.mark.column + 1});
  }
}

bool read_flag(const Reader& r, const YAML::Node& n, const std::string& p, bool fallback) {
  if (!n.IsDefined()) return fallback;
  return r.choice<bool>(n, p, {{"true", true}, {"false", false}});
}

// A layer entry's `repeat` (1 when absent), keeping the model within 1,000,000 layers.
int64_t read_repeat(const Reader& r, const YAML::Node& l, const std::string& p, size_t have) {
  const int64_t repeat =
      l["repeat"].IsDefined() ? r.integer(l["repeat"], p + ".repeat", 1, 100'000) : 1;
  if (static_cast<int64_t>(have) + repeat > 1'000'000)
    r.fail(l["repeat"], p + ".repeat", "the model would have more than 1,000,000 layers",
           "a smaller repeat");
  return repeat;
}

// Copy k of a repeated layer is NAME.k; a layer given once keeps its name.
std::string repeated_name(const std::string& base, int64_t k, int64_t repeat) {
  return repeat > 1 ? fmt::format("{}.{}", base, k) : base;
}

void append_repeated(Model& m, const Layer& l, int64_t repeat) {
  for (int64_t k = 0; k < repeat; ++k) {
    m.layers.push_back(l);
    m.layers.back().name = repeated_name(l.name, k, repeat);
  }
}

// model: {generator: transformer, layers, hidden, heads, ffn, sequence, vocab, ...}
Model read_generated_model(const Reader& r, const YAML::Node& n, const Training& t,
                           const GpuSpec& gpu) {
  r.expect_map(n, "model",
               {"name", "generator", "layers", "hidden", "heads", "ffn", "sequence", "vocab",
                "flash_attention", "tie_embeddings"});
  r.choice<int>(n["generator"], "model.generator", {{"transformer", 0}});
  TransformerShape shape;
  shape.layers =
      static_cast<int>(r.integer(r.require(n, "model", "layers"), "model.layers", 1, 100'000));
  shape.hidden = r.integer(r.require(n, "model", "hidden"), "model.hidden", 1, int64_t{1} << 24);
  shape.heads = r.integer(r.require(n, "model", "heads"), "model.heads", 1, int64_t{1} << 16);
  if (shape.hidden % shape.heads != 0) {
    r.fail(n["heads"], "model.heads",
           fmt::format("{} heads do not divide hidden {}", shape.heads, shape.hidden),
           "a divisor of model.hidden");
  }
  shape.ffn = n["ffn"].IsDefined() ? r.integer(n["ffn"], "model.ffn", 1, int64_t{1} << 26)
                                   : 4 * shape.hidden;
  shape.sequence =
      r.integer(r.require(n, "model", "sequence"), "model.sequence", 1, int64_t{1} << 24);
  shape.vocab = r.integer(r.require(n, "model", "vocab"), "model.vocab", 1, int64_t{1} << 26);
  shape.flash_attention =
      read_flag(r, n["flash_attention"], "model.flash_attention", shape.flash_attention);
  shape.tie_embeddings =
      read_flag(r, n["tie_embeddings"], "model.tie_embeddings", shape.tie_embeddings);
  Model m = r.at(n, "model", [&] { return transformer_model(shape, t, gpu); });
  if (n["name"].IsDefined()) m.name = r.scalar(n["name"], "model.name");
  return m;
}

// model: {profile: layers.csv}: one row per layer with a header naming the columns
// (name, forward, backward or backward_input + backward_weight, activation, output,
// params, optimizer, repeat); every cell with its unit, as in the YAML form. The path is
// relative to the scenario file. Errors point at the CSV's line and column.
Model read_profile_csv(std::istream& in, const std::string& file) {
  const std::vector<std::string> known{
      "name",       "forward", "backward", "backward_input", "backward_weight",
      "activation", "output",  "params",   "optimizer",      "repeat"};
  auto split = [](const std::string& line) {
    std::vector<std::pair<std::string, int>> cells;  // text, 1-based column
    size_t start = 0;
    for (;;) {
      const size_t comma = line.find(',', start);
      std::string cell =
          line.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const size_t b = cell.find_first_not_of(" \t\r"), e = cell.find_last_not_of(" \t\r");
      cells.emplace_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1),
                         static_cast<int>(start + (b == std::string::npos ? 0 : b)) + 1);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return cells;
  };
  std::string line;
  int lineno = 1;
  if (!std::getline(in, line))
    throw InputError("the profile is empty", "a header row, then one row per layer",
                     "model.profile", {file});
  const auto header = split(line);
  std::vector<std::string> columns;
  for (const auto& [name, col] : header) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw InputError(fmt::format("unknown column '{}'{}", name, suggestion(name, known)),
                       "columns: " + join(known), "model.profile", {file, lineno, col});
    }
    columns.push_back(name);
  }
  auto has = [&](const char* c) {
    return std::find(columns.begin(), columns.end(), c) != columns.end();
  };
  if (!has("forward") || !(has("backward") || (has("backward_input") && has("backward_weight")))) {
    throw InputError("the header lacks forward and backward columns",
                     "forward, and backward or backward_input + backward_weight", "model.profile",
                     {file, 1, 1});
  }
  Model m;
  m.name = std::filesystem::path(file).stem().string();
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto cells = split(line);
    if (cells.size() != columns.size()) {
      throw InputError(fmt::format("{} cells for {} columns", cells.size(), columns.size()),
                       "one cell per column", "model.profile", {file, lineno, 1});
    }
    Layer l;
    l.name = fmt::format("layer{}", m.layers.size());
    int64_t repeat = 1;
    for (size_t k = 0; k < cells.size(); ++k) {
      const std::string& c = columns[k];
      const std::string& v = cells[k].first;
      try {
        if (c == "name")
          l.name = v;
        else if (c == "forward")
          l.forward = parse_time(v);
        else if (c == "backward")
          l.backward_input = parse_time(v);
        else if (c == "backward_input") {
          l.backward_input = parse_time(v);
          l.split_backward = true;
        } else if (c == "backward_weight") {
          l.backward_weight = parse_time(v);
          l.split_backward = true;
        } else if (c == "activation")
          l.activation_bytes = parse_bytes(v);
        else if (c == "output")
          l.output_bytes = parse_bytes(v);
        else if (c == "params")
          l.params = parse_count(v);
        else if (c == "optimizer")
          l.optimizer = parse_time(v);
        else if (c == "repeat") {
          repeat = parse_count(v);
          if (repeat < 1 || repeat > 100'000)
            throw InputError(fmt::format("repeat {} is out of range", repeat), "1 to 100000");
        }
      } catch (InputError& e) {
        e.set_key_if_empty(fmt::format("model.profile.{}", c));
        e.set_location_if_empty({file, lineno, cells[k].second});
        throw;
      }
    }
    if (static_cast<int64_t>(m.layers.size()) + repeat > 1'000'000) {
      throw InputError("the model would have more than 1,000,000 layers",
                       "fewer rows or a smaller repeat", "model.profile", {file, lineno, 1});
    }
    append_repeated(m, l, repeat);
  }
  if (m.layers.empty())
    throw InputError("the profile has no layers", "one row per layer", "model.profile",
                     {file, lineno, 1});
  return m;
}

// PipeDream's profile graph (graph/graph.py): one line per node,
//   ID -- DESCRIPTION -- forward_compute_time=MS, backward_compute_time=MS,
//         activation_size=BYTES, parameter_size=BYTES[ -- stage_id=N]
// and one indented line per edge, "ID -- ID". Nodes become layers in topological order
// (ties in file order); source nodes described as "Input..." are the model's input. Times
// are milliseconds; activation_size (a node's output, a list "[a; b]" summed) is what the
// layer keeps for its backward; a layer's output is every node's activation that crosses
// the cut after it; parameter_size counts fp32 bytes, 4 per parameter.
Model read_profile_graph(std::istream& in, const std::string& file) {
  struct Node {
    std::string id, desc;
    double fwd_ms = 0, bwd_ms = 0, activation = 0, param_bytes = 0;
    int line = 0;
  };
  std::vector<Node> nodes;
  std::map<std::string, size_t> index;
  std::vector<std::vector<size_t>> succ;
  std::vector<int> indeg;
  const std::string allowed =
      "'ID -- DESCRIPTION -- forward_compute_time=MS, backward_compute_time=MS, "
      "activation_size=BYTES, parameter_size=BYTES' or an indented edge 'ID -- ID'";
  auto split = [](std::string_view s, std::string_view sep) {
    std::vector<std::string> out;
    for (size_t start = 0;;) {
      const size_t at = s.find(sep, start);
      out.emplace_back(s.substr(start, at == std::string_view::npos ? s.npos : at - start));
      if (at == std::string_view::npos) return out;
      start = at + sep.size();
    }
  };
  auto trim = [](std::string s) {
    const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  std::vector<std::pair<std::pair<std::string, std::string>, int>> edges;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (trim(line).empty()) continue;
    const bool edge = line[0] == ' ' || line[0] == '\t';
    const auto parts = split(trim(line), " -- ");
    if (edge) {
      if (parts.size() != 2)
        throw InputError("malformed edge", allowed, "model.profile", {file, lineno, 1});
      edges.push_back({{trim(parts[0]), trim(parts[1])}, lineno});
      continue;
    }
    if (parts.size() < 3 || parts.size() > 4)
      throw InputError("malformed node", allowed, "model.profile", {file, lineno, 1});
    Node nd;
    nd.id = trim(parts[0]);
    nd.desc = trim(parts[1]);
    nd.line = lineno;
    int seen = 0;
    for (const std::string& field : split(parts[2], ", ")) {
      const size_t eq = field.find('=');
      const std::string key = trim(field.substr(0, eq));
      std::string value = eq == std::string::npos ? "" : trim(field.substr(eq + 1));
      double v = 0;
      bool ok = !value.empty();
      if (ok && value.front() == '[' && value.back() == ']') {  // several outputs
        for (const std::string& x : split(value.substr(1, value.size() - 2), "; ")) {
          const std::string t = trim(x);
          double part = 0;
          const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), part);
          ok = ok && ec == std::errc() && ptr == t.data() + t.size() && part >= 0;
          v += part;
        }
      } else if (ok) {
        const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        ok = ec == std::errc() && ptr == value.data() + value.size() && v >= 0 && v < 1e15;
      }
      double* slot = key == "forward_compute_time"    ? &nd.fwd_ms
                     : key == "backward_compute_time" ? &nd.bwd_ms
                     : key == "activation_size"       ? &nd.activation
                     : key == "parameter_size"        ? &nd.param_bytes
                                                      : nullptr;
      if (slot == nullptr || !ok)
        throw InputError(fmt::format("'{}' is not a known field with a non-negative number", field),
                         allowed, "model.profile", {file, lineno, 1});
      *slot = v;
      ++seen;
    }
    if (seen != 4)
      throw InputError("a node needs all four fields", allowed, "model.profile", {file, lineno, 1});
    if (!index.emplace(nd.id, nodes.size()).second)
      throw InputError(fmt::format("node '{}' is defined twice", nd.id), "each node once",
                       "model.profile", {file, lineno, 1});
    nodes.push_back(std::move(nd));
  }
  succ.resize(nodes.size());
  indeg.resize(nodes.size());
  for (const auto& [e, lineno] : edges) {
    const auto a = index.find(e.first), b = index.find(e.second);
    if (a == index.end() || b == index.end())
      throw InputError(
          fmt::format("edge names an unknown node '{}'", a == index.end() ? e.first : e.second),
          "nodes defined on their own lines", "model.profile", {file, lineno, 1});
    succ[a->second].push_back(b->second);
    ++indeg[b->second];
  }
  // Kahn's algorithm, the earliest-defined ready node first.
  std::vector<size_t> order;
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (indeg[i] == 0) ready.push(i);
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (const size_t j : succ[i])
      if (--indeg[j] == 0) ready.push(j);
  }
  if (order.size() != nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i)
      if (indeg[i] > 0)
        throw InputError(fmt::format("the graph has a cycle through node '{}'", nodes[i].id),
                         "a directed acyclic graph", "model.profile", {file, nodes[i].line, 1});
  }
  std::vector<size_t> position(nodes.size());
  for (size_t k = 0; k < order.size(); ++k) position[order[k]] = k;
  // Node i's output is live from its position to the latest position reading it.
  std::vector<double> ends_at(nodes.size());
  std::vector<char> has_pred(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    size_t last = position[i];
    for (const size_t j : succ[i]) {
      last = std::max(last, position[j]);
      has_pred[j] = 1;
    }
    ends_at[last] += nodes[i].activation;
  }
  auto bytes = [&](double v, const Node& nd) {
    if (!(v < 4e18)) too_large(fmt::format("node '{}'", nd.id));
    return static_cast<int64_t>(std::llround(v));
  };
  auto ms = [&](double v, const Node& nd) {
    if (!(v < 9e9)) too_large(fmt::format("node '{}'", nd.id));
    return Time::ps(static_cast<int64_t>(std::llround(v * 1e9)));
  };
  Model m;
  m.name = std::filesystem::path(file).stem().string();
  double live = 0;  // outputs made at or before position k and read after it
  for (size_t k = 0; k < order.size(); ++k) {
    const Node& nd = nodes[order[k]];
    live += nd.activation - ends_at[k];
    if (!has_pred[order[k]] && nd.desc.starts_with("Input")) {
      m.input_bytes += bytes(nd.activation, nd);
      continue;
    }
    Layer l;
    l.name = nd.id;
    l.forward = ms(nd.fwd_ms, nd);
    l.backward_input = ms(nd.bwd_ms, nd);
    l.activation_bytes = bytes(nd.activation, nd);
    l.params = bytes(nd.param_bytes / 4, nd);
    l.source = "profile";
    l.output_bytes = bytes(std::max(live, 0.0), nd);
    m.layers.push_back(std::move(l));
  }
  if (m.layers.empty())
    throw InputError("the profile graph has no layers", allowed, "model.profile", {file});
  return m;
}

const std::vector<std::string> kShapeOps{"conv",        "pool",      "linear", "bottleneck",
                                         "amoeba_cell", "embedding", "lstm",   "attention"};
constexpr int64_t kMaxDim = int64_t{1} << 24;

// One op of a shape-described layer: `kind: {field: value, ...}`.
ShapeOp read_shape_op(const Reader& r, const YAML::Node& n, const std::string& p,
                      const std::string& kind) {
  auto dim = [&](const char* key, std::optional<int64_t> fallback, int64_t lo = 1) {
    const YAML::Node v = n[key];
    if (!v.IsDefined() && fallback) return *fallback;
    return r.integer(r.require(n, p, key), child_path(p, key), lo, kMaxDim);
  };
  auto flag = [&](const char* key, bool fallback) {
    return read_flag(r, n[key], child_path(p, key), fallback);
  };
  if (kind == "pool" && n.IsScalar() && n.Scalar() == "global") return PoolOp{.global = true};
  if (kind == "attention" && n.IsNull()) return AttentionOp{};
  if (kind == "conv") {
    r.expect_map(n, p, {"out", "kernel", "stride", "padding", "bias", "batch_norm"});
    ConvOp o;
    o.out = dim("out", {});
    o.kernel = dim("kernel", 3);
    o.stride = dim("stride", 1);
    o.padding = dim("padding", o.kernel / 2, 0);
    o.bias = flag("bias", true);
    o.batch_norm = flag("batch_norm", false);
    return o;
  }
  if (kind == "pool") {
    r.expect_map(n, p, {"kind", "kernel", "stride", "padding"});
    PoolOp o;
    if (n["kind"].IsDefined())
      o.max = r.choice<bool>(n["kind"], p + ".kind", {{"max", true}, {"avg", false}});
    o.kernel = dim("kernel", 2);
    o.stride = dim("stride", o.kernel);
    o.padding = dim("padding", 0, 0);
    return o;
  }
  if (kind == "linear") {
    r.expect_map(n, p, {"out", "bias"});
    return LinearOp{.out = dim("out", {}), .bias = flag("bias", true)};
  }
  if (kind == "bottleneck") {
    r.expect_map(n, p, {"mid", "out", "stride"});
    return BottleneckOp{.mid = dim("mid", {}), .out = dim("out", {}), .stride = dim("stride", 1)};
  }
  if (kind == "amoeba_cell") {
    r.expect_map(n, p, {"channels", "reduction"});
    return AmoebaCellOp{.channels = dim("channels", {}), .reduction = flag("reduction", false)};
  }
  if (kind == "embedding") {
    r.expect_map(n, p, {"vocab", "dim", "tokens"});
    return EmbeddingOp{
        .vocab = dim("vocab", {}), .dim = dim("dim", {}), .tokens = dim("tokens", 0, 0)};
  }
  if (kind == "lstm") {
    r.expect_map(n, p, {"hidden", "bidirectional", "context"});
    return LstmOp{.hidden = dim("hidden", {}),
                  .bidirectional = flag("bidirectional", false),
                  .context = flag("context", false)};
  }
  PIPESIM_ASSERT(kind == "attention", "every shape op is read");
  r.expect_map(n, p, {"hidden"});
  return AttentionOp{.hidden = dim("hidden", 0, 0)};
}

// model.input of a shape-described model: {image: [C, H, W]}, {tokens: N} or
// {sequence: [tokens, features]}.
TensorShape read_input_shape(const Reader& r, const YAML::Node& n) {
  const std::string allowed = "{image: [C, H, W]}, {tokens: N} or {sequence: [N, features]}";
  r.expect_map(n, "model.input", {"image", "tokens", "sequence"});
  if (n.size() != 1) r.fail(n, "model.input", "give exactly one input shape", allowed);
  const std::string key = n.begin()->first.Scalar();
  const YAML::Node v = n.begin()->second;
  const std::string p = "model.input." + key;
  auto dims = [&](size_t count) {
    if (!v.IsSequence() || v.size() != count)
      r.fail(v, p, fmt::format("expected a list of {} sizes", count), allowed);
    std::vector<int64_t> out;
    for (size_t i = 0; i < count; ++i)
      out.push_back(r.integer(v[i], fmt::format("{}.{}", p, i), 1, kMaxDim));
    return out;
  };
  TensorShape t;
  if (key == "image") {
    const auto d = dims(3);
    t.kind = TensorShape::Kind::kImage;
    t.channels = d[0];
    t.height = d[1];
    t.width = d[2];
  } else if (key == "tokens") {
    t.kind = TensorShape::Kind::kTokens;
    t.tokens = r.integer(v, p, 1, kMaxDim);
  } else {
    const auto d = dims(2);
    t.kind = TensorShape::Kind::kSequence;
    t.tokens = d[0];
    t.features = d[1];
  }
  return t;
}

bool yaml_file_name(const std::string& name) {
  return name.ends_with(".yaml") || name.ends_with(".yml");
}

std::filesystem::path relative_to(const Reader& r, const std::string& rel) {
  std::filesystem::path path(rel);
  if (path.is_relative() && !r.file().starts_with("<"))
    path = std::filesystem::path(r.file()).parent_path() / path;
  return path;
}

std::string read_text(const Reader& r, const YAML::Node& n, const std::string& key,
                      const std::filesystem::path& path, const std::string& what) {
  auto text = read_whole_file(path);
  if (!text) r.fail(n, key, fmt::format("cannot read '{}'", path.string()), "a readable " + what);
  return std::move(*text);
}

Model read_model_section(const Reader& r, const YAML::Node& n, const Training& t,
                         const GpuSpec& gpu, bool nested);

// Reads a model mapping from another YAML file (an include, or a profile in YAML form)
// with that file's own locations in errors.
Model read_model_file(const std::string& text, const std::string& file, const Training& t,
                      const GpuSpec& gpu) {
  const YAML::Node root = parse_yaml(text, file);
  const Reader inner(file, {});
  return read_model_section(inner, root, t, gpu, true);
}

// model: {include: NAME}: a model of the built-in zoo (scenarios/models/NAME.yaml,
// compiled in) or, when NAME looks like a path, a YAML file relative to the scenario.
Model read_included_model(const Reader& r, const YAML::Node& n, const Training& t,
                          const GpuSpec& gpu) {
  r.expect_map(n, "model", {"include", "name"});
  const std::string name = r.scalar(n["include"], "model.include", "a model name or YAML file");
  Model m;
  if (name.find('/') != std::string::npos || yaml_file_name(name)) {
    const auto path = relative_to(r, name);
    m = read_model_file(read_text(r, n["include"], "model.include", path, "YAML file"),
                        path.string(), t, gpu);
  } else {
    const char* text = find_zoo_model(name);
    if (text == nullptr) {
      r.fail(n["include"], "model.include",
             fmt::format("unknown model '{}'{}", name, suggestion(name, zoo_model_names())),
             "a built-in model (" + join(zoo_model_names()) + ") or a YAML file path");
    }
    m = read_model_file(text, fmt::format("scenarios/models/{}.yaml", name), t, gpu);
  }
  if (n["name"].IsDefined()) m.name = r.scalar(n["name"], "model.name");
  return m;
}

// model: {profile: FILE}: measured per-layer costs from a CSV table, PipeDream's profile
// graph (recognised by its "ID -- DESCRIPTION -- ..." lines) or a YAML model (.yaml).
Model read_profile(const Reader& r, const YAML::Node& n, const Training& t, const GpuSpec& gpu) {
  r.expect_map(n, "model", {"name", "profile", "input"});
  const std::string rel = r.scalar(n["profile"], "model.profile", "a file path");
  const auto path = relative_to(r, rel);
  const std::string text = read_text(r, n["profile"], "model.profile", path, "profile file");
  Model m;
  if (yaml_file_name(rel)) {
    m = read_model_file(text, path.string(), t, gpu);
  } else {
    std::istringstream in(text);
    const size_t first = text.find_first_not_of(" \t\r\n");
    const size_t eol = text.find('\n', first);
    const bool graph =
        first != std::string::npos &&
        text.substr(first, eol == std::string::npos ? eol : eol - first).find(" -- ") !=
            std::string::npos;
    m = graph ? read_profile_graph(in, path.string()) : read_profile_csv(in, path.string());
  }
  if (n["name"].IsDefined()) m.name = r.scalar(n["name"], "model.name");
  if (n["input"].IsDefined()) m.input_bytes = r.bytes(n["input"], "model.input");
  return m;
}

Model read_model(const Reader& r, const YAML::Node& n, const Training& t, const GpuSpec& gpu) {
  r.expect_map(n, "model", {"name", "layers", "input", "generator", "profile", "include"});
  Model m;
  m.name = n["name"].IsDefined() ? r.scalar(n["name"], "model.name") : "model";
  const bool shaped = n["input"].IsDefined() && n["input"].IsMap();
  ShapeState state;
  if (shaped) {
    state.current = read_input_shape(r, n["input"]);
    m.input_bytes =
        r.at(n["input"], "model.input", [&] { return shape_input_bytes(state.current, t); });
  } else if (n["input"].IsDefined()) {
    m.input_bytes = r.bytes(n["input"], "model.input");
  }
  const YAML::Node layers = r.require(n, "model", "layers");
  if (!layers.IsSequence() || layers.size() == 0)
    r.fail(layers, "model.layers", "expected a non-empty list of layers",
           "e.g. '- {forward: 1 ms, backward: 2 ms}'");
  std::vector<std::string> shape_keys{"name", "repeat", "drop_carried"};
  shape_keys.insert(shape_keys.end(), kShapeOps.begin(), kShapeOps.end());
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string p = fmt::format("model.layers.{}", i);
    const YAML::Node l = layers[i];
    if (shaped) {
      r.expect_map(l, p, shape_keys);
      std::string kind;
      for (const auto& k : kShapeOps) {
        if (!l[k].IsDefined()) continue;
        if (!kind.empty())
          r.fail(l[k], p + "." + k,
                 fmt::format("a layer has one op, but this one also has '{}'", kind),
                 "one of: " + join(kShapeOps));
        kind = k;
      }
      if (kind.empty()) r.fail(l, p, "the layer names no op", "one of: " + join(kShapeOps));
      const ShapeOp op = read_shape_op(r, l[kind], p + "." + kind, kind);
      const std::string base = l["name"].IsDefined() ? r.scalar(l["name"], p + ".name")
                                                     : fmt::format("layer{}", m.layers.size());
      const int64_t repeat = read_repeat(r, l, p, m.layers.size());
      const bool drop = read_flag(r, l["drop_carried"], p + ".drop_carried", false);
      for (int64_t k = 0; k < repeat; ++k) {
        m.layers.push_back(r.at(l[kind], p + "." + kind, [&] {
          return shape_layer(repeated_name(base, k, repeat), op, drop, state, t, gpu);
        }));
      }
      continue;
    }
    for (const auto& k : kShapeOps) {
      if (l.IsMap() && l[k].IsDefined())
        r.fail(l[k], p + "." + k, "a layer given by its shape needs the model's input shape",
               "model.input: {image: [C, H, W]}, {tokens: N} or {sequence: [N, features]}");
    }
    r.expect_map(l, p,
                 {"name", "forward", "backward", "backward_input", "backward_weight", "activation",
                  "output", "params", "optimizer", "repeat"});
    Layer layer;
    layer.name = l["name"].IsDefined() ? r.scalar(l["name"], p + ".name")
                                       : fmt::format("layer{}", m.layers.size());
    layer.forward = r.time(r.require(l, p, "forward"), p + ".forward");
    const bool whole = l["backward"].IsDefined();
    const bool split = l["backward_input"].IsDefined() || l["backward_weight"].IsDefined();
    if (whole && split)
      r.fail(l["backward"], p + ".backward",
             "give backward or backward_input + backward_weight, not both", "one of the two forms");
    if (whole) {
      layer.backward_input = r.time(l["backward"], p + ".backward");
    } else if (split) {
      layer.backward_input = r.time(r.require(l, p, "backward_input"), p + ".backward_input");
      layer.backward_weight = r.time(r.require(l, p, "backward_weight"), p + ".backward_weight");
      layer.split_backward = true;
    } else {
      r.fail(l, p + ".backward", "missing required key",
             "backward, or backward_input + backward_weight");
    }
    if (l["activation"].IsDefined())
      layer.activation_bytes = r.bytes(l["activation"], p + ".activation");
    if (l["output"].IsDefined()) layer.output_bytes = r.bytes(l["output"], p + ".output");
    if (l["params"].IsDefined()) layer.params = r.count(l["params"], p + ".params");
    if (l["optimizer"].IsDefined()) layer.optimizer = r.time(l["optimizer"], p + ".optimizer");
    append_repeated(m, layer, read_repeat(r, l, p, m.layers.size()));
  }
  return m;
}

// The model section in any of its forms; `nested` for a model read from another file,
// which may not include a third.
Model read_model_section(const Reader& r, const YAML::Node& n, const Training& t,
                         const GpuSpec& gpu, bool nested) {
  if (n.IsMap() && n["include"].IsDefined()) {
    if (nested)
      r.fail(n["include"], "model.include", "an included model cannot include another",
             "layers, generator or profile");
    return read_included_model(r, n, t, gpu);
  }
  if (n.IsMap() && n["generator"].IsDefined()) return read_generated_model(r, n, t, gpu);
  if (n.IsMap() && n["profile"].IsDefined()) return read_profile(r, n, t, gpu);
  return read_model(r, n, t, gpu);
}

Training read_training(const Reader& r, const YAML::Node& n) {
  r.expect_map(
      n, "training",
      {"global_batch", "micro_batch", "precision", "optimizer", "iterations", "optimizer_step"});
  Training t;
  constexpr int64_t kMax = int64_t{1} << 40;
  t.global_batch =
      r.integer(r.require(n, "training", "global_batch"), "training.global_batch", 1, kMax);
  t.micro_batch =
      r.integer(r.require(n, "training", "micro_batch"), "training.micro_batch", 1, kMax);
  if (n["precision"].IsDefined()) {
    t.precision = r.choice<Precision>(n["precision"], "training.precision",
                                      {{"fp32", Precision::kFp32}, {"mixed", Precision::kMixed}});
  }
  if (n["optimizer"].IsDefined()) {
    t.optimizer = r.choice<Optimizer>(
        n["optimizer"], "training.optimizer",
        {{"sgd", Optimizer::kSgd}, {"momentum", Optimizer::kMomentum}, {"adam", Optimizer::kAdam}});
  }
  if (n["optimizer_step"].IsDefined())
    t.optimizer_step = r.time(n["optimizer_step"], "training.optimizer_step");
  if (n["iterations"].IsDefined())
    t.iterations = static_cast<int>(r.integer(n["iterations"], "training.iterations", 1, 100'000));
  return t;
}

// "0-3" or "5": an inclusive layer range.
std::pair<int, int> read_range(const Reader& r, const YAML::Node& n, const std::string& path,
                               int num_layers) {
  const std::string allowed = fmt::format("'first-last' or one index, within 0-{}", num_layers - 1);
  const std::string s = r.scalar(n, path, allowed);
  auto number = [&](std::string_view part) {
    int v = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc() || ptr != part.data() + part.size())
      r.fail(n, path, fmt::format("'{}' is not a layer range", s), allowed);
    return v;
  };
  const auto dash = s.find('-');
  const int first = number(std::string_view(s).substr(0, dash));
  const int last = dash == std::string::npos ? first : number(std::string_view(s).substr(dash + 1));
  if (first > last) r.fail(n, path, fmt::format("range '{}' runs backwards", s), allowed);
  if (last >= num_layers)
    r.fail(n, path, fmt::format("range '{}' goes past the last layer {}", s, num_layers - 1),
           allowed);
  return {first, last};
}

// strategy.order: one line per pipeline position in `pipesim order` notation. Each F and B
// of every (micro-batch, chunk) exactly once; W and R at most once. Deadlocks are found
// later, when the TaskGraph is validated.
void read_order(const Reader& r, const YAML::Node& n, Scenario& sc) {
  const Strategy& st = sc.strategy;
  const int P = st.positions(), v = st.virtual_stages, M = static_cast<int>(sc.micro_batches);
  const std::string allowed =
      fmt::format("{} lines like 'F0 F1 B0 B1', one per pipeline position", P);
  if (is_async(st.schedule))
    r.fail(n, "strategy.order", "hand-written orders are for synchronous schedules", allowed);
  if (!n.IsSequence() || static_cast<int>(n.size()) != P) {
    r.fail(n, "strategy.order",
           fmt::format("expected {} lines, got {}", P, n.IsSequence() ? n.size() : 0), allowed);
  }
  for (int p = 0; p < P; ++p) {
    const std::string path = fmt::format("strategy.order.{}", p);
    const YAML::Node line = n[static_cast<size_t>(p)];
    StepList steps;
    if (auto problem = parse_steps(r.scalar(line, path, allowed), steps))
      r.fail(line, path, *problem, allowed);
    std::vector<int> seen(static_cast<size_t>(4) * v * M, 0);
    for (const Step& s : steps) {
      if (s.micro_batch >= M || s.chunk >= v) {
        r.fail(line, path, fmt::format("{} is out of range", format_steps({s}, v > 1)),
               fmt::format("micro-batches 0-{}{}", M - 1,
                           v > 1 ? fmt::format(", chunks 0-{}", v - 1) : ""));
      }
      int& count = seen[(static_cast<size_t>(s.kind) * v + s.chunk) * M + s.micro_batch];
      if (++count > 1)
        r.fail(line, path, fmt::format("{} appears twice", format_steps({s}, v > 1)),
               "each step once");
    }
    for (OpKind k : {OpKind::kForward, OpKind::kBackward}) {
      for (int c = 0; c < v; ++c) {
        for (int m = 0; m < M; ++m) {
          if (seen[(static_cast<size_t>(k) * v + c) * M + m] == 0) {
            r.fail(line, path, fmt::format("{} is missing", format_steps({{k, m, c}}, v > 1)),
                   "every forward and backward of the iteration");
          }
        }
      }
    }
    sc.user_order.push_back(std::move(steps));
  }
  sc.user_order_at = r.where(n, "strategy.order");
}

void read_strategy(const Reader& r, const YAML::Node& n, const YAML::Node& training, Scenario& sc) {
  r.expect_map(n, "strategy",
               {"schedule", "stages", "pipeline", "data", "virtual_stages", "placement", "order",
                "vertical_sync", "allreduce", "bucket", "bucket_buffers"});
  Strategy& st = sc.strategy;
  const int num_layers = static_cast<int>(sc.model.layers.size());
  {
    const YAML::Node s = r.require(n, "strategy", "schedule");
    const std::string name = r.scalar(s, "strategy.schedule", schedule_names());
    const auto kind = parse_schedule(name);
    if (!kind) {
      std::vector<std::string> names;
      std::stringstream ss(schedule_names());
      for (std::string x; std::getline(ss, x, ',');)
        names.push_back(x.substr(x.find_first_not_of(' ')));
      r.fail(s, "strategy.schedule",
             fmt::format("unknown or unavailable schedule '{}'{}", name, suggestion(name, names)),
             schedule_names());
    }
    st.schedule = *kind;
  }
  if (n["virtual_stages"].IsDefined()) {
    st.virtual_stages =
        static_cast<int>(r.integer(n["virtual_stages"], "strategy.virtual_stages", 1, 64));
    if (st.virtual_stages > 1 && st.schedule != ScheduleKind::kInterleaved) {
      r.fail(
          n["virtual_stages"], "strategy.virtual_stages",
          fmt::format("{} model chunks per device need an interleaved schedule", st.virtual_stages),
          "1, or schedule: interleaved");
    }
  }
  const int v = st.virtual_stages;
  if (n["allreduce"].IsDefined()) {
    const auto a = r.choice<int>(n["allreduce"], "strategy.allreduce",
                                 {{"ring", 0}, {"tree", 1}, {"hierarchical", 2}, {"auto", 3}});
    if (a < 3) st.allreduce = static_cast<AllReduceAlgo>(a);
  }
  if (n["bucket"].IsDefined()) st.bucket_bytes = r.bytes(n["bucket"], "strategy.bucket");
  st.bucket_buffers = read_flag(r, n["bucket_buffers"], "strategy.bucket_buffers", false);
  if (n["vertical_sync"].IsDefined()) {
    st.vertical_sync = read_flag(r, n["vertical_sync"], "strategy.vertical_sync", false);
    if (st.vertical_sync && st.schedule != ScheduleKind::kPipeDream) {
      r.fail(n["vertical_sync"], "strategy.vertical_sync", "vertical sync is a PipeDream option",
             "schedule: pipedream");
    }
  }
  if (needs_split_backward(st.schedule)) {
    for (size_t i = 0; i < sc.model.layers.size(); ++i) {
      if (sc.model.layers[i].split_backward) continue;
      r.fail(n["schedule"], "strategy.schedule",
             fmt::format(
                 "{} needs every layer's backward split, but layer {} ('{}') gives only backward",
                 to_string(st.schedule), i, sc.model.layers[i].name),
             "backward_input and backward_weight on every layer");
    }
  }
  st.data = n["data"].IsDefined()
                ? static_cast<int>(r.integer(n["data"], "strategy.data", 1, 1'000'000))
                : 1;
  const bool has_stages = n["stages"].IsDefined();
  const bool has_pipeline = n["pipeline"].IsDefined();
  if (has_stages == has_pipeline) {
    r.fail(has_stages ? n["pipeline"] : n, "strategy.stages",
           has_stages ? "give stages or pipeline, not both" : "missing required key",
           "'stages: [{layers: 0-3, replicas: 1}, ...]' or 'pipeline: N'");
  }
  if (has_pipeline) {
    const int p = static_cast<int>(r.integer(n["pipeline"], "strategy.pipeline", 1, 1'000'000));
    if (int64_t{p} * v > num_layers)
      r.fail(n["pipeline"], "strategy.pipeline",
             v == 1 ? fmt::format("{} stages but the model has {} layers", p, num_layers)
                    : fmt::format("{} x {} chunks but the model has {} layers", p, v, num_layers),
             "at most one stage per layer");
    st.stages = even_partition(sc.model, p * v);
  } else {
    const YAML::Node stages = n["stages"];
    if (!stages.IsSequence() || stages.size() == 0)
      r.fail(stages, "strategy.stages", "expected a non-empty list of stages",
             "e.g. '- {layers: 0-3, replicas: 1}'");
    int expect = 0;
    for (size_t i = 0; i < stages.size(); ++i) {
      const std::string p = fmt::format("strategy.stages.{}", i);
      const YAML::Node s = stages[i];
      r.expect_map(s, p, {"layers", "replicas"});
      const auto [first, last] =
          read_range(r, r.require(s, p, "layers"), p + ".layers", num_layers);
      if (first != expect) {
        r.fail(s["layers"], p + ".layers",
               i == 0 ? fmt::format("the first stage starts at layer {}", first)
                      : fmt::format("starts at layer {} but the previous stage ended at layer {}",
                                    first, expect - 1),
               fmt::format("consecutive ranges covering layers 0-{} exactly once", num_layers - 1));
      }
      expect = last + 1;
      const int rep =
          s["replicas"].IsDefined()
              ? static_cast<int>(r.integer(s["replicas"], p + ".replicas", 1, 1'000'000))
              : 1;
      st.stages.push_back({first, last, rep});
    }
    if (expect != num_layers) {
      r.fail(stages, "strategy.stages",
             fmt::format("the stages end at layer {} but the model has layers 0-{}", expect - 1,
                         num_layers - 1),
             "consecutive ranges covering every layer exactly once");
    }
    const int count = static_cast<int>(st.stages.size());
    if (count % v != 0) {
      r.fail(stages, "strategy.stages",
             fmt::format("{} stages cannot be dealt to devices as {} chunks each", count, v),
             "a multiple of strategy.virtual_stages");
    }
    for (int g = count / v; g < count; ++g) {
      const int p = g % (count / v);
      if (st.stages[static_cast<size_t>(g)].replicas !=
          st.stages[static_cast<size_t>(p)].replicas) {
        r.fail(stages[static_cast<size_t>(g)], fmt::format("strategy.stages.{}.replicas", g),
               fmt::format("stage {} shares devices with stage {} and needs its {} replicas", g, p,
                           st.stages[static_cast<size_t>(p)].replicas),
               "equal replicas for the chunks of one device");
      }
    }
  }
  // Micro-batches: SPEC M = global_batch / (micro_batch x data), a whole number.
  const Training& t = sc.training;
  const int64_t per = t.micro_batch * st.data;
  if (t.global_batch % per != 0) {
    throw InputError(
        fmt::format("global_batch {} is not a multiple of micro_batch x data = {} x {} = {}",
                    t.global_batch, t.micro_batch, st.data, per),
        "global_batch divisible by micro_batch x strategy.data", "training.global_batch",
        r.where(training["global_batch"], "training.global_batch"));
  }
  sc.micro_batches = t.global_batch / per;
  const int P = st.positions();
  if (st.schedule == ScheduleKind::kInterleaved && sc.micro_batches % P != 0) {
    r.fail(
        n["schedule"], "strategy.schedule",
        fmt::format(
            "interleaved needs the micro-batches per iteration (M = {}) to be a multiple of the "
            "pipeline depth ({})",
            sc.micro_batches, P),
        "global_batch / (micro_batch x data) divisible by the number of devices in the pipeline");
  }
  int64_t replicas = 0;
  for (const auto& s : st.stages) replicas += s.replicas;
  // In floating point: the product of large batches, replicas and copies overflows 64 bits.
  const long double ops =
      static_cast<long double>(sc.micro_batches) * replicas * st.data * t.iterations * 3;
  if (ops > kMaxComputeOps) {
    r.fail(n, "strategy",
           fmt::format("this run would simulate {:.0f} compute ops", static_cast<double>(ops)),
           fmt::format("at most {}; lower training.iterations or global_batch / micro_batch",
                       kMaxComputeOps));
  }

  if (n["order"].IsDefined()) read_order(r, n["order"], sc);
  std::vector<int> reps;  // per position
  for (int p = 0; p < P; ++p) reps.push_back(st.stages[static_cast<size_t>(p)].replicas);
  const YAML::Node pl = n["placement"];
  if (!pl.IsDefined() || pl.IsScalar()) {
    if (pl.IsDefined()) {
      sc.placement_policy =
          r.choice<PlacementPolicy>(pl, "strategy.placement",
                                    {{"fresh-first", PlacementPolicy::kFreshFirst},
                                     {"append-first", PlacementPolicy::kAppendFirst},
                                     {"scatter-first", PlacementPolicy::kScatterFirst}});
    }
    sc.placement = r.at(pl.IsDefined() ? pl : n, "strategy.placement",
                        [&] { return place(sc.cluster, reps, st.data, sc.placement_policy); });
    return;
  }
  // Explicit device lists: one per stage (data copies one after another), by name or index.
  const std::string allowed = fmt::format(
      "fresh-first | append-first | scatter-first, or {} lists of device names (data x stages)",
      st.data * reps.size());
  if (!pl.IsSequence() || pl.size() != st.data * reps.size()) {
    r.fail(pl, "strategy.placement",
           fmt::format("expected {} device lists, got {}", st.data * reps.size(),
                       pl.IsSequence() ? pl.size() : 0),
           allowed);
  }
  sc.explicit_placement = true;
  std::set<int> used;
  sc.placement.assign(static_cast<size_t>(st.data), {});
  for (size_t i = 0; i < pl.size(); ++i) {
    const std::string p = fmt::format("strategy.placement.{}", i);
    const YAML::Node list = pl[i];
    const int want = reps[i % reps.size()];
    if (!list.IsSequence() || static_cast<int>(list.size()) != want) {
      r.fail(list, p,
             fmt::format("stage {} has {} replica{} and needs that many devices", i % reps.size(),
                         want, want == 1 ? "" : "s"),
             "a list of device names or indices");
    }
    std::vector<int> devs;
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string pk = fmt::format("{}.{}", p, k);
      const std::string name = r.scalar(list[k], pk);
      int d = sc.cluster.device_index(name);
      if (d < 0) {
        int idx = -1;
        const auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), idx);
        if (ec == std::errc() && ptr == name.data() + name.size() && idx >= 0 &&
            idx < sc.cluster.num_devices())
          d = idx;
      }
      if (d < 0)
        r.fail(list[k], pk, fmt::format("no device '{}'", name),
               fmt::format("a device name or an index 0-{}", sc.cluster.num_devices() - 1));
      if (!used.insert(d).second)
        r.fail(list[k], pk,
               fmt::format("device '{}' is given two stages", sc.cluster.device(d).name),
               "each device at most once");
      devs.push_back(d);
    }
    sc.placement[i / reps.size()].push_back(std::move(devs));
  }
}

// training.optimizer_step, when given, is spread over the layers in proportion to their
// parameters; a generated model otherwise gets the memory-bound update time,
// params x optimizer_bytes_per_param / HBM bandwidth, per layer.
void set_optimizer_step(Model& m, const Training& t, const GpuSpec& gpu) {
  int64_t total = 0;
  for (const Layer& l : m.layers) total += l.params;
  for (Layer& l : m.layers) {
    if (t.optimizer_step) {
      if (total > 0) {
        l.optimizer = Time::ps(static_cast<int64_t>(
            static_cast<long double>(t.optimizer_step->ps_count()) * l.params / total));
      }
    } else if (l.source == "analytic" && gpu.hbm_bytes_per_s > 0) {
      l.optimizer = serialization_time(
          checked_mul(l.params, optimizer_bytes_per_param(t.precision, t.optimizer),
                      "an optimizer step"),
          gpu.hbm_bytes_per_s);
    }
  }
}

// Walks `root` along a dotted path, creating mappings for missing keys, and puts `value`
// at its end. A scalar met on the way (a preset name) becomes {preset: name}.
void apply_override(YAML::Node& root, const Override& o) {
  YAML::Node cur;
  cur.reset(root);
  std::vector<std::string> parts;
  std::stringstream ss(o.key);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  std::string path;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part.empty())
      throw InputError(fmt::format("empty part in key '{}'", o.key),
                       "a dotted path such as strategy.stages.0.replicas", "", {"--set"});
    path = child_path(path, part);
    const bool last = i + 1 == parts.size();
    if (cur.IsSequence()) {
      size_t idx = 0;
      const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), idx);
      if (ec != std::errc() || ptr != part.data() + part.size() || idx >= cur.size()) {
        throw InputError(fmt::format("no list item '{}'", part),
                         fmt::format("an index from 0 to {}", cur.size() - 1), path, {"--set"});
      }
      YAML::Node next = cur[idx];
      if (last) {
        cur[idx] = YAML::Load(o.value);
        return;
      }
      cur.reset(next);
      continue;
    }
    if (cur.IsScalar()) {
      const std::string preset = cur.Scalar();
      cur = YAML::Node(YAML::NodeType::Map);
      cur["preset"] = preset;
    } else if (!cur.IsMap()) {
      cur = YAML::Node(YAML::NodeType::Map);
    }
    if (last) {
      cur[part] = YAML::Load(o.value);
      return;
    }
    YAML::Node next = cur[part];
    cur.reset(next);
  }
}

Scenario load(YAML::Node root, const std::string& source, const std::vector<Override>& overrides) {
  std::vector<std::string> overridden;
  for (const Override& o : overrides) {
    try {
      apply_override(root, o);
    } catch (const YAML::Exception& e) {
      throw InputError(fmt::format("invalid YAML value '{}': {}", o.value, e.msg),
                       "a YAML scalar, list or mapping", o.key, {"--set"});
    }
    overridden.push_back(o.key);
  }
  const Reader r(source, overridden);
  if (!root.IsMap())
    r.fail(root, "", fmt::format("a scenario must be a mapping, got {}", Reader::kind(root)),
           "keys: name, cluster, model, training, strategy");
  r.expect_map(root, "", {"name", "cluster", "model", "training", "strategy"});
  Scenario sc{.name = {},
              .source = source,
              .cluster = read_cluster(r, r.require(root, "", "cluster")),
              .model = {},
              .training = {},
              .strategy = {},
              .placement_policy = PlacementPolicy::kAppendFirst,
              .explicit_placement = false,
              .placement = {},
              .micro_batches = 1,
              .user_order = {},
              .user_order_at = {}};
  sc.name = root["name"].IsDefined() ? r.scalar(root["name"], "name")
                                     : std::filesystem::path(source).stem().string();
  const YAML::Node training = r.require(root, "", "training");
  sc.training = read_training(r, training);
  const YAML::Node model = r.require(root, "", "model");
  sc.model = read_model_section(r, model, sc.training, sc.cluster.device(0).gpu, false);
  set_optimizer_step(sc.model, sc.training, sc.cluster.device(0).gpu);
  read_strategy(r, r.require(root, "", "strategy"), training, sc);
  return sc;
}

}  // namespace

Override parse_override(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(fmt::format("'{}' is not KEY=VALUE", text),
                     "e.g. --set cluster.inter_node.bandwidth=\"10 GB/s\"", "", {"--set"});
  }
  return {text.substr(0, eq), text.substr(eq + 1)};
}

Scenario load_scenario_text(const std::string& yaml, const std::string& source,
                            const std::vector<Override>& overrides) {
  return load(parse_yaml(yaml, source), source, overrides);
}

Scenario load_scenario_file(const std::string& path, const std::vector<Override>& overrides) {
  const auto text = read_whole_file(path);
  if (!text) throw InputError("cannot read the scenario file", "a readable YAML file", "", {path});
  return load_scenario_text(*text, path, overrides);
}

Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides) {
  return path.empty() ? load_default_scenario(overrides) : load_scenario_file(path, overrides);
}

const char* default_scenario_yaml() {
  return internal::kDefaultScenarioYaml;
}

Scenario load_default_scenario(const std::vector<Override>& overrides) {
  return load_scenario_text(default_scenario_yaml(), "<default>", overrides);
}

}  // namespace pipesim
