// Helpers of the copies tests (tests/copies_support.h).
#include "tests/copies_support.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "scenario/setup.h"
#include "sim/report.h"

namespace pipesim::test {

Pair both(const std::string& yaml) {
  const Scenario sc = load_scenario_text(yaml, "copies.yaml");
  const TaskGraph g = scenario_task_graph(sc, true);
  SimOptions off;
  off.fold = false;
  return {simulate(g, sc.cluster, off), simulate(g, sc.cluster)};
}

void expect_identical(const Timeline& a, const Timeline& b) {
  EXPECT_EQ(a.makespan, b.makespan);
  ASSERT_EQ(a.start.size(), b.start.size());
  size_t wrong = 0;
  for (size_t i = 0; i < a.start.size(); ++i)
    wrong += a.start[i] != b.start[i] || a.end[i] != b.end[i];
  EXPECT_EQ(wrong, 0u) << "ops at another time";
  ASSERT_EQ(a.links.size(), b.links.size());
  for (size_t l = 0; l < a.links.size(); ++l) {
    EXPECT_EQ(a.links[l].bytes, b.links[l].bytes) << "link " << l;
    EXPECT_EQ(a.links[l].busy, b.links[l].busy) << "link " << l;
    EXPECT_EQ(a.links[l].peak_flows, b.links[l].peak_flows) << "link " << l;
  }
  ASSERT_EQ(a.devices.size(), b.devices.size());
  for (size_t d = 0; d < a.devices.size(); ++d) {
    EXPECT_EQ(a.devices[d].busy, b.devices[d].busy) << "device " << d;
    EXPECT_EQ(a.devices[d].peak_memory, b.devices[d].peak_memory) << "device " << d;
    EXPECT_EQ(a.devices[d].peak_time, b.devices[d].peak_time) << "device " << d;
    EXPECT_EQ(a.devices[d].at_peak, b.devices[d].at_peak) << "device " << d;
    EXPECT_EQ(a.devices[d].ops, b.devices[d].ops) << "device " << d;
  }
  EXPECT_EQ(a.oom.oom, b.oom.oom);
  EXPECT_EQ(a.oom.device, b.oom.device);
  EXPECT_EQ(a.oom.op, b.oom.op);
  EXPECT_EQ(a.oom.time, b.oom.time);
  EXPECT_EQ(a.oom.bytes, b.oom.bytes);
}

std::string scenario(int nodes, const std::string& inter, const std::string& strategy, int layers,
                     const std::string& extra_cluster, const std::string& gpu) {
  return fmt::format(R"(cluster:
  gpu: {gpu}
  nodes: {nodes}
  gpus_per_node: 8
  intra_node: nvswitch
  inter_node: {inter}
{extra}model: {{generator: transformer, layers: {layers}, hidden: 1024, heads: 16, sequence: 1024, vocab: 32000}}
training: {{global_batch: 64, micro_batch: 1}}
strategy: {strategy}
)",
                     fmt::arg("gpu", gpu), fmt::arg("nodes", nodes), fmt::arg("inter", inter),
                     fmt::arg("extra", extra_cluster), fmt::arg("layers", layers),
                     fmt::arg("strategy", strategy));
}

Reports reports(const std::string& yaml, bool fold_full) {
  const Scenario sc = load_scenario_text(yaml, "copies.yaml");
  const RunInfo info = run_info(sc, 0.0);
  const TaskGraph folded = folded_task_graph(sc);
  const TaskGraph full = scenario_task_graph(sc, true);
  SimOptions off;
  off.fold = fold_full;
  Reports r;
  const Timeline a = simulate(folded, sc.cluster), b = simulate(full, sc.cluster, off);
  r.implicit = nlohmann::json::parse(to_json(make_report(folded, sc.cluster, a, info)));
  r.full = nlohmann::json::parse(to_json(make_report(full, sc.cluster, b, info)));
  for (int d = 0; d < sc.cluster.num_devices(); ++d) {
    const DeviceStats &x = a.device(d), &y = b.device(d);
    r.devices_differ += x.busy != y.busy || x.peak_memory != y.peak_memory ||
                        x.peak_time != y.peak_time || x.at_peak != y.at_peak;
  }
  r.link_directions = a.num_link_directions();
  r.full_directions = b.num_link_directions();
  for (size_t l = 0; l < std::min(r.link_directions, r.full_directions); ++l) {
    const LinkStats x = a.link(static_cast<LinkDirection>(l)),
                    y = b.link(static_cast<LinkDirection>(l));
    r.links_differ += x.bytes != y.bytes || x.busy != y.busy || x.peak_flows != y.peak_flows;
  }
  r.implicit.erase("events");
  r.full.erase("events");
  r.built = folded.built_copies();
  r.copies = folded.copies();
  return r;
}

bool expect_agrees(const Reports& r) {
  EXPECT_EQ(r.implicit, r.full);
  EXPECT_EQ(r.devices_differ, 0u);
  EXPECT_EQ(r.links_differ, 0u);
  return r.built < r.copies;
}

ServerLayout random_server_layout(std::mt19937& rng) {
  ServerLayout l{};
  l.per_node = 4 << (rng() % 2);
  l.pipeline = 1 << (rng() % 2);
  l.tensor = 1 << (rng() % 2);
  l.data = 4 << (rng() % 2);
  return l;
}

std::string random_ports(std::mt19937& rng, int per_node) {
  return rng() % 2 ? "ib-ndr" : fmt::format("{{preset: ib-ndr, nics: {}}}", per_node);
}

std::string small_run(int gpus, const std::string& inter, const std::string& model,
                      int64_t global_batch, const std::string& strategy, int per_node) {
  return fmt::format(R"(cluster:
  gpu: h100-80gb
  nodes: {}
  gpus_per_node: {}
  intra_node: nvswitch
  inter_node: {}
model: {{generator: transformer, layers: 8, hidden: 512, heads: 8, vocab: 8000, {}}}
training: {{global_batch: {}, micro_batch: 1}}
strategy: {}
)",
                     std::max(1, gpus / per_node), std::min(gpus, per_node), inter, model,
                     global_batch, strategy);
}

}  // namespace pipesim::test
