#include "sched/fair_share.h"

#include <algorithm>

namespace tessera {

std::vector<int64_t> WaterFill(int64_t share, const std::vector<FairShareClaim>& claims) {
  const size_t n = claims.size();
  std::vector<int64_t> out(n, 0), cap(n, 0);
  int64_t want_guar = 0;
  for (size_t i = 0; i < n; ++i) {
    const FairShareClaim& c = claims[i];
    cap[i] = std::max<int64_t>(0, c.limit >= 0 ? std::min(c.demand, c.limit) : c.demand);
    want_guar += std::min(cap[i], std::max<int64_t>(0, c.guaranteed));
  }
  if (share <= 0) return out;
  // 1. Guarantees (scaled down proportionally when they overcommit the share).
  int64_t left = share;
  for (size_t i = 0; i < n; ++i) {
    int64_t g = std::min(cap[i], std::max<int64_t>(0, claims[i].guaranteed));
    if (want_guar > share) g = static_cast<int64_t>(static_cast<__int128>(g) * share / want_guar);
    out[i] = g;
    left -= g;
  }
  // 2. Over-quota by weight, capped by demand and limit.
  for (int round = 0; round < 64 && left > 0; ++round) {
    int64_t total_w = 0;
    for (size_t i = 0; i < n; ++i)
      if (out[i] < cap[i]) total_w += std::max(0, claims[i].weight);
    if (total_w == 0) break;
    int64_t given = 0;
    for (size_t i = 0; i < n; ++i) {
      if (out[i] >= cap[i] || claims[i].weight <= 0) continue;
      int64_t g = static_cast<int64_t>(static_cast<__int128>(left) * claims[i].weight / total_w);
      g = std::min(g, cap[i] - out[i]);
      out[i] += g;
      given += g;
    }
    if (given == 0) {  // rounding: hand out the remainder one unit at a time, in index order
      for (size_t i = 0; i < n && left - given > 0; ++i)
        if (out[i] < cap[i] && claims[i].weight > 0) {
          ++out[i];
          ++given;
        }
      if (given == 0) break;
    }
    left -= given;
  }
  return out;
}

std::vector<int64_t> TreeFairShares(const std::vector<int>& parent, const std::vector<FairShareClaim>& claims,
                                    int64_t capacity) {
  const int n = static_cast<int>(parent.size());
  std::vector<std::vector<int>> children(n + 1);  // index n = the cluster
  for (int i = 0; i < n; ++i) children[parent[i] < 0 ? n : parent[i]].push_back(i);
  std::vector<int64_t> fair(n, 0);
  std::vector<std::pair<int, int64_t>> stack{{n, capacity}};
  while (!stack.empty()) {
    auto [node, share] = stack.back();
    stack.pop_back();
    const std::vector<int>& ch = children[node];
    if (ch.empty()) continue;
    std::vector<FairShareClaim> cl;
    cl.reserve(ch.size());
    for (int c : ch) cl.push_back(claims[c]);
    std::vector<int64_t> got = WaterFill(share, cl);
    for (size_t k = 0; k < ch.size(); ++k) {
      fair[ch[k]] = got[k];
      stack.push_back({ch[k], got[k]});
    }
  }
  return fair;
}

double BlendedShare(double dominant_share, double historical_share, double history_weight) {
  const double w = std::clamp(history_weight, 0.0, 1.0);
  return (1.0 - w) * dominant_share + w * historical_share;
}

double FairShareKey(double blended_share, int64_t fair_share_milli, int64_t capacity_milli) {
  const double ent = capacity_milli > 0 ? static_cast<double>(fair_share_milli) / capacity_milli : 0.0;
  return blended_share / std::max(ent, 1e-9);
}

}  // namespace tessera
