// The loop's policy asked about one task of a job it does not run (service.h RankNodes): which of some
// nodes it fits on as the allocation is now, and in which order the policy would choose among them. Run on
// a copy of the loop's state, outside the driver's lock; nothing is applied.
#include <map>
#include <memory>

#include "sched/policy.h"
#include "service/job_room.h"
#include "service/service_driver.h"

namespace tessera {
namespace {

// `request` allowed on the nodes `allowed` marks only.
Request Within(Request request, std::vector<bool> allowed) {
  request.nodes = std::make_shared<const std::vector<bool>>(std::move(allowed));
  return request;
}

}  // namespace

Outcome<std::vector<NodeRank>> JobRoom::RankNodes(const Caller& c, const JobSpec& spec,
                                                  const std::vector<std::string>& names, int ranked) const {
  if (c.role != Role::kAdmin)
    return ApiError{ErrorCode::kPermissionDenied, "", "only an admin asks for node fits"};
  std::unique_ptr<ClusterState> state;
  Request request;
  {
    std::lock_guard<std::mutex> lock(d_->mu_);
    std::string priority_class;  // the team's queue does not matter to where a task fits
    auto r = BuildRequestLocked(spec, spec.workload.team, /*id=*/0, /*queue=*/nullptr, &priority_class);
    if (!r.ok()) return r.error();
    request = std::move(r).value();
    state = std::make_unique<ClusterState>(d_->loop_->state());
  }
  request.tasks = 1;  // one pod: one task
  std::map<std::string, NodeId> ids;
  for (NodeId n = 0; n < state->num_nodes(); ++n) ids.emplace(state->cluster().nodes[n].name, n);
  const Policy& policy = *d_->policy_;
  std::vector<NodeRank> out;
  std::map<NodeId, size_t> fitting;      // node -> its first entry in `out`
  std::map<NodeId, PlaceResult> judged;  // each node judged once, however often it is named
  for (const std::string& name : names) {
    NodeRank f{name, false, -1, ""};
    auto id = ids.find(name);
    if (id == ids.end()) {
      f.reason = "not a node of Tessera's cluster (no GPU Tessera can model there)";
    } else {
      auto r = judged.find(id->second);
      if (r == judged.end()) {
        std::vector<bool> only(state->num_nodes(), false);
        only[id->second] = true;
        r = judged.emplace(id->second, PlaceWithin(policy, *state, Within(request, std::move(only)))).first;
      }
      f.fits = r->second.ok;
      if (!f.fits)
        f.reason = r->second.reason;
      else
        fitting.emplace(id->second, out.size());  // at its first entry only
    }
    out.push_back(std::move(f));
  }
  std::vector<bool> left(state->num_nodes(), false);
  for (const auto& [n, i] : fitting) left[n] = true;
  for (int rank = 0; rank < ranked && !fitting.empty(); ++rank) {
    const PlaceResult r = PlaceWithin(policy, *state, Within(request, left));
    if (!r.ok || r.tasks.empty()) break;
    auto chosen = fitting.find(r.tasks.front().node);
    if (chosen == fitting.end()) break;  // the policy holds to the nodes allowed: never expected
    out[chosen->second].rank = rank;
    left[chosen->first] = false;
    fitting.erase(chosen);
  }
  return out;
}

}  // namespace tessera
