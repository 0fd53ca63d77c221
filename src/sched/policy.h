#pragma once
// Policy: a pure placement decision. Place(snapshot, request) returns where the request's tasks go, or
// why they cannot go anywhere. Policies never mutate the snapshot; any memo cache a policy keeps must not
// change a decision (results depend only on the snapshot and the request).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sched/cluster_state.h"
#include "sched/placement.h"
#include "sched/request.h"

namespace tessera {

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  virtual PlaceResult Place(const ClusterState& snapshot, const Request& request) const = 0;
};

// Policy names: "k8s-default", "bestfit", "fgd", "tessera", "static-mig", "random" (seeded).
std::vector<std::string> PolicyNames();
Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name);

}  // namespace tessera
