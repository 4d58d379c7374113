// What every fuzz target does with a loaded scenario: validate, build, simulate and run
// every report writer, as `pipesim run --json --trace --csv --memory-csv` does. Bad input
// must be an InputError; anything else escaping (an InternalError, a crash, a sanitizer
// report, a hang) is a finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <string>

#include "core/counting_buf.h"
#include "core/error.h"
#include "scenario/scenario.h"
#include "scenario/setup.h"
#include "scenario/work_estimate.h"
#include "sim/engine.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace pipesim::fuzz {

// Small enough to simulate many times a second; larger inputs exercise only the loader.
inline constexpr double kMaxFuzzOps = 20'000;

inline void simulate_and_report(const Scenario& sc) {
  const WorkEstimate w = estimate_work(sc);
  if (w.ops() > kMaxFuzzOps || w.devices > 256) return;
  const TaskGraph graph = scenario_task_graph(sc);
  SimOptions opts;
  opts.record_memory = true;
  opts.record_links = true;
  const Timeline tl = simulate(graph, sc.cluster, opts);
  const Report report = make_report(graph, sc.cluster, tl, run_info(sc, 0.0));
  CountingBuf buf;
  std::ostream out(&buf);
  out << to_json(report) << summary_table(report);
  write_trace(out, graph, sc.cluster, tl);
  write_csv(out, graph, sc.cluster, tl);
  write_memory_csv(out, graph, sc.cluster, tl);
}

// Writes `text` to a temporary file, runs f(path) and removes the file.
template <typename F>
void with_profile_file(const std::string& text, F&& f) {
  char path[] = "/tmp/pipesim-fuzz-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  struct Remove {
    const char* p;
    ~Remove() { ::unlink(p); }
  } remove{path};
  if (ok) f(std::string(path));
}

// Runs f; an InputError is the expected answer to bad input, and must be one line.
template <typename F>
void expect_result_or_input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    if (e.message().empty() || e.message().find('\n') != std::string::npos) __builtin_trap();
  }
}

// A profile in one of its forms: read on its own by `read` (istream, file name -> Model),
// then, when it makes a small model, as the model of a two-stage scenario that is
// simulated and reported.
template <typename Read>
void fuzz_profile(const uint8_t* data, size_t size, Read&& read) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  expect_result_or_input_error([&] {
    std::istringstream in(text);
    const Model m = read(in, "fuzz.profile");
    if (m.layers.size() < 2 || m.layers.size() > 64) return;
    with_profile_file(text, [](const std::string& path) {
      simulate_and_report(load_scenario_text(
          "cluster: {gpu: v100-32gb, nodes: 1, gpus_per_node: 2, intra_node: nvlink}\n"
          "model: {profile: " +
              path +
              "}\n"
              "training: {global_batch: 4, micro_batch: 2}\n"
              "strategy: {schedule: dapple, pipeline: 2}\n",
          "fuzz.yaml"));
    });
  });
}

}  // namespace pipesim::fuzz
