#include "topology/presets.h"

#include <array>

namespace pipesim {
namespace {

constexpr int64_t kGiB = 1024LL * 1024 * 1024;

// Memory: nominal HBM capacity. Peaks: dense (no sparsity) rates of the SXM parts.
const std::array<GpuSpec, 5>& gpu_presets() {
  static const std::array<GpuSpec, 5> table{{
      // Efficiency: model FLOPs utilisation reported for large transformer training
      // (docs/presets.md gives the sources).
      {"v100-16gb", 16 * kGiB, 125e12, 15.7e12, 900e9, 0, 0.30},
      {"v100-32gb", 32 * kGiB, 125e12, 15.7e12, 900e9, 0, 0.30},
      {"a100-40gb", 40 * kGiB, 312e12, 19.5e12, 1555e9, 0, 0.50},
      {"a100-80gb", 80 * kGiB, 312e12, 19.5e12, 2039e9, 0, 0.50},
      {"h100-80gb", 80 * kGiB, 989e12, 67e12, 3350e9, 0, 0.45},
  }};
  return table;
}

// Bandwidth: per direction, between two GPUs (intra-node kinds) or per node (network
// kinds). Latency: typical small-message end-to-end latency through the NCCL stack.
const std::array<LinkSpec, 19>& link_presets() {
  static const std::array<LinkSpec, 19> table{{
      {"nvlink", LinkKind::kNvLink, 50e9, Time::us(2)},  // = nvlink2
      {"nvlink2", LinkKind::kNvLink, 50e9, Time::us(2)},
      {"nvlink3", LinkKind::kNvLink, 300e9, Time::us(2)},
      {"nvlink4", LinkKind::kNvLink, 450e9, Time::us(2)},
      {"nvswitch", LinkKind::kNvSwitch, 450e9, Time::us(2)},  // = nvswitch3
      {"nvswitch2", LinkKind::kNvSwitch, 300e9, Time::us(2)},
      {"nvswitch3", LinkKind::kNvSwitch, 450e9, Time::us(2)},
      {"pcie", LinkKind::kPcie, 15.75e9, Time::us(3)},  // = pcie3
      {"pcie3", LinkKind::kPcie, 15.75e9, Time::us(3)},
      {"pcie4", LinkKind::kPcie, 31.5e9, Time::us(3)},
      {"pcie5", LinkKind::kPcie, 63e9, Time::us(3)},
      {"ethernet", LinkKind::kEthernet, 25e9 / 8, Time::us(10)},  // = eth25
      {"eth10", LinkKind::kEthernet, 10e9 / 8, Time::us(10)},
      {"eth25", LinkKind::kEthernet, 25e9 / 8, Time::us(10)},
      {"eth100", LinkKind::kEthernet, 100e9 / 8, Time::us(10)},
      {"eth400", LinkKind::kEthernet, 400e9 / 8, Time::us(10)},
      {"infiniband", LinkKind::kInfiniBand, 200e9 / 8, Time::us(2)},  // = ib-hdr
      {"ib-hdr", LinkKind::kInfiniBand, 200e9 / 8, Time::us(2)},
      {"ib-ndr", LinkKind::kInfiniBand, 400e9 / 8, Time::us(2)},
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
