// The CUDA backend on a GPU: exit 77 (skipped) where there is none. Runs a small pipeline
// through validate and checks what must hold on any GPU: every op ran after its deps, the
// arena peaks equal the simulator's, and replay is within 10 % of the measured makespan
// (the H100 targets themselves are measured by the sweep, docs/backends.md).
#include <cstdio>

#include "backend/validate.h"
#include "backend/work.h"
#include "cuda/cuda_executor.h"
#include "scenario/setup.h"
#include "support.h"

int main() {
  using namespace pipesim;
  if (!cuda_device_present()) {
    std::puts("no CUDA device: skipped");
    return 77;
  }
  test::PipeSpec p;
  p.stages = 2;
  p.micro_batches = 4;
  p.tf_ms = {1.0};
  p.tb_ms = {2.0};
  p.output = "4 MiB";
  p.bandwidth = "10 GB/s";
  const Scenario s = load_scenario_text(test::to_yaml(p), "<gpu test>");
  const std::unique_ptr<Executor> e = make_cuda_executor(s);
  const TaskGraph g = scenario_task_graph(s);
  const Measurement m = e->run(g, op_work(s, g));
  int failures = 0;
  for (OpId id = 0; id < g.size(); ++id) {
    for (OpId d : g.deps(id)) {
      if (m.start[id] < m.end[d]) {
        std::printf("%s started before %s ended\n", g.describe(id).c_str(), g.describe(d).c_str());
        ++failures;
      }
    }
  }
  ValidateOptions options;
  options.calibrate = true;
  const Validation v = validate(s, *e, options);
  std::printf("%s", validation_table(v).c_str());
  if (!v.peaks_equal) ++failures;
  // Plain streams share every SM, so only green contexts can be held to replay.
  if (v.timing_faithful && v.replay_error > 0.10) ++failures;
  if (!v.timing_faithful) std::puts("not timing-faithful: replay not checked");
  return failures == 0 ? 0 : 1;
}
