// `--set KEY=VALUE` options, one per line, applied to the default scenario, then the whole
// run as in fuzz_scenario.
#include <sstream>

#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  pipesim::fuzz::expect_result_or_input_error([&] {
    std::vector<pipesim::Override> overrides;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line) && overrides.size() < 8;)
      overrides.push_back(pipesim::parse_override(line));
    pipesim::fuzz::simulate_and_report(pipesim::load_default_scenario(overrides));
  });
  return 0;
}
