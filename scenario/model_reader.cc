// The model section in its forms: a list of layers with their costs, layers described by
// their shapes, a generated transformer, a measured profile, or an included model.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>

#include "core/checked.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/units.h"
#include "scenario/internal/reader.h"
#include "scenario/internal/sections.h"
#include "costs/models.h"
#include "costs/roofline.h"
#include "costs/shapes.h"
#include "scenario/zoo.h"

namespace pipesim::internal {
namespace {

// The transformer generator's shape keys, which an include of a generated model may also
// override.
const std::vector<std::string>& generator_keys() {
  static const std::vector<std::string> keys{"layers",
                                             "hidden",
                                             "heads",
                                             "query_groups",
                                             "ffn",
                                             "sequence",
                                             "vocab",
                                             "flash_attention",
                                             "tie_embeddings",
                                             "mlp",
                                             "norm",
                                             "position",
                                             "causal",
                                             "experts",
                                             "top_k",
                                             "expert_ffn",
                                             "shared_experts",
                                             "moe_every",
                                             "dense_first",
                                             "capacity_factor",
                                             "latent",
                                             "head_dim",
                                             "attention_kernel",
                                             "mtp_layers"};
  return keys;
}

// The mixture-of-experts keys of the generator (SPEC section 9).
void read_experts(const Reader& r, const YAML::Node& n, TransformerShape& shape) {
  const char* keys[] = {"top_k", "expert_ffn", "shared_experts", "moe_every", "dense_first",
                        "capacity_factor"};
  if (!n["experts"].IsDefined()) {
    for (const char* k : keys) {
      if (n[k].IsDefined())
        r.fail(n[k], child_path("model", k), "an expert setting for a model without experts",
               "experts: E (routed experts per MoE layer), or leave it out");
    }
    return;
  }
  shape.experts = static_cast<int>(r.integer(n["experts"], "model.experts", 0, 1 << 16));
  if (n["top_k"].IsDefined())
    shape.top_k = static_cast<int>(r.integer(n["top_k"], "model.top_k", 1, 1 << 16));
  if (shape.experts > 0 && shape.top_k > shape.experts)
    r.fail(n["top_k"], "model.top_k",
           fmt::format("each token cannot visit {} of {} experts", shape.top_k, shape.experts),
           fmt::format("1 to {}", shape.experts));
  if (n["expert_ffn"].IsDefined())
    shape.expert_ffn = r.integer(n["expert_ffn"], "model.expert_ffn", 1, int64_t{1} << 26);
  if (n["shared_experts"].IsDefined())
    shape.shared_experts =
        static_cast<int>(r.integer(n["shared_experts"], "model.shared_experts", 0, 1 << 10));
  if (n["moe_every"].IsDefined())
    shape.moe_every = static_cast<int>(r.integer(n["moe_every"], "model.moe_every", 1, 1 << 16));
  if (n["dense_first"].IsDefined())
    shape.dense_first =
        static_cast<int>(r.integer(n["dense_first"], "model.dense_first", 0, shape.layers));
  if (n["capacity_factor"].IsDefined() &&
      !(n["capacity_factor"].IsScalar() && n["capacity_factor"].Scalar() == "none"))
    shape.capacity_factor = r.real(n["capacity_factor"], "model.capacity_factor", 1, 1000);
}

// model.attention_kernel: flash (FlashAttention 2/3, cuDNN) | triton (flash_attn_triton),
// which exists only as a fused kernel and, as that kernel does, takes heads up to 128 wide.
void read_attention_kernel(const Reader& r, const YAML::Node& n, TransformerShape& shape) {
  const YAML::Node k = n["attention_kernel"];
  if (!k.IsDefined()) return;
  shape.attention_kernel = static_cast<AttentionKernel>(
      r.choice<int>(k, "model.attention_kernel",
                    {{"flash", static_cast<int>(AttentionKernel::kFlash)},
                     {"triton", static_cast<int>(AttentionKernel::kTriton)}}));
  if (!shape.flash_attention)
    r.fail(k, "model.attention_kernel", "a fused attention kernel for unfused attention",
           "flash_attention: true beside attention_kernel, or leave it out");
  const int64_t d = shape.latent ? shape.latent->head_dim + shape.latent->rope_dim
                   : shape.head_dim > 0 ? shape.head_dim
                                        : shape.hidden / shape.heads;
  if (shape.attention_kernel == AttentionKernel::kTriton && d > 128)
    r.fail(k, "model.attention_kernel",
           fmt::format("the Triton kernel takes heads up to 128 wide, not {}", d),
           "attention_kernel: flash, or heads of at most 128");
}

// model: {generator: transformer, layers, hidden, heads, query_groups, ffn, sequence, vocab,
// ...}
Model read_generated_model(const Reader& r, const YAML::Node& n, const Training& t,
                           const GpuSpec& gpu) {
  std::vector<std::string> allowed{"name", "generator"};
  allowed.insert(allowed.end(), generator_keys().begin(), generator_keys().end());
  r.expect_map(n, "model", allowed);
  r.choice<int>(n["generator"], "model.generator", {{"transformer", 0}});
  TransformerShape shape;
  shape.layers =
      static_cast<int>(r.integer(r.require(n, "model", "layers"), "model.layers", 1, 100'000));
  shape.hidden = r.integer(r.require(n, "model", "hidden"), "model.hidden", 1, int64_t{1} << 24);
  if (n["mtp_layers"].IsDefined())
    shape.mtp_layers = static_cast<int>(r.integer(n["mtp_layers"], "model.mtp_layers", 0, 16));
  shape.heads = r.integer(r.require(n, "model", "heads"), "model.heads", 1, int64_t{1} << 16);
  if (shape.hidden % shape.heads != 0) {
    r.fail(n["heads"], "model.heads",
           fmt::format("{} heads do not divide hidden {}", shape.heads, shape.hidden),
           "a divisor of model.hidden");
  }
  if (n["query_groups"].IsDefined()) {
    shape.query_groups = r.integer(n["query_groups"], "model.query_groups", 1, int64_t{1} << 16);
    if (shape.heads % shape.query_groups != 0) {
      r.fail(n["query_groups"], "model.query_groups",
             fmt::format("{} query groups do not divide {} heads", shape.query_groups, shape.heads),
             "a divisor of model.heads");
    }
  }
  if (n["head_dim"].IsDefined())
    shape.head_dim = r.integer(n["head_dim"], "model.head_dim", 1, int64_t{1} << 16);
  shape.ffn = n["ffn"].IsDefined() ? r.integer(n["ffn"], "model.ffn", 1, int64_t{1} << 26)
                                   : 4 * shape.hidden;
  shape.sequence =
      r.integer(r.require(n, "model", "sequence"), "model.sequence", 1, int64_t{1} << 24);
  shape.vocab = r.integer(r.require(n, "model", "vocab"), "model.vocab", 1, int64_t{1} << 26);
  shape.flash_attention =
      read_flag(r, n["flash_attention"], "model.flash_attention", shape.flash_attention);
  shape.causal = read_flag(r, n["causal"], "model.causal", shape.causal);
  shape.tie_embeddings =
      read_flag(r, n["tie_embeddings"], "model.tie_embeddings", shape.tie_embeddings);
  using S = TransformerShape;
  if (n["mlp"].IsDefined()) {
    shape.mlp = static_cast<S::Mlp>(r.choice<int>(n["mlp"], "model.mlp",
                                                  {{"gelu", static_cast<int>(S::Mlp::kGelu)},
                                                   {"swiglu", static_cast<int>(S::Mlp::kSwiglu)},
                                                   {"geglu", static_cast<int>(S::Mlp::kGeglu)}}));
  }
  if (n["norm"].IsDefined()) {
    shape.norm =
        static_cast<S::Norm>(r.choice<int>(n["norm"], "model.norm",
                                           {{"layernorm", static_cast<int>(S::Norm::kLayerNorm)},
                                            {"rmsnorm", static_cast<int>(S::Norm::kRmsNorm)}}));
  }
  if (n["position"].IsDefined()) {
    shape.position = static_cast<S::Position>(
        r.choice<int>(n["position"], "model.position",
                      {{"learned", static_cast<int>(S::Position::kLearned)},
                       {"rotary", static_cast<int>(S::Position::kRotary)},
                       {"none", static_cast<int>(S::Position::kNone)}}));
  }
  read_experts(r, n, shape);
  if (const YAML::Node l = n["latent"]; l.IsDefined()) {
    r.expect_map(l, "model.latent", {"kv_rank", "q_rank", "rope_dim", "head_dim"});
    TransformerShape::Latent x;
    const auto dim = [&](const char* key, int64_t& v, int64_t lo) {
      if (l[key].IsDefined()) v = r.integer(l[key], child_path("model.latent", key), lo, 1 << 20);
    };
    dim("kv_rank", x.kv_rank, 1);
    dim("q_rank", x.q_rank, 0);
    dim("rope_dim", x.rope_dim, 0);
    dim("head_dim", x.head_dim, 1);
    if (!shape.flash_attention)
      r.fail(l, "model.latent", "latent attention runs as one fused attention kernel",
             "flash_attention: true beside latent");
    shape.latent = x;
  }
  read_attention_kernel(r, n, shape);
  Model m = r.at(n, "model", [&] { return transformer_model(shape, t, gpu); });
  if (n["name"].IsDefined()) m.name = r.scalar(n["name"], "model.name");
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

// A file the scenario names at node n: a regular file of bounded size, valid UTF-8.
std::string read_text(const Reader& r, const YAML::Node& n, const std::string& key,
                      const std::filesystem::path& path, const std::string& what) {
  return read_input_file(path.string(), what, "a readable " + what, key, r.where(n, key));
}

// Reads a model mapping from another YAML file (an include, or a profile in YAML form)
// with that file's own locations in errors. A file that is not a model is refused without
// quoting it: it may be anything the user pointed at.
Model read_model_file(const Reader& inner, const std::string& text, const Training& t,
                      const GpuSpec& gpu) {
  const YAML::Node root = parse_yaml(text, inner.file());
  const std::vector<std::string> keys{"layers", "generator", "profile", "include"};
  const bool model =
      root.IsMap() && std::any_of(keys.begin(), keys.end(),
                                  [&](const std::string& k) { return root[k].IsDefined(); });
  if (!model) {
    throw InputError(fmt::format("this file is not a model: it is {}{}", Reader::shape(root),
                                 root.IsMap() ? " with none of a model's keys" : ""),
                     "a YAML mapping with layers, generator, profile or include", "model",
                     {inner.file(), 1, 1});
  }
  return read_model_section(inner, root, t, gpu, true);
}

// An included generated model with the scenario's own shape keys laid over it
// (model: {include: llama3-8b, sequence: 4096}). The merged mapping is read with the
// scenario's reader: the keys a user can get wrong are the scenario's.
Model read_overridden_model(const Reader& r, const Reader& inner, const YAML::Node& n,
                            const std::string& text, const Training& t, const GpuSpec& gpu) {
  YAML::Node merged = YAML::Clone(parse_yaml(text, inner.file()));
  std::string first;
  for (const std::string& k : generator_keys()) {
    if (!n[k].IsDefined()) continue;
    if (first.empty()) first = k;
    merged[k] = n[k];
  }
  if (!merged.IsMap() || !merged["generator"].IsDefined()) {
    r.fail(n[first], "model." + first,
           "only a generated model's shape can be overridden; this include is not one",
           "model: {include: NAME} alone, or a generated model (generator: transformer)");
  }
  return read_generated_model(r, merged, t, gpu);
}

// model: {include: NAME}: a model of the built-in zoo (scenarios/models/NAME.yaml,
// compiled in) or, when NAME looks like a path, a YAML file relative to the scenario. The
// generator's shape keys beside it override an included generated model's.
Model read_included_model(const Reader& r, const YAML::Node& n, const Training& t,
                          const GpuSpec& gpu) {
  std::vector<std::string> allowed{"include", "name"};
  allowed.insert(allowed.end(), generator_keys().begin(), generator_keys().end());
  r.expect_map(n, "model", allowed);
  const bool overrides = std::any_of(generator_keys().begin(), generator_keys().end(),
                                     [&](const std::string& k) { return n[k].IsDefined(); });
  const std::string name = r.scalar(n["include"], "model.include", "a model name or YAML file");
  Model m;
  if (name.find('/') != std::string::npos || yaml_file_name(name)) {
    const auto path = relative_to(r, name);
    const Reader inner = r.nested(path.string(), n["include"], "model.include");
    const std::string text = read_text(r, n["include"], "model.include", path, "YAML file");
    m = overrides ? read_overridden_model(r, inner, n, text, t, gpu)
                  : read_model_file(inner, text, t, gpu);
  } else {
    const char* text = find_zoo_model(name);
    if (text == nullptr) {
      r.fail(n["include"], "model.include",
             fmt::format("unknown model '{}'{}", name, suggestion(name, zoo_model_names())),
             "a built-in model (" + join(zoo_model_names()) + ") or a YAML file path");
    }
    const Reader inner =
        r.nested(fmt::format("scenarios/models/{}.yaml", name), n["include"], "model.include");
    m = overrides ? read_overridden_model(r, inner, n, text, t, gpu)
                  : read_model_file(inner, text, t, gpu);
  }
  if (n["name"].IsDefined()) m.name = r.scalar(n["name"], "model.name");
  return m;
}

// A profile measured at `measured` samples per micro-batch, brought to the training's
// micro-batch r = micro_batch / measured times as large: bytes scale by r; a layer whose
// matrix FLOPs are known (PipeDream Conv2d and Linear nodes) scales its times by the ratio
// of its roofline at the two sizes (the efficiency curve), any other by r. Layers costed
// analytically (a YAML profile with shapes) are already at the micro-batch.
void scale_profile(Model& m, int64_t measured, const std::vector<double>& matrix_flops,
                   const Training& t, const GpuSpec& gpu) {
  const double r = static_cast<double>(t.micro_batch) / static_cast<double>(measured);
  const double elem = static_cast<double>(element_bytes(t.precision));
  auto scaled_time = [](Time x, double f) {
    const double ps = std::round(static_cast<double>(x.ps_count()) * f);
    if (!(ps < 9.2e18)) too_large("a scaled profile time");
    return Time::ps(static_cast<int64_t>(ps));
  };
  auto scaled_bytes = [&](int64_t x) {
    const double v = std::round(static_cast<double>(x) * r);
    if (!(v < 4e18)) too_large("a scaled profile size");
    return static_cast<int64_t>(v);
  };
  for (size_t i = 0; i < m.layers.size(); ++i) {
    Layer& l = m.layers[i];
    if (l.source == "analytic") continue;
    double f = r;
    const double flops = i < matrix_flops.size() ? matrix_flops[i] : 0;
    if (flops > 0) {
      // Input and output about the size of the output (activation_size is fp32).
      const double bytes = 2 * static_cast<double>(l.output_bytes) / 4 * elem;
      const double weights = static_cast<double>(l.params) * elem;
      const Time at = roofline({flops, bytes}, true, weights, 1, gpu, t.precision).time;
      const Time to = roofline({flops * r, bytes * r}, true, weights, 1, gpu, t.precision).time;
      if (at > Time::zero())
        f = static_cast<double>(to.ps_count()) / static_cast<double>(at.ps_count());
    }
    l.forward = scaled_time(l.forward, f);
    l.backward_input = scaled_time(l.backward_input, f);
    l.backward_weight = scaled_time(l.backward_weight, f);
    l.activation_bytes = scaled_bytes(l.activation_bytes);
    if (l.weight_activation)
      l.weight_activation = std::min(scaled_bytes(*l.weight_activation), l.activation_bytes);
    l.output_bytes = scaled_bytes(l.output_bytes);
    l.source = flops > 0 ? "profile/curve" : "profile/linear";
  }
  m.input_bytes = scaled_bytes(m.input_bytes);
}

// A profile's layers whose matrix FLOPs are known (`flops`, at the training's micro-batch:
// PipeDream Conv2d and Linear nodes) split over k stage replicas' samples: their times
// scaled by the ratio of their roofline as k GEMMs of 1/k, each reading the weights, to
// the roofline of one (the same model scale_profile brings them to another batch with).
void add_sample_retimes(Model& m, const std::vector<double>& flops, const Training& t,
                        const GpuSpec& gpu) {
  const double elem = static_cast<double>(element_bytes(t.precision));
  for (size_t i = 0; i < m.layers.size() && i < flops.size(); ++i) {
    Layer& l = m.layers[i];
    if (l.source == "analytic" || !(flops[i] > 0)) continue;
    // Input and output about the size of the output (activation_size is fp32).
    const double bytes = 2 * static_cast<double>(l.output_bytes) / 4 * elem;
    const double weights = static_cast<double>(l.params) * elem;
    const Time whole = roofline({flops[i], bytes}, true, weights, 1, gpu, t.precision).time;
    if (!(whole > Time::zero())) continue;
    l.sample_retime = std::make_shared<const SampleRetime>(
        [f = l.forward, b = l.backward_input, w = l.backward_weight, flops = flops[i], bytes,
         weights, whole, gpu, p = t.precision](int k) {
          const Time split = roofline({flops, bytes}, true, weights * k, k, gpu, p).time;
          // (k shards of a GEMM take at most eff(F) / eff(F / k) of its time: a small factor.)
          const double g =
              static_cast<double>(split.ps_count()) / static_cast<double>(whole.ps_count());
          const auto scaled = [g](Time x) {
            return Time::ps(static_cast<int64_t>(
                std::min(std::round(static_cast<double>(x.ps_count()) * g), 9.2e18)));
          };
          return TensorTimes{scaled(f), scaled(b), scaled(w), {}, {}, {}};
        });
  }
}

// model: {profile: FILE}: measured per-layer costs from a CSV table, PipeDream's profile
// graph (recognised by its "ID -- DESCRIPTION -- ..." lines) or a YAML model.
Model read_profile(const Reader& r, const YAML::Node& n, const Training& t, const GpuSpec& gpu) {
  r.expect_map(n, "model", {"name", "profile", "input", "batch"});
  const std::string rel = r.scalar(n["profile"], "model.profile", "a file path");
  const auto path = relative_to(r, rel);
  // Nesting is checked before reading: a profile naming itself is refused, not re-read.
  const Reader inner = r.nested(path.string(), n["profile"], "model.profile");
  const std::string text = read_text(r, n["profile"], "model.profile", path, "profile file");
  Model m;
  std::vector<double> matrix_flops;
  // The format is taken from the content, whatever the file's extension: PipeDream's
  // graph by its " -- " lines, a CSV by a header naming a known column, otherwise YAML when
  // the name says so or the first line is a "key:" line.
  const size_t first = text.find_first_not_of(" \t\r\n");
  const size_t eol = text.find('\n', first);
  const std::string first_line =
      first == std::string::npos ? ""
                                 : text.substr(first, eol == std::string::npos ? eol : eol - first);
  const bool graph = first_line.find(" -- ") != std::string::npos;
  const bool csv = !graph && is_profile_csv(text);
  std::istringstream in(text);
  if (graph) {
    m = read_profile_graph(in, path.string(), &matrix_flops);
  } else if (!csv && (yaml_file_name(rel) || first_line.find(':') != std::string::npos ||
                      first_line.starts_with('{') || first_line.starts_with("---"))) {
    m = read_model_file(inner, text, t, gpu);
  } else {
    m = read_profile_csv(in, path.string());
  }
  if (n["batch"].IsDefined()) {
    const int64_t measured = r.integer(n["batch"], "model.batch", 1, int64_t{1} << 24);
    if (measured != t.micro_batch) {
      r.at(n["batch"], "model.batch", [&] { scale_profile(m, measured, matrix_flops, t, gpu); });
      for (double& f : matrix_flops)
        f *= static_cast<double>(t.micro_batch) / static_cast<double>(measured);
    }
  }
  add_sample_retimes(m, matrix_flops, t, gpu);
  if (n["name"].IsDefined()) m.name = r.scalar(n["name"], "model.name");
  if (n["input"].IsDefined()) m.input_bytes = r.bytes(n["input"], "model.input");
  return m;
}

// A layer given by its shape (model.input names the input's): its op, repeated, each
// repeat's input shape kept in `inputs` for the tensor splits.
void read_shaped_layer(const Reader& r, const YAML::Node& l, const std::string& p,
                       const Training& t, const GpuSpec& gpu, ShapeState& state, Model& m,
                       std::vector<std::pair<ShapeOp, ShapeState>>& inputs) {
  std::vector<std::string> shape_keys{"name", "repeat", "drop_carried"};
  shape_keys.insert(shape_keys.end(), kShapeOps.begin(), kShapeOps.end());
  r.expect_map(l, p, shape_keys);
  std::string kind;
  for (const auto& k : kShapeOps) {
    if (!l[k].IsDefined()) continue;
    if (!kind.empty())
      r.fail(l[k], p + "." + k, fmt::format("a layer has one op, but this one also has '{}'", kind),
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
    inputs.emplace_back(op, state);
    m.layers.push_back(r.at(l[kind], p + "." + kind, [&] {
      return shape_layer(repeated_name(base, k, repeat), op, drop, state, t, gpu);
    }));
  }
}

// A layer given by its measured times and bytes.
void read_timed_layer(const Reader& r, const YAML::Node& l, const std::string& p, Model& m) {
  for (const auto& k : kShapeOps) {
    if (l.IsMap() && l[k].IsDefined())
      r.fail(l[k], p + "." + k, "a layer given by its shape needs the model's input shape",
             "model.input: {image: [C, H, W]}, {tokens: N} or {sequence: [N, features]}");
  }
  r.expect_map(l, p,
               {"name", "forward", "backward", "backward_input", "backward_weight", "activation",
                "weight_activation", "output", "params", "optimizer", "repeat"});
  Layer layer;
  layer.optimizer_given = true;  // SPEC section 3: no optimizer time unless a layer gives one
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
  if (l["weight_activation"].IsDefined()) {
    const YAML::Node& w = l["weight_activation"];
    if (!split)
      r.fail(w, p + ".weight_activation",
             "this is what a separate weight-gradient pass keeps, but the layer's backward is "
             "not split",
             "weight_activation with backward_input + backward_weight");
    layer.weight_activation = r.bytes(w, p + ".weight_activation");
    if (*layer.weight_activation > layer.activation_bytes)
      r.fail(w, p + ".weight_activation",
             fmt::format("{} B is more than the layer's activation ({} B)",
                         *layer.weight_activation, layer.activation_bytes),
             "at most the activation: W keeps part of what F allocated");
  }
  if (l["output"].IsDefined()) layer.output_bytes = r.bytes(l["output"], p + ".output");
  if (l["params"].IsDefined()) layer.params = r.count(l["params"], p + ".params");
  if (l["optimizer"].IsDefined()) layer.optimizer = r.time(l["optimizer"], p + ".optimizer");
  append_repeated(m, layer, read_repeat(r, l, p, m.layers.size()));
}

// Tensor splits of shape-described layers; consecutive linears pair up as Megatron-LM's
// column- and row-parallel halves, a linear without a partner is column-parallel with its
// output gathered.
void add_tensor_splits(const std::vector<std::pair<ShapeOp, ShapeState>>& inputs,
                       const Training& t, const GpuSpec& gpu, Model& m) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto linear = [&](size_t k) {
      return k < inputs.size() && std::holds_alternative<LinearOp>(inputs[k].first);
    };
    LinearSplit split = LinearSplit::kGather;
    if (linear(i) && linear(i + 1)) split = LinearSplit::kColumn;
    m.layers[i].tensor_split = shape_tensor_split(inputs[i].first, inputs[i].second, split, t, gpu);
    if (split == LinearSplit::kColumn) {
      ++i;
      m.layers[i].tensor_split =
          shape_tensor_split(inputs[i].first, inputs[i].second, LinearSplit::kRow, t, gpu);
    }
  }
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
  std::vector<std::pair<ShapeOp, ShapeState>> inputs;  // shape-described: each op and its input
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string p = fmt::format("model.layers.{}", i);
    if (shaped) {
      read_shaped_layer(r, layers[i], p, t, gpu, state, m, inputs);
    } else {
      read_timed_layer(r, layers[i], p, m);
    }
  }
  add_tensor_splits(inputs, t, gpu, m);
  return m;
}

// The model's totals fit in 64 bits, whatever its form: every sum the simulator and the
// reports take over layers (a stage's time, parameters, activations) is then bounded too.
void check_totals(const Reader& r, const YAML::Node& n, const Model& m) {
  r.at(n, "model", [&] {
    Time time;
    int64_t params = 0, bytes = 0;
    for (const Layer& l : m.layers) {
      const Time backward = checked_add(l.backward_input, l.backward_weight, "a layer's backward");
      time = checked_add(time,
                         checked_add(checked_add(l.forward, backward, "the model's time"),
                                     l.optimizer, "the model's time"),
                         "the model's time");
      params = checked_add(params, l.params, "the model's parameter count");
      bytes = checked_add(bytes, checked_add(l.activation_bytes, l.output_bytes, "a layer's bytes"),
                          "the model's activation bytes");
    }
    // Weights, gradients and optimizer state: at most 16 bytes per parameter.
    checked_mul(params, 16, "the model's parameter bytes");
  });
}

Model read_model_form(const Reader& r, const YAML::Node& n, const Training& t, const GpuSpec& gpu,
                      bool nested) {
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

}  // namespace

Model read_model_section(const Reader& r, const YAML::Node& n, const Training& t,
                         const GpuSpec& gpu, bool nested) {
  Model m = read_model_form(r, n, t, gpu, nested);
  if (!nested) check_totals(r, n, m);
  return m;
}

}  // namespace pipesim::internal
