#pragma once
// Which Tessera job each pod of ours belongs to, and that job's spec: a pod in a PodGroup (the
// coscheduling label scheduling.x-k8s.io/pod-group, Volcano's annotation scheduling.k8s.io/group-name or
// KAI's annotation pod-group-name)
// is a member of one gang job (minMember tasks, from the PodGroup when it is known); any other pod is a job
// of its own. The job's team is the namespace, its priority class the pod's. Pure functions.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "k8s/api/objects.h"
#include "service/workload_json.h"

namespace tessera {

inline constexpr std::string_view kCoschedulingLabel = "scheduling.x-k8s.io/pod-group";
inline constexpr std::string_view kVolcanoGroupAnnotation = "scheduling.k8s.io/group-name";
// KAI-Scheduler's pod-grouper names the pod's PodGroup (scheduling.run.ai/v2alpha2) with this annotation.
inline constexpr std::string_view kKaiGroupAnnotation = "pod-group-name";

// The job a pod belongs to: "pod/NS/NAME" or "podgroup/NS/GROUP".
struct JobKey {
  std::string kind;  // "pod" or "podgroup"
  std::string ns, name;
  std::string str() const { return kind + "/" + ns + "/" + name; }
  bool operator<(const JobKey& o) const { return str() < o.str(); }
  bool operator==(const JobKey& o) const { return str() == o.str(); }
};
// JobKey::str() read back; nullopt unless it is KIND/NS/NAME with a known kind and no empty part.
std::optional<JobKey> ParseJobKey(std::string_view text);

// A job made from pods carries its key in the service's job record: project "KIND/NAMESPACE" (its team is
// the namespace, or the queue the pods name), name the pod's or PodGroup's. Records written before queues
// were read have project "KIND" and the namespace as team; both read back. nullopt: not a job from pods.
std::string ProjectOfKey(const JobKey& key);
std::optional<JobKey> KeyOfJob(const std::string& project, const std::string& team, const std::string& name);

// Whether the pod names `scheduler_name` in spec.schedulerName.
bool PodIsOurs(const nlohmann::json& pod, const std::string& scheduler_name);
// Whether the pod has scheduling gates (spec.schedulingGates, e.g. Kueue's kueue.x-k8s.io/admission): such a
// pod is not ready to be placed until every gate is removed.
bool PodGated(const nlohmann::json& pod);
// Whether the pod waits to be placed: no node, no scheduling gate, not done, not being deleted.
bool PodWaiting(const nlohmann::json& pod);
JobKey JobKeyOf(const nlohmann::json& pod);
// The PodGroup's spec.minMember (coscheduling and Volcano), or -1 when absent or not a number.
int MinMemberOf(const nlohmann::json& pod_group);

// Whether a job's pods may be placed now: the one gang-readiness rule of intake, the DRA path and
// whoever else asks. A single pod is ready alone. A gang is ready once its PodGroup is known (any of the
// three kinds; `group` null: not seen yet, its informer may lag the pods', and a gang placed with the members
// that happen to be there would split it) and at least minMember of its members wait (every waiting member
// when minMember is unset); `tasks` is then minMember (or the waiting count). Otherwise `reason` and
// `message` say why it waits (PodGroupNotFound, GangIncomplete), as the pods' condition tells the user.
struct GangReadiness {
  bool ready = false;
  size_t tasks = 0;
  std::string reason, message;
};
GangReadiness ReadinessOf(const JobKey& key, const nlohmann::json* group, size_t waiting);

// A PodGroup's status from its member pods, as coscheduling and Volcano keep it: `scheduled` (bound, not
// done), `running`, `succeeded`, `failed`, the phase (coscheduling: Pending, Scheduled once minMember are
// bound, Running once minMember run, Finished, Failed; Volcano and KAI: Pending, Running, Completed) and a
// Scheduled condition. `volcano`: Volcano's phases. `now`: an RFC 3339 time for the condition.
nlohmann::json PodGroupStatus(int min_member, const std::vector<nlohmann::json>& members, bool volcano,
                              const std::string& now);

// The job of team `team` the members of one job make (a single pod, or a gang of `tasks` members), typed as
// the loop takes it: whole GPUs per member, or one MIG profile (single pods only), CPU and host memory per
// member (the largest member's). Its body is the JSON the job is stored as, from which a restart reads it
// back (ParseJobSpec gives the same workload). Errors say what Tessera cannot run.
Result<JobSpec> JobSpecFor(const JobKey& key, const std::vector<PodDemand>& members, int tasks,
                           const std::string& priority_class, const std::string& team);

}  // namespace tessera
