// The scenario loader's section readers, each in its own file: cluster_reader.cc,
// model_reader.cc (with profile_readers.cc for measured profiles), training_reader.cc,
// strategy_reader.cc and overrides.cc. Not part of the public interface.
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "scenario/internal/reader.h"
#include "scenario/scenario.h"

namespace pipesim::internal {

Cluster read_cluster(const Reader& r, const YAML::Node& n);
// Warnings on what the cluster section leaves to defaults a user may not mean.
std::vector<std::string> cluster_warnings(const YAML::Node& n, const Cluster& c);

// The model section in any of its forms; `nested` for a model read from another file,
// which may not include a third.
Model read_model_section(const Reader& r, const YAML::Node& n, const Training& t,
                         const GpuSpec& gpu, bool nested);
// Measured per-layer costs: a CSV table, or PipeDream's profile graph.
Model read_profile_csv(std::istream& in, const std::string& file);
// Whether the text's first line is a CSV profile header (names a known column).
bool is_profile_csv(const std::string& text);
// `matrix_flops`, when given, receives per layer the forward FLOPs of a Conv2d or Linear
// node worked out from its description and output size (0 for other nodes).
Model read_profile_graph(std::istream& in, const std::string& file,
                         std::vector<double>* matrix_flops = nullptr);

Training read_training(const Reader& r, const YAML::Node& n);
// training.optimizer_step, when given, is spread over the layers in proportion to their
// parameters; a generated model otherwise gets the memory-bound update time,
// params x optimizer_bytes_per_param / HBM bandwidth, per layer.
void set_optimizer_step(Model& m, const Training& t, const GpuSpec& gpu);

// Reads strategy (with training for error locations) into sc: stages, micro-batches,
// order and placement. Needs sc.cluster, sc.model and sc.training.
void read_strategy(const Reader& r, const YAML::Node& n, const YAML::Node& training, Scenario& sc);

class Locator;
// The strategy's checks on values (strategy_check.cc) against sc's model, training and
// cluster; then sc.micro_batches and sc.placement from `gpus`. Errors point where `at` says.
void check_strategy(Scenario& sc, const StrategyPlacement& gpus, const Locator& at);
// strategy.order against strategy.offload_layers (after read_order).
void check_order_offload(const Scenario& sc, const Locator& at);

// Walks `root` along a dotted path, creating mappings for missing keys, and puts `value`
// at its end. A scalar met on the way (a preset name) becomes {preset: name}.
void apply_override(YAML::Node& root, const Override& o);

}  // namespace pipesim::internal
