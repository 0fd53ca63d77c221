#include "sim/tier_routing.h"

namespace tessera {

std::vector<uint8_t> TierPreference(RouteClass c, bool non_checkpointable_on_spot, bool latency_sensitive_on_demand) {
  const uint8_t spot = TierBit(Tier::kSpot), od = TierBit(Tier::kOnDemand);
  switch (c) {
    case RouteClass::kLatencySensitive:
      if (latency_sensitive_on_demand) return {kStableTiers, od};
      return {kStableTiers};
    case RouteClass::kCheckpointable:
      return {spot, kStableTiers, od};
    case RouteClass::kOther:
      if (non_checkpointable_on_spot) return {kStableTiers, od, spot};
      return {kStableTiers, od};
  }
  return {kStableTiers};
}

TierRoutingPolicy::TierRoutingPolicy(const Policy& inner, std::vector<RouteClass> route_of_job,
                                     bool non_checkpointable_on_spot, bool latency_sensitive_on_demand)
    : inner_(inner), route_of_job_(std::move(route_of_job)) {
  for (RouteClass c : {RouteClass::kLatencySensitive, RouteClass::kCheckpointable, RouteClass::kOther})
    prefs_.push_back(TierPreference(c, non_checkpointable_on_spot, latency_sensitive_on_demand));
}

PlaceResult TierRoutingPolicy::Place(const ClusterState& snapshot, const Request& request) const {
  const RouteClass c = request.id >= 0 && static_cast<size_t>(request.id) < route_of_job_.size()
                           ? route_of_job_[static_cast<size_t>(request.id)]
                           : RouteClass::kLatencySensitive;
  PlaceResult last = PlaceResult::NoFit(NoFitCode::kRequestExceedsCluster, "no capacity tier allowed");
  for (uint8_t mask : prefs_[static_cast<size_t>(c)]) {
    Request q = request;
    q.tier_mask = request.tier_mask == 0 ? mask : static_cast<uint8_t>(request.tier_mask & mask);
    if (q.tier_mask == 0) continue;
    PlaceResult r = inner_.Place(snapshot, q);
    if (r.ok) return r;
    last = std::move(r);
  }
  return last;
}

}  // namespace tessera
