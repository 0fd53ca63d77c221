#include "k8s/preemption.h"

#include "k8s/api/objects.h"
#include "k8s/cluster_view.h"

namespace tessera {

using json = nlohmann::json;

json EvictionFor(const std::string& ns, const std::string& name, const std::string& uid) {
  return {{"apiVersion", "policy/v1"},
          {"kind", "Eviction"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"deleteOptions", {{"preconditions", {{"uid", uid}}}}}};
}

json DisruptionTargetPatch(const std::string& message, const std::string& now) {
  return {{"status",
           {{"conditions",
             {{{"type", "DisruptionTarget"}, {"status", "True"}, {"reason", "PreemptionByScheduler"},
               {"message", message}, {"lastTransitionTime", now}}}}}}};
}

json NominatedNodePatch(const std::string& node) {
  return {{"status", {{"nominatedNodeName", node.empty() ? json(nullptr) : json(node)}}}};
}

std::string NominatedNode(const json& pod) {
  const json* st = Field(pod, "status");
  return st != nullptr ? StringField(*st, "nominatedNodeName") : "";
}

PodEnd PodEndOf(const json& pod) {
  const json* st = Field(pod, "status");
  const std::string phase = st != nullptr ? StringField(*st, "phase") : "";
  bool disrupted = false;
  const json* conditions = st != nullptr ? Field(*st, "conditions") : nullptr;
  if (conditions != nullptr && conditions->is_array())
    for (const json& c : *conditions)
      disrupted |= StringField(c, "type") == "DisruptionTarget" && StringField(c, "status") == "True";
  if (phase == "Succeeded") return PodEnd::kDone;
  if (phase == "Failed") return disrupted ? PodEnd::kDisrupted : PodEnd::kFailed;  // killed by the eviction
  const json* meta = Field(pod, "metadata");
  if (meta == nullptr || Field(*meta, "deletionTimestamp") == nullptr) return PodEnd::kRunning;
  return disrupted ? PodEnd::kDisrupted : PodEnd::kDeleted;
}

}  // namespace tessera
