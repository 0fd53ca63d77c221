#include "sched/step_time.h"

#include <algorithm>
#include <cmath>

namespace tessera {

double NetworkBusbw(const FabricParams& p, int nodes) {
  const auto& t = p.network_busbw_by_nodes;
  if (t.empty()) return p.nvswitch_busbw_gbs;
  if (nodes <= t.front().first) return t.front().second;
  if (nodes >= t.back().first) return t.back().second;
  for (size_t i = 1; i < t.size(); ++i) {
    if (nodes > t[i].first) continue;
    const double x0 = std::log(static_cast<double>(t[i - 1].first)), x1 = std::log(static_cast<double>(t[i].first));
    const double w = (std::log(static_cast<double>(nodes)) - x0) / (x1 - x0);
    return t[i - 1].second + w * (t[i].second - t[i - 1].second);
  }
  return t.back().second;
}

double GangBusbw(const FabricParams& p, const GangLayout& l) {
  if (l.gpus <= 1) return 0;
  if (l.span == Span::kOneGpu || l.span == Span::kOneNode || l.gpus_per_node.size() <= 1) {
    switch (l.interconnect) {
      case Interconnect::kNvSwitch: return p.nvswitch_busbw_gbs;
      case Interconnect::kNvLinkPairs: return l.gpus <= 2 ? p.nvlink_pair_busbw_gbs : p.pcie_busbw_gbs;
      case Interconnect::kPcie: return p.pcie_busbw_gbs;
    }
  }
  const int nodes = static_cast<int>(l.gpus_per_node.size());
  int min_per_node = *std::min_element(l.gpus_per_node.begin(), l.gpus_per_node.end());
  min_per_node = std::max(1, min_per_node);
  const double injection_gbs = min_per_node * l.nic_gbps_per_gpu / 8.0;
  double bw = std::min(NetworkBusbw(p, nodes), p.injection_factor * injection_gbs);
  if (l.span == Span::kOneSpine) bw /= std::max(1.0, p.leaf_oversubscription);
  if (l.span == Span::kCrossSpine)
    bw /= std::max(1.0, p.leaf_oversubscription) * std::max(1.0, p.cross_spine_oversubscription);
  return bw;
}

double AllReduceSeconds(double bytes, int n, double busbw_gbs) {
  if (n <= 1 || busbw_gbs <= 0) return 0;
  return bytes * 2.0 * (n - 1) / n / (busbw_gbs * 1e9);
}

StepTime ComputeStepTime(const FabricParams& p, const GangLayout& l, double grad_bytes, double compute_s) {
  StepTime st;
  st.compute_s = compute_s;
  st.busbw_gbs = GangBusbw(p, l);
  st.allreduce_s = AllReduceSeconds(grad_bytes, l.gpus, st.busbw_gbs);
  const double hidden = std::clamp(p.overlap, 0.0, 1.0) * compute_s;
  st.step_s = compute_s + std::max(0.0, st.allreduce_s - hidden);
  return st;
}

}  // namespace tessera
