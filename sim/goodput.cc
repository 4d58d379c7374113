#include "sim/goodput.h"

#include <algorithm>
#include <cmath>

namespace pipesim {

double daly_goodput(double tau_s, double checkpoint_s, double restart_s, double mtbf_s) {
  if (!(tau_s > 0) || !(mtbf_s > 0)) return 0;
  // expm1 keeps the precision where (tau + delta) / M is tiny (a rare failure).
  const double wall =
      mtbf_s * std::exp(restart_s / mtbf_s) * std::expm1((tau_s + checkpoint_s) / mtbf_s);
  if (!std::isfinite(wall) || wall <= 0) return 0;
  return std::clamp(tau_s / wall, 0.0, 1.0);
}

double optimal_checkpoint_interval(double checkpoint_s, double restart_s, double mtbf_s) {
  // The goodput is unimodal in tau: rising while checkpoints dominate, falling once lost
  // work does. Golden-section search on log(tau).
  double lo = std::log(1e-3), hi = std::log(std::max(1e-2, 100 * mtbf_s));
  const double phi = (std::sqrt(5.0) - 1) / 2;
  const auto f = [&](double x) {
    return daly_goodput(std::exp(x), checkpoint_s, restart_s, mtbf_s);
  };
  double a = hi - phi * (hi - lo), b = lo + phi * (hi - lo);
  double fa = f(a), fb = f(b);
  for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
    if (fa < fb) {
      lo = a;
      a = b;
      fa = fb;
      b = lo + phi * (hi - lo);
      fb = f(b);
    } else {
      hi = b;
      b = a;
      fb = fa;
      a = hi - phi * (hi - lo);
      fa = f(a);
    }
  }
  return std::exp((lo + hi) / 2);
}

Goodput goodput(const FailureModel& f) {
  Goodput g;
  const double M = f.cluster_mtbf_s;
  g.checkpoint_every_optimal_s = optimal_checkpoint_interval(f.checkpoint_s, f.restart_s, M);
  g.goodput_at_optimal = daly_goodput(g.checkpoint_every_optimal_s, f.checkpoint_s, f.restart_s, M);
  g.checkpoint_every_s = f.checkpoint_every_s.value_or(g.checkpoint_every_optimal_s);
  g.goodput = daly_goodput(g.checkpoint_every_s, f.checkpoint_s, f.restart_s, M);
  constexpr double kDay = 86400;
  g.failures_per_day = M > 0 ? kDay / M : 0;
  g.lost_hours_per_day = 24 * (1 - g.goodput);
  // Wall time splits into progress, checkpoint writes (delta per tau of progress) and the
  // rest, which failures cost.
  g.checkpoint_hours_per_day =
      std::min(g.lost_hours_per_day, 24 * g.goodput * f.checkpoint_s / g.checkpoint_every_s);
  g.failure_hours_per_day = g.lost_hours_per_day - g.checkpoint_hours_per_day;
  return g;
}

}  // namespace pipesim
