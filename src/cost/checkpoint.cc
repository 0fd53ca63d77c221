#include "cost/checkpoint.h"

#include <cmath>
#include <limits>
#include "base/stats.h"

namespace tessera {

namespace {
}

double YoungDalyIntervalS(double checkpoint_cost_s, double mtbf_s) {
  if (std::isinf(mtbf_s)) return kInfinity;
  if (checkpoint_cost_s <= 0 || mtbf_s <= 0) return 0;
  return std::sqrt(2.0 * checkpoint_cost_s * mtbf_s);
}

double GangLossRatePerHour(const std::vector<NodeReclaim>& nodes, double checkpoint_cost_s, bool count_covered) {
  double rate = 0;
  for (const NodeReclaim& n : nodes) {
    if (!(n.rate_per_hour > 0)) continue;
    if (!count_covered && n.notice_s >= checkpoint_cost_s) continue;
    rate += n.rate_per_hour;
  }
  return rate;
}

double YoungDalyIntervalForRateS(double checkpoint_cost_s, double reclaims_per_hour) {
  if (!(reclaims_per_hour > 0)) return kInfinity;
  return YoungDalyIntervalS(checkpoint_cost_s, 3600.0 / reclaims_per_hour);
}

double DalyIntervalS(double checkpoint_cost_s, double mtbf_s) {
  if (std::isinf(mtbf_s)) return kInfinity;
  const double c = checkpoint_cost_s;
  const double m = mtbf_s;
  if (c <= 0 || m <= 0) return 0;
  if (c >= 2 * m) return m;
  return std::sqrt(2 * c * m) * (1 + std::sqrt(c / (2 * m)) / 3 + c / (18 * m)) - c;
}

bool CheckpointsOnNotice(const CheckpointCostModel& m) { return m.notice_s >= m.checkpoint_cost_s; }

double ExpectedLostWorkPerReclaimS(const CheckpointCostModel& m) {
  if (CheckpointsOnNotice(m)) return 0;
  if (std::isinf(m.interval_s)) return m.mtbf_s;
  return m.interval_s / 2;
}

double ExpectedWasteFraction(const CheckpointCostModel& m) {
  double writing = (m.interval_s > 0 && !std::isinf(m.interval_s)) ? m.checkpoint_cost_s / m.interval_s : 0;
  if (m.interval_s <= 0 && m.checkpoint_cost_s > 0) return kInfinity;
  if (std::isinf(m.mtbf_s)) return writing;
  if (m.mtbf_s <= 0) return kInfinity;
  double lost = ExpectedLostWorkPerReclaimS(m);
  if (std::isinf(lost)) return kInfinity;
  // On notice the job also pays one checkpoint write per reclaim.
  double per_reclaim = lost + m.restart_cost_s + (CheckpointsOnNotice(m) ? m.checkpoint_cost_s : 0);
  return writing + per_reclaim / m.mtbf_s;
}

}  // namespace tessera
