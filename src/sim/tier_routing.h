#pragma once
// Tier routing (issue 5): a Policy wrapper that tries a request on capacity tiers in preference order and
// returns the first placement the inner policy finds. The inner policy decides where inside a tier; this
// wrapper only narrows Request::tier_mask (never widens a mask the request already carries).
//   latency-sensitive (every non-training class): reserved or owned only (then on-demand when allowed: the
//   on-demand-only cost baseline);
//   checkpointable training: spot, then reserved/owned (idle capacity), then on-demand;
//   other training: reserved/owned, then on-demand (then spot when allowed).
// A gang is placed within one tier group. Pure: no state beyond the per-job routing classes.

#include <cstdint>
#include <string_view>
#include <vector>

#include "sched/policy.h"

namespace tessera {

inline constexpr uint8_t kStableTiers = TierBit(Tier::kReserved) | TierBit(Tier::kOwned);

enum class RouteClass : uint8_t { kLatencySensitive, kCheckpointable, kOther };

// Tier masks to try, in order, for a routing class.
std::vector<uint8_t> TierPreference(RouteClass c, bool non_checkpointable_on_spot,
                                    bool latency_sensitive_on_demand = false);

class TierRoutingPolicy : public Policy {
 public:
  // `route_of_job[id]` is the class of engine request id `id` (the simulator's job index); ids outside
  // the table are treated as latency-sensitive (the safe choice).
  TierRoutingPolicy(const Policy& inner, std::vector<RouteClass> route_of_job, bool non_checkpointable_on_spot,
                    bool latency_sensitive_on_demand = false);
  std::string_view name() const override { return inner_.name(); }
  PlaceResult Place(const ClusterState& snapshot, const Request& request) const override;

 private:
  const Policy& inner_;
  std::vector<RouteClass> route_of_job_;
  std::vector<std::vector<uint8_t>> prefs_;  // by RouteClass
};

}  // namespace tessera
