#pragma once
// The Kubernetes objects of a job submitted through Tessera's API, CLI or portal with a `container`
// (image, command, args, env): they live in the namespace the scheduler's team mapping gives the job's team
// (team_namespaces.h; a team without one gets none, and its job is refused), carry
// schedulerName and the labels that tie them to the job (tessera.io/job-id, tessera.io/replica), and ask for
// what the job asks per task (nvidia.com/gpu, or nvidia.com/mig-<profile> for a MIG job; CPU and memory).
//
//   - a training gang (more than one worker): a coscheduling PodGroup `tessera-<id>` (minMember = workers)
//     and its pods `tessera-<id>-<i>`, one gang of the control loop;
//   - anything else: one pod `tessera-<id>-<r>` per replica, each the run of one of the loop's replicas.
//
// A job's state follows its pods (the backend binds, evicts and sees them end). Pure functions.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "k8s/pod_jobs.h"
#include "k8s/team_namespaces.h"

namespace tessera {

struct JobRecord;

inline constexpr std::string_view kJobIdLabel = "tessera.io/job-id";
inline constexpr std::string_view kReplicaLabel = "tessera.io/replica";

struct JobObjects {
  std::string ns;
  std::optional<nlohmann::json> pod_group;  // the gang's PodGroup (scheduling.x-k8s.io/v1alpha1)
  std::vector<nlohmann::json> pods;         // in order: worker i or replica r
  std::vector<JobKey> keys;                 // the key each loop replica binds through (one for a gang)
};

// Whether the job carries a container (only such jobs become objects).
bool HasContainer(const JobRecord& job);
// The objects, in the namespace `namespaces` maps the job's team to; `priority_class` is set on the pods
// when not empty (a PriorityClass of that name exists). Errors say what Kubernetes cannot run (a team with
// no namespace, a fractional GPU without a MIG profile, a spec that no longer parses).
Result<JobObjects> ObjectsForJob(const JobRecord& job, const std::string& scheduler_name,
                                 const std::string& priority_class, const TeamNamespaces& namespaces);
// The keys ObjectsForJob gives (JobObjects::keys) without making the objects: errors as it does, but for a
// resource Kubernetes cannot express.
Result<std::vector<JobKey>> ApiJobKeys(const JobRecord& job, const TeamNamespaces& namespaces);
// The job id a pod's label names, or -1.
int64_t JobIdOfPod(const nlohmann::json& pod);

}  // namespace tessera
