#pragma once
// Which Tessera job each pod of ours belongs to, and that job's spec: a pod in a PodGroup (the
// coscheduling label scheduling.x-k8s.io/pod-group, or Volcano's annotation scheduling.k8s.io/group-name)
// is a member of one gang job (minMember tasks, from the PodGroup when it is known); any other pod is a job
// of its own. The job's team is the namespace, its priority class the pod's. Pure functions.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "k8s/objects.h"

namespace tessera {

inline constexpr std::string_view kCoschedulingLabel = "scheduling.x-k8s.io/pod-group";
inline constexpr std::string_view kVolcanoGroupAnnotation = "scheduling.k8s.io/group-name";

// The job a pod belongs to: "pod/NS/NAME" or "podgroup/NS/GROUP".
struct JobKey {
  std::string kind;  // "pod" or "podgroup"
  std::string ns, name;
  std::string str() const { return kind + "/" + ns + "/" + name; }
  bool operator<(const JobKey& o) const { return str() < o.str(); }
  bool operator==(const JobKey& o) const { return str() == o.str(); }
};

// Whether the pod names `scheduler_name` in spec.schedulerName.
bool PodIsOurs(const nlohmann::json& pod, const std::string& scheduler_name);
// Whether the pod waits to be placed: no node, not done, not being deleted.
bool PodWaiting(const nlohmann::json& pod);
JobKey JobKeyOf(const nlohmann::json& pod);
// The PodGroup's spec.minMember (coscheduling and Volcano), or -1 when absent or not a number.
int MinMemberOf(const nlohmann::json& pod_group);

// The service's job spec (the JSON a submission takes) for the members of one job (a single pod, or a
// gang of `tasks` members): whole GPUs per member, or one MIG profile (single pods only), CPU and host
// memory per member (the largest member's). Errors say what Tessera cannot run.
Result<nlohmann::json> JobSpecFor(const JobKey& key, const std::vector<PodDemand>& members, int tasks,
                                  const std::string& priority_class);

}  // namespace tessera
