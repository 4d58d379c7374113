#include "planner/candidate_io.h"

#include <cstdint>
#include <vector>

namespace pipesim {

// CBOR keeps every double exact, so each rank ranks the same numbers.
std::string save_candidate(const std::optional<Candidate>& c) {
  if (!c) return {};
  nlohmann::ordered_json j;
  j["strategy"] = c->strategy;
  j["micro_batch"] = c->micro_batch ? nlohmann::ordered_json(*c->micro_batch) : nullptr;
  j["estimate_s"] = c->estimate_s;
  j["estimated_memory"] = c->estimated_memory;
  j["makespan_s"] = c->makespan_s;
  j["iteration_s"] = c->iteration_s;
  j["throughput"] = c->throughput;
  j["peak_memory"] = c->peak_memory;
  j["oom"] = c->oom;
  j["tight"] = c->tight;
  j["why"] = c->why;
  j["goodput"] = c->goodput ? nlohmann::ordered_json(*c->goodput) : nullptr;
  const std::vector<uint8_t> bytes = nlohmann::ordered_json::to_cbor(j);
  return std::string(bytes.begin(), bytes.end());
}

std::optional<Candidate> load_candidate(std::string_view bytes, const planner::PlanPoint& point) {
  if (bytes.empty()) return std::nullopt;
  const auto j = nlohmann::ordered_json::from_cbor(bytes.begin(), bytes.end());
  Candidate c;
  c.point = point;
  c.strategy = j.at("strategy");
  if (!j.at("micro_batch").is_null()) c.micro_batch = j["micro_batch"].get<int64_t>();
  c.estimate_s = j.at("estimate_s").get<double>();
  c.estimated_memory = j.at("estimated_memory").get<int64_t>();
  c.makespan_s = j.at("makespan_s").get<double>();
  c.iteration_s = j.at("iteration_s").get<double>();
  c.throughput = j.at("throughput").get<double>();
  c.peak_memory = j.at("peak_memory").get<int64_t>();
  c.oom = j.at("oom").get<bool>();
  c.tight = j.at("tight").get<bool>();
  c.why = j.at("why").get<std::string>();
  if (!j.at("goodput").is_null()) c.goodput = j["goodput"].get<double>();
  return c;
}

}  // namespace pipesim
