#pragma once
// Fair share over a queue tree: who deserves how much of the cluster this cycle, and in which order queues
// are served. Pure functions; units are GPU thousandths (see cycle.h).
//
// Water-filling (per tree node, top-down from the cluster capacity):
//  1. each child first gets min(demand, limit, guaranteed) (guarantees scaled down if they overcommit);
//  2. what is left goes to children whose demand is unmet, in proportion to over-quota weight, each capped
//     by min(demand, limit); repeated until nothing is left or every child is satisfied.
// Demand of a subtree is what it holds plus what its pending jobs ask for, so idle capacity is shared only
// among queues that can use it (KAI-Scheduler's "fair share" and Kueue's borrowing follow the same idea).

#include <cstdint>
#include <vector>

namespace tessera {

struct FairShareClaim {
  int64_t guaranteed = 0;
  int64_t limit = -1;  // -1 = none
  int weight = 1;
  int64_t demand = 0;
};

// Splits `share` among `claims`; the result has one entry per claim, sums to at most `share`.
std::vector<int64_t> WaterFill(int64_t share, const std::vector<FairShareClaim>& claims);

// Fair share of every node of a tree. parent[i] = -1 for roots (children of the cluster); claims[i] holds
// the node's own guaranteed / limit / weight and its subtree demand. REQUIRES: parent links form a forest.
std::vector<int64_t> TreeFairShares(const std::vector<int>& parent, const std::vector<FairShareClaim>& claims,
                                    int64_t capacity);

// Blend of the current dominant share and the historical usage share (both fractions of the cluster):
// (1 - history_weight) * current + history_weight * historical.
double BlendedShare(double dominant_share, double historical_share, double history_weight);

// Ordering key of a queue: blended share divided by its entitlement (fair share / capacity); lower goes first.
double FairShareKey(double blended_share, int64_t fair_share_milli, int64_t capacity_milli);

}  // namespace tessera
