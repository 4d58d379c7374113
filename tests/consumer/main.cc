// The example of docs/api.md: a scenario built in code, run, planned and swept through the
// installed library. Exits 1 unless the best plan is at least as fast as the given one.
#include <pipesim/api/pipesim.h>

#include <iostream>

int main() {
  namespace ps = pipesim::api;
  const ps::LoadedScenario s(
      {.cluster = {.gpu = "a100-80gb", .nodes = 1, .gpus_per_node = 8, .intra_node = "nvswitch"},
       .model = {.layers = 8, .hidden = 1024, .heads = 16, .sequence = 1024, .vocab = 50257},
       .training = {.global_batch = 64, .micro_batch = 2, .precision = "bf16"},
       .strategy = {.schedule = "1f1b", .pipeline = 2, .data = 4}});
  const ps::RunResult r = ps::run(s);
  const ps::PlanResult p = ps::plan(s, {.top = 3});
  const ps::RunResult best = ps::run(s.with(p.candidates.front().settings()));
  const ps::SweepResult w = ps::sweep(s, {ps::Axis::parse("training.micro_batch=1..8*2")});
  std::cout << "given " << r.throughput_samples_per_s << " samples/s, planned "
            << best.throughput_samples_per_s << " with " << p.candidates.front().strategy << "\n"
            << w.csv;
  return best.throughput_samples_per_s >= r.throughput_samples_per_s ? 0 : 1;
}
