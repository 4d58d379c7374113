#include "sim/network.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/units.h"

namespace pipesim {

FlowNetwork::FlowNetwork(const Cluster& cluster, size_t max_flows)
    : flows_(max_flows),
      links_(static_cast<size_t>(cluster.num_links()) * 2),
      flow_mark_(max_flows, 0) {
  for (size_t d = 0; d < links_.size(); ++d) {
    links_[d].capacity = cluster.direction_bandwidth(static_cast<LinkDirection>(d));
  }
}

double FlowNetwork::load(LinkDirection d) const {
  double sum = 0;
  for (uint32_t f : links_[static_cast<size_t>(d)].flows) sum += flows_[f].rate;
  return sum;
}

Time FlowNetwork::finish_time(const Flow& f, Time now) const {
  if (f.remaining <= 0 || std::isinf(f.rate)) return now;
  // Exact integer arithmetic while the flow still has all its (whole) bytes to send.
  if (f.exact && f.remaining < 9e18)
    return now + serialization_time(static_cast<int64_t>(f.remaining), f.rate);
  const long double ps = std::ceil(static_cast<long double>(f.remaining) * 1e12L / f.rate);
  return now + Time::ps(static_cast<int64_t>(std::min<long double>(ps, 9e18L)));
}

void FlowNetwork::add(uint32_t id, const Route& route, int64_t bytes, Time now,
                      std::vector<Update>& changed) {
  Flow& f = flows_[id];
  PIPESIM_ASSERT(!f.active, "a flow starts once");
  f.links.clear();
  for (LinkDirection h : route.hops) {
    if (std::isfinite(links_[static_cast<size_t>(h)].capacity)) f.links.push_back(h);
  }
  f.remaining = static_cast<double>(bytes);
  f.updated = now;
  f.active = true;
  f.exact = true;
  f.rate = std::numeric_limits<double>::infinity();
  if (bytes == 0 || f.links.empty()) {
    f.links.clear();  // it never joins the links' flow lists
    f.finish = now;
    changed.push_back({id, now});
    return;
  }
  for (LinkDirection h : f.links) links_[static_cast<size_t>(h)].flows.push_back(id);
  f.rate = 0;  // marks it as changed in rerate
  rerate(f.links, now, changed);
}

void FlowNetwork::remove(uint32_t id, Time now, std::vector<Update>& changed) {
  Flow& f = flows_[id];
  PIPESIM_ASSERT(f.active, "only active flows end");
  f.active = false;
  f.remaining = 0;
  for (LinkDirection h : f.links) {
    auto& v = links_[static_cast<size_t>(h)].flows;
    v.erase(std::find(v.begin(), v.end(), id));
  }
  if (!f.links.empty()) rerate(f.links, now, changed);
}

// Progressive filling over the component of flows reachable from `seeds` through shared
// links: repeatedly take the link whose remaining capacity per unfrozen flow is smallest,
// fix its unfrozen flows at that share, and take their rate off every link they cross.
void FlowNetwork::rerate(const std::vector<LinkDirection>& seeds, Time now,
                         std::vector<Update>& changed) {
  ++epoch_;
  comp_links_.clear();
  comp_flows_.clear();
  for (LinkDirection s : seeds) {
    if (links_[static_cast<size_t>(s)].mark != epoch_) {
      links_[static_cast<size_t>(s)].mark = epoch_;
      comp_links_.push_back(s);
    }
  }
  for (size_t i = 0; i < comp_links_.size(); ++i) {
    for (uint32_t fid : links_[static_cast<size_t>(comp_links_[i])].flows) {
      if (flow_mark_[fid] == epoch_) continue;
      flow_mark_[fid] = epoch_;
      comp_flows_.push_back(fid);
      for (LinkDirection h : flows_[fid].links) {
        if (links_[static_cast<size_t>(h)].mark != epoch_) {
          links_[static_cast<size_t>(h)].mark = epoch_;
          comp_links_.push_back(h);
        }
      }
    }
  }
  // Bring every flow of the component up to date at the old rates.
  old_rate_.resize(comp_flows_.size());
  for (size_t i = 0; i < comp_flows_.size(); ++i) {
    Flow& f = flows_[comp_flows_[i]];
    const double sent = f.rate * (now - f.updated).seconds();
    if (f.rate > 0 && f.finish <= now) {
      f.remaining = 0;  // its last byte goes through now; no rounding residue
      f.exact = false;
    } else if (sent > 0) {
      f.remaining = std::max(0.0, f.remaining - sent);
      f.exact = false;
    }
    f.updated = now;
    old_rate_[i] = f.rate;
    f.rate = -1;  // unfrozen
  }
  for (LinkDirection l : comp_links_) {
    LinkState& ls = links_[static_cast<size_t>(l)];
    ls.left = ls.capacity;
    ls.unfrozen = static_cast<int>(ls.flows.size());
  }
  size_t frozen = 0;
  while (frozen < comp_flows_.size()) {
    LinkDirection best = -1;
    double best_share = std::numeric_limits<double>::infinity();
    for (LinkDirection l : comp_links_) {
      const LinkState& ls = links_[static_cast<size_t>(l)];
      if (ls.unfrozen == 0) continue;
      const double share = std::max(0.0, ls.left) / ls.unfrozen;
      if (share < best_share) {
        best_share = share;
        best = l;
      }
    }
    PIPESIM_ASSERT(best >= 0, "an unfrozen flow crosses some link of its component");
    for (uint32_t fid : links_[static_cast<size_t>(best)].flows) {
      Flow& f = flows_[fid];
      if (f.rate >= 0) continue;
      f.rate = best_share;
      ++frozen;
      for (LinkDirection h : f.links) {
        LinkState& ls = links_[static_cast<size_t>(h)];
        ls.left -= best_share;
        --ls.unfrozen;
      }
    }
  }
  for (size_t i = 0; i < comp_flows_.size(); ++i) {
    Flow& f = flows_[comp_flows_[i]];
    if (f.rate == old_rate_[i] && f.rate > 0) continue;  // projection unchanged
    PIPESIM_ASSERT(f.rate > 0, "max-min shares are positive");
    f.finish = finish_time(f, now);
    changed.push_back({comp_flows_[i], f.finish});
  }
}

}  // namespace pipesim
