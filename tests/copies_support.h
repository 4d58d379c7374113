// Helpers of the copies tests (copies_test.cc: the engine's fold of a full graph;
// implicit_copies_test.cc: copies left implicit while lowering): scenarios written in code,
// each run two ways and compared.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "sim/engine.h"

namespace pipesim::test {

// A scenario's full graph simulated with the engine's fold off (`full`) and on (`folded`).
struct Pair {
  Timeline full, folded;
};
Pair both(const std::string& yaml);

// The two runs alike to the picosecond: every op's start and end, every link's and
// device's figures, the out-of-memory device.
void expect_identical(const Timeline& a, const Timeline& b);

// A GPT-like model of `layers` generated layers on `nodes` x 8 H100s.
std::string scenario(int nodes, const std::string& inter, const std::string& strategy,
                     int layers = 8, const std::string& extra_cluster = "",
                     const std::string& gpu = "h100-80gb");

// The reports of a scenario with copies left implicit (folded_task_graph) and of its full
// graph.
struct Reports {
  nlohmann::json implicit, full;
  int built = 0, copies = 0;
  // The implicit run's timeline read through Timeline::device and Timeline::link (its own
  // tables hold the built devices and the orbits alone) against the full run's.
  size_t devices_differ = 0, links_differ = 0, link_directions = 0, full_directions = 0;
};
// `fold_full`: the full graph's copies folded by the engine (the run before copies were left
// implicit), else every copy simulated.
Reports reports(const std::string& yaml, bool fold_full = false);

// Checks that the run with copies left implicit reports what the full run reports, device
// by device and link by link; whether any copy was left implicit.
bool expect_agrees(const Reports& r);

// Servers' inter-node ports drawn at random: one port a server, or one a GPU.
std::string random_ports(std::mt19937& rng, int per_node);

// A layout drawn at random over servers of 4 or 8 GPUs: pipeline 1 or 2, tensor 1 or 2,
// data 4 or 8 (drawn in that order).
struct ServerLayout {
  int per_node, pipeline, tensor, data;
};
ServerLayout random_server_layout(std::mt19937& rng);

// `gpus` H100s, up to `per_node` a server, joined by `inter`; an 8-layer transformer of
// hidden 512 (`model` adds its sequence and other keys) at micro-batch 1.
std::string small_run(int gpus, const std::string& inter, const std::string& model,
                      int64_t global_batch, const std::string& strategy, int per_node = 8);

}  // namespace pipesim::test
