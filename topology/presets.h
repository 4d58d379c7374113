// GPU and link presets from public datasheet figures. The table with sources is in
// docs/presets.md; keep the two in step.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"
#include "topology/efficiency.h"

namespace pipesim {

// The fused attention kernel a transformer runs (model.attention_kernel): FlashAttention 2/3
// or cuDNN's fused attention, what Transformer Engine, Megatron-Core and PyTorch's SDPA
// dispatch to (kFlash); or the Triton FlashAttention of 2022 (flash_attn_triton on
// triton's pre-MLIR backend, llm-foundry's attn_impl: triton), which pads the head
// dimension to a power of two and has no code path of its own for Hopper (kTriton).
enum class AttentionKernel { kFlash, kTriton };

struct GpuSpec {
  std::string name;
  int64_t memory_bytes = 0;
  double peak_flops = 0;       // dense 16-bit tensor-core rate (mixed precision)
  double peak_fp32_flops = 0;  // dense fp32 rate (fp32 training without TF32)
  double vector_flops = 0;     // 16-bit non-tensor rate (element-wise ops, mixed precision)
  double fp8_flops = 0;        // dense fp8 tensor rate; 0 where the GPU has none
  double fp4_flops = 0;        // dense NVFP4 tensor rate; 0 where the GPU has none
  double hbm_bytes_per_s = 0;
  // The board power its datasheet rates the peaks at (0: not known), and the limit a
  // cluster runs it under (cluster.gpu.power_limit; 0: none). Under a lower limit the
  // compute units run at clock_share() of their clock.
  double tdp_watts = 0;
  double power_limit_watts = 0;
  // The share of its datasheet clock a GPU holds under its power limit: dynamic power goes
  // as f V^2 and the voltage with the clock, so P ~ f^3 and f / f_max = (limit / TDP)^(1/3)
  // (docs/presets.md, "Power limits"). 1 without a limit or above the TDP.
  double clock_share() const {
    if (!(power_limit_watts > 0 && tdp_watts > 0) || power_limit_watts >= tdp_watts) return 1;
    return std::cbrt(power_limit_watts / tdp_watts);
  }
  // The GPU's link to its host's memory, per direction (PCIe, or NVLink-C2C on a
  // Grace-Blackwell superchip): what activations offloaded to the host move over
  // (Strategy::offload_layers; cluster.gpu.host_bandwidth).
  double host_bytes_per_s = 0;
  int64_t reserved_bytes = 0;  // framework/context overhead the user asks us to count
  // A fixed time added to every compute step (cluster.gpu.launch_overhead): the framework's
  // own cost per step, kernel launches and the host code between them.
  Time launch_overhead;
  // Shares of the peaks an analytic op reaches, by its size: matrix ops (GEMMs,
  // convolutions) and vector ops (element-wise) by their FLOPs, memory traffic by the
  // bytes the op moves. An op takes max(FLOPs / (peak x eff), bytes / (HBM x eff)).
  EfficiencyCurve matrix_efficiency = EfficiencyCurve::constant(0.5);
  EfficiencyCurve vector_efficiency = EfficiencyCurve::constant(0.5);
  EfficiencyCurve memory_efficiency = EfficiencyCurve::constant(0.5);
  // GEMMs at the fp8 peak (training.precision: fp8), and fused attention kernels, by FLOPs:
  // FlashAttention 2/3 and cuDNN's (attention_efficiency) and the Triton kernel of 2022
  // (triton_attention_efficiency; AttentionKernel says which a model runs).
  EfficiencyCurve fp8_efficiency = EfficiencyCurve::constant(0.5);
  EfficiencyCurve fp4_efficiency = EfficiencyCurve::constant(0.5);  // NVFP4 GEMMs
  EfficiencyCurve attention_efficiency = EfficiencyCurve::constant(0.5);
  EfficiencyCurve triton_attention_efficiency = EfficiencyCurve::constant(0.5);
  const EfficiencyCurve& attention_curve(AttentionKernel k) const {
    return k == AttentionKernel::kTriton ? triton_attention_efficiency : attention_efficiency;
  }
  // cluster.gpu.efficiency: one share for every op and size, replacing the three curves.
  std::optional<double> efficiency;
  // The share of its compute speed a GPU loses while it sends a transfer of its own inside
  // its server (the SMs and memory bandwidth a communication kernel takes from the compute
  // it overlaps; cluster.gpu.comm_interference, fitted with the curves per generation).
  double comm_interference = 0;
  // Which runs the curves were fitted to (docs/presets.md), and whether this GPU borrows
  // them from another generation (pipesim model says so).
  std::string curves = "A100 runs";
  bool curves_borrowed = false;
  // What this GPU's datasheet changes in the fit it takes (empty: nothing), for pipesim model.
  std::string curves_note;
  // Takes `from`'s seven curves, where they come from and the datasheet's note on them
  // (cluster.gpu.like).
  void take_curves(const GpuSpec& from) {
    matrix_efficiency = from.matrix_efficiency;
    vector_efficiency = from.vector_efficiency;
    memory_efficiency = from.memory_efficiency;
    fp8_efficiency = from.fp8_efficiency;
    fp4_efficiency = from.fp4_efficiency;
    attention_efficiency = from.attention_efficiency;
    triton_attention_efficiency = from.triton_attention_efficiency;
    comm_interference = from.comm_interference;
    curves = from.curves;
    curves_note = from.curves_note;
  }
};

enum class LinkKind { kNvLink, kNvSwitch, kPcie, kEthernet, kInfiniBand, kHost };

std::string_view to_string(LinkKind kind);
std::optional<LinkKind> parse_link_kind(std::string_view name);  // user-facing kinds only

struct LinkSpec {
  std::string preset;  // name it came from, or "custom"
  LinkKind kind = LinkKind::kNvLink;
  double bytes_per_s = 0;  // per direction; +infinity means "never the bottleneck"
  Time latency;
};

const GpuSpec* find_gpu_preset(std::string_view name);
const LinkSpec* find_link_preset(std::string_view name);
// The preset a bare `kind:` stands for (e.g. ethernet -> eth25).
const LinkSpec& default_link_preset(LinkKind kind);
std::vector<std::string> gpu_preset_names();
std::vector<std::string> link_preset_names();

}  // namespace pipesim
