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

// A private copy of the loop's allocation with every node closed (cordoned) but those opened for a call of
// the policy: each node is judged alone, and the ranks taken, at the cost of the nodes opened, not of every
// node of the cluster per call (as PlaceWithin's mask would).
class Closed {
 public:
  explicit Closed(std::unique_ptr<ClusterState> state) : state_(std::move(state)) {
    open_.assign(state_->num_nodes(), false);
    for (NodeId n = 0; n < state_->num_nodes(); ++n)
      open_[n] = !state_->node_cordoned(n) && state_->CordonNode(n).ok();
  }
  const ClusterState& state() const { return *state_; }
  // Whether node n was open in the loop's allocation (a cordoned node takes nothing).
  bool WasOpen(NodeId n) const { return open_[n]; }
  // The policy's placement of `request` with only `nodes` open (each open in the loop's allocation).
  PlaceResult PlaceOn(const Policy& policy, const Request& request, const std::vector<NodeId>& nodes) {
    for (NodeId n : nodes) (void)state_->UncordonNode(n);
    PlaceResult r = policy.Place(*state_, request);
    for (NodeId n : nodes) (void)state_->CordonNode(n);
    return r;
  }

 private:
  std::unique_ptr<ClusterState> state_;
  std::vector<bool> open_;
};

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
  request.nodes = nullptr;  // the nodes asked about are the ones open
  Closed closed(std::move(state));
  const ClusterState& s = closed.state();
  std::map<std::string, NodeId> ids;
  for (NodeId n = 0; n < s.num_nodes(); ++n) ids.emplace(s.cluster().nodes[n].name, n);
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
        PlaceResult res = closed.WasOpen(id->second)
                              ? closed.PlaceOn(policy, request, {id->second})
                              : PlaceResult::NoFit(NoFitCode::kResources, "cordoned in Tessera's cluster");
        r = judged.emplace(id->second, std::move(res)).first;
      }
      f.fits = r->second.ok;
      if (!f.fits)
        f.reason = r->second.reason;
      else
        fitting.emplace(id->second, out.size());  // at its first entry only
    }
    out.push_back(std::move(f));
  }
  std::vector<NodeId> left;
  for (const auto& [n, i] : fitting) left.push_back(n);
  for (int rank = 0; rank < ranked && !fitting.empty(); ++rank) {
    const PlaceResult r = closed.PlaceOn(policy, request, left);
    if (!r.ok || r.tasks.empty()) break;
    auto chosen = fitting.find(r.tasks.front().node);
    if (chosen == fitting.end()) break;  // the policy holds to the nodes open: never expected
    out[chosen->second].rank = rank;
    std::erase(left, chosen->first);
    fitting.erase(chosen);
  }
  return out;
}

}  // namespace tessera
