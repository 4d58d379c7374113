// Runs the embedded default scenario through the installed library and prints its makespan;
// exits 1 unless it is positive.
#include <pipesim/api/pipesim.h>

#include <iostream>

int main() {
  const nlohmann::ordered_json report = pipesim::run_report("");
  const double makespan = report["makespan_s"].get<double>();
  std::cout << report["scenario"].get<std::string>() << " makespan_s " << makespan << "\n";
  return makespan > 0 ? 0 : 1;
}
