// A measured profile (model: {profile: F}) in its graph form, read on its own and then as
// the model of a small scenario that is simulated and reported.
#include <sstream>

#include "fuzz/harness.h"
#include "scenario/internal/sections.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  pipesim::fuzz::expect_result_or_input_error([&] {
    std::istringstream in(text);
    const pipesim::Model m = pipesim::internal::read_profile_graph(in, "fuzz.profile");
    if (m.layers.size() < 2 || m.layers.size() > 64) return;
    // The same text through the loader, as a profile file next to a scenario.
    pipesim::fuzz::with_profile_file(text, [](const std::string& path) {
      pipesim::fuzz::simulate_and_report(pipesim::load_scenario_text(
          "cluster: {gpu: v100-32gb, nodes: 1, gpus_per_node: 2, intra_node: nvlink}\n"
          "model: {profile: " +
              path +
              "}\n"
              "training: {global_batch: 4, micro_batch: 2}\n"
              "strategy: {schedule: dapple, pipeline: 2}\n",
          "fuzz.yaml"));
    });
  });
  return 0;
}
