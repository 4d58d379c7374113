#include "topology/presets.h"

#include <array>

namespace pipesim {
namespace {

constexpr int64_t kGiB = 1024LL * 1024 * 1024;

// A fused attention kernel's level: a flat share of the peak on its causal FLOPs or, where
// `measured`, a factor on the curve measured on an H100 (attention_kernel_curve).
struct KernelFit {
  double level;
  bool measured;
};
// One generation's fit (docs/presets.md shows the scan that chose each level): the share
// of the peak GEMMs of 128 GFLOP reach (16-bit and fp8) and 16-bit GEMMs of 8 TFLOP and
// more, the factor on Calculon's memory table, the fused attention kernels (FlashAttention
// 2/3 and cuDNN's; the Triton kernel of 2022), the fp8 GEMMs' share of the fp8 peak, and
// the share of compute speed lost beside the GPU's own transfers inside its server.
struct Fit {
  double matrix_top, matrix_huge, memory_factor;
  KernelFit attention, triton;
  double fp8_top;
  const char* runs;  // what it was fitted to, for pipesim model
  double comm_interference = 0;
  const char* note = "";  // what a datasheet changed in another generation's fit
};
// Megatron-LM's Table 1, Korthikanti et al.'s Table 5, the Zero Bubble GPT runs (GEMMs and
// memory) and llm-foundry's A100 runs (attention, the largest GEMMs). llm-foundry's ran the
// Triton kernel; no A100 run here used the CUDA kernels, which take the Triton level.
constexpr Fit kAmpere{0.70, 0.85, 0.6, {0.30, false}, {0.30, false}, 0.70, "A100 runs"};
// NVIDIA's NeMo / dgxc-benchmarking / Megatron-LM H100 runs (bf16 and fp8; the CUDA
// attention kernels) and llm-foundry's H100 runs, all 52 bf16 rows (the Triton kernel, on
// the measured kernel's shape: it gains with size as the CUDA kernels do).
constexpr Fit kHopper{0.64, 0.64, 0.40, {0.5, true}, {0.28, true}, 0.68, "H100 runs", 0.3};
// Blackwell (B200, GB200): the Hopper fit's kernels, memory and interference with its own
// GEMM levels, fitted to the 26 published B200 and GB200 runs (NeMo 25.02-25.04,
// Megatron-Bridge 25.11, dgxc-benchmarking v25.05; docs/presets.md "Blackwell's own levels"),
// the fp8 level again over 28 with the runs' fp8 parameters ("The fp8 level again").
constexpr Fit kBlackwell{0.52, 0.52, 0.40, {0.5, true}, {0.28, true}, 0.46, "B200 and GB200 runs",
                         0.3};
// Blackwell Ultra (B300, GB300): the Blackwell fit, its attention kernels at twice their
// level. Its datasheets give the same 16-bit and fp8 tensor rates as B200's and GB200's and
// "2x attention performance" (the special-function units' exponentials, a fused attention
// kernel's bound, doubled); docs/presets.md, docs/validation.md "Blackwell Ultra".
constexpr Fit kBlackwellUltra{0.52,
                              0.52,
                              0.40,
                              {1.0, true},
                              {0.56, true},
                              0.46,
                              "B200 and GB200 runs",
                              0.3,
                              "attention kernels at twice Blackwell's level (datasheet)"};
constexpr double kHugeGemm = 8e12;  // FLOPs of one GEMM where the curve's last point sits

// Efficiency curves (docs/presets.md gives the sources): GEMM efficiency by the FLOPs of
// one GEMM, element-wise efficiency by its FLOPs, memory efficiency by the bytes one op
// moves. The shapes are Calculon's A100 and H100 tables (calculon-ai/calculon,
// systems/*.json); the matrix level and the memory factor are fitted once to Megatron-LM's
// Table 1, Korthikanti et al.'s Table 5 and the Zero Bubble GPT runs together
// (docs/validation.md).
EfficiencyCurve matrix_curve(double top, double huge) {
  // Calculon's (0, 0.1), (1, 0.6), (16, 0.9), (128, 0.95) GFLOP points, its top scaled to
  // `top`; beyond Calculon's table, `huge` at 8 TFLOP (a GEMM that many waves amortise).
  EfficiencyCurve c{{{0, 0.1}, {1e9, 0.6 * top / 0.95}, {16e9, 0.9 * top / 0.95}, {128e9, top}}};
  if (huge > top) c.points.push_back({kHugeGemm, huge});
  return c;
}
// The fused attention kernels (cuDNN 9.19 through PyTorch's SDPA, forward and backward
// passes each at its own FLOPs) measured on an H100 on 2026-11-28
// (docs/validation/gpu-ops-2026-11-28/): 0.113, 0.43, 0.538 and 0.588 of the 16-bit peak
// at 20.4, 217, 869 and 1739 GFLOP, times `factor` (what a training step keeps of them).
EfficiencyCurve attention_kernel_curve(double factor) {
  EfficiencyCurve c{{{0, 0.1}, {20.4e9, 0.113}, {217e9, 0.43}, {869e9, 0.538}, {1739e9, 0.588}}};
  for (auto& pt : c.points) pt.efficiency *= factor;
  return c;
}
EfficiencyCurve kernel_curve(const KernelFit& k) {
  return k.measured ? attention_kernel_curve(k.level) : matrix_curve(k.level, k.level);
}
EfficiencyCurve vector_curve() {
  return {{{0, 0.1}, {1e9, 0.5}, {16e9, 0.95}}};
}
EfficiencyCurve memory_curve(double k) {
  return {{{0, 0.3 * k}, {1e6, 0.6 * k}, {10e6, 0.75 * k}, {100e6, 0.9 * k}}};
}

struct Datasheet {
  const char* name;
  int64_t memory;
  double peak, fp32, vector, fp8, fp4, hbm, host;
  double tdp;  // watts, the board power the peaks are rated at
  const Fit& fit;
  bool borrowed;  // the fit is another generation's: none of this GPU's own runs yet
};

GpuSpec gpu(const Datasheet& d) {
  GpuSpec g;
  g.name = d.name;
  g.memory_bytes = d.memory;
  g.peak_flops = d.peak;
  g.peak_fp32_flops = d.fp32;
  g.vector_flops = d.vector;
  g.fp8_flops = d.fp8;
  g.fp4_flops = d.fp4;
  g.hbm_bytes_per_s = d.hbm;
  g.host_bytes_per_s = d.host;
  g.tdp_watts = d.tdp;
  g.matrix_efficiency = matrix_curve(d.fit.matrix_top, d.fit.matrix_huge);
  g.fp8_efficiency = matrix_curve(d.fit.fp8_top, d.fit.fp8_top);
  // No run here trained in NVFP4 when the levels were fitted: its GEMMs take the fp8 level
  // (docs/presets.md; docs/validation.md checks it on published NVFP4 runs).
  g.fp4_efficiency = g.fp8_efficiency;
  g.attention_efficiency = kernel_curve(d.fit.attention);
  g.triton_attention_efficiency = kernel_curve(d.fit.triton);
  g.vector_efficiency = vector_curve();
  g.memory_efficiency = memory_curve(d.fit.memory_factor);
  g.curves = d.fit.runs;
  g.comm_interference = d.fit.comm_interference;
  g.curves_borrowed = d.borrowed;
  g.curves_note = d.fit.note;
  return g;
}

constexpr int64_t kGB = 1'000'000'000;

// Memory: nominal HBM capacity. Peaks: dense (no sparsity) rates of the SXM / OAM parts;
// NVFP4 on Blackwell alone. TDP: the part's maximum board power, in watts.
// Host link: per direction, PCIe 3/4/5 x16 (16, 32, 64 GB/s) or GB200's NVLink-C2C
// (900 GB/s both ways). The datasheets and what each figure is are in docs/presets.md.
const std::array<GpuSpec, 11>& gpu_presets() {
  static const std::array<GpuSpec, 11> table{{
      gpu({"v100-16gb", 16 * kGiB, 125e12, 15.7e12, 31.4e12, 0, 0, 900e9, 16e9, 300, kAmpere,
           true}),
      gpu({"v100-32gb", 32 * kGiB, 125e12, 15.7e12, 31.4e12, 0, 0, 900e9, 16e9, 300, kAmpere,
           true}),
      gpu({"a100-40gb", 40 * kGiB, 312e12, 19.5e12, 78e12, 0, 0, 1555e9, 32e9, 400, kAmpere,
           false}),
      gpu({"a100-80gb", 80 * kGiB, 312e12, 19.5e12, 78e12, 0, 0, 2039e9, 32e9, 400, kAmpere,
           false}),
      gpu({"h100-80gb", 80 * kGiB, 989e12, 67e12, 133.8e12, 1979e12, 0, 3350e9, 64e9, 700, kHopper,
           false}),
      gpu({"h200", 141 * kGB, 989e12, 67e12, 133.8e12, 1979e12, 0, 4800e9, 64e9, 700, kHopper,
           true}),
      gpu({"b200", 180 * kGB, 2250e12, 75e12, 150e12, 4500e12, 9e15, 8000e9, 64e9, 1000, kBlackwell,
           false}),
      gpu({"gb200", 186 * kGB, 2500e12, 80e12, 160e12, 5000e12, 10e15, 8000e9, 450e9, 1200,
           kBlackwell, false}),
      // Blackwell Ultra: B200's and GB200's 16-bit and fp8 rates, 288 GB; DGX B300's hosts
      // are PCIe 5.0 (docs/presets.md).
      gpu({"b300", 288 * kGB, 2250e12, 75e12, 150e12, 4500e12, 13.125e15, 8000e9, 64e9, 1100,
           kBlackwellUltra, true}),
      gpu({"gb300", 288 * kGB, 2500e12, 80e12, 160e12, 5000e12, 15e15, 8000e9, 450e9, 1400,
           kBlackwellUltra, true}),
      gpu({"mi300x", 192 * kGB, 1307.4e12, 163.4e12, 326.8e12, 2614.9e12, 0, 5300e9, 64e9, 750,
           kHopper, true}),
  }};
  return table;
}

// Bandwidth: per direction, between two GPUs (intra-node kinds) or per node (network
// kinds). Latency: typical small-message end-to-end latency through the NCCL stack.
const std::array<LinkSpec, 23>& link_presets() {
  static const std::array<LinkSpec, 23> table{{
      {"nvlink", LinkKind::kNvLink, 50e9, Time::us(2)},  // = nvlink2
      {"nvlink2", LinkKind::kNvLink, 50e9, Time::us(2)},
      {"nvlink3", LinkKind::kNvLink, 300e9, Time::us(2)},
      {"nvlink4", LinkKind::kNvLink, 450e9, Time::us(2)},
      {"nvswitch", LinkKind::kNvSwitch, 450e9, Time::us(2)},  // = nvswitch3
      {"nvswitch2", LinkKind::kNvSwitch, 300e9, Time::us(2)},
      {"nvswitch3", LinkKind::kNvSwitch, 450e9, Time::us(2)},
      // B200 / GB200: 18 NVLink 5 links, 1.8 TB/s both ways per GPU, through NVSwitch.
      {"nvlink5", LinkKind::kNvSwitch, 900e9, Time::us(2)},
      {"pcie", LinkKind::kPcie, 15.75e9, Time::us(3)},  // = pcie3
      {"pcie3", LinkKind::kPcie, 15.75e9, Time::us(3)},
      {"pcie4", LinkKind::kPcie, 31.5e9, Time::us(3)},
      {"pcie5", LinkKind::kPcie, 63e9, Time::us(3)},
      {"pcie6", LinkKind::kPcie, 121e9, Time::us(3)},
      {"ethernet", LinkKind::kEthernet, 25e9 / 8, Time::us(10)},  // = eth25
      {"eth10", LinkKind::kEthernet, 10e9 / 8, Time::us(10)},
      {"eth25", LinkKind::kEthernet, 25e9 / 8, Time::us(10)},
      {"eth100", LinkKind::kEthernet, 100e9 / 8, Time::us(10)},
      {"eth400", LinkKind::kEthernet, 400e9 / 8, Time::us(10)},
      {"eth800", LinkKind::kEthernet, 800e9 / 8, Time::us(10)},
      {"infiniband", LinkKind::kInfiniBand, 200e9 / 8, Time::us(2)},  // = ib-hdr
      {"ib-hdr", LinkKind::kInfiniBand, 200e9 / 8, Time::us(2)},
      {"ib-ndr", LinkKind::kInfiniBand, 400e9 / 8, Time::us(2)},
      {"ib-xdr", LinkKind::kInfiniBand, 800e9 / 8, Time::us(2)},
  }};
  return table;
}

}  // namespace

std::string_view to_string(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvLink:
      return "nvlink";
    case LinkKind::kNvSwitch:
      return "nvswitch";
    case LinkKind::kPcie:
      return "pcie";
    case LinkKind::kEthernet:
      return "ethernet";
    case LinkKind::kInfiniBand:
      return "infiniband";
    case LinkKind::kHost:
      return "host";
  }
  return "?";
}

std::optional<LinkKind> parse_link_kind(std::string_view name) {
  for (LinkKind k : {LinkKind::kNvLink, LinkKind::kNvSwitch, LinkKind::kPcie, LinkKind::kEthernet,
                     LinkKind::kInfiniBand}) {
    if (to_string(k) == name) return k;
  }
  return std::nullopt;
}

const GpuSpec* find_gpu_preset(std::string_view name) {
  for (const GpuSpec& g : gpu_presets()) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

const LinkSpec* find_link_preset(std::string_view name) {
  for (const LinkSpec& l : link_presets()) {
    if (l.preset == name) return &l;
  }
  return nullptr;
}

const LinkSpec& default_link_preset(LinkKind kind) {
  const LinkSpec* spec = find_link_preset(to_string(kind));
  return spec != nullptr ? *spec : link_presets()[0];
}

std::vector<std::string> gpu_preset_names() {
  std::vector<std::string> names;
  for (const GpuSpec& g : gpu_presets()) names.push_back(g.name);
  return names;
}

std::vector<std::string> link_preset_names() {
  std::vector<std::string> names;
  for (const LinkSpec& l : link_presets()) names.push_back(l.preset);
  return names;
}

}  // namespace pipesim
