#pragma once
// ApiJobRoom: jobs submitted through Tessera's API, CLI or portal with a container, a room of K8sScheduler
// (scheduler.h). Each becomes a PodGroup and pods in its team's namespace (job_objects.h), created while the
// job is active and its pods are missing, deleted when it is cancelled; the loop places it like a pod's job
// and the backend binds the pods made here. Tessera never creates namespaces: a job waits until its team's
// exists.
//
// Threads: Sync on the scheduler's loop thread; Keys, KeysOf and KeysFor on any (mu_ guards keys_).

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "k8s/job_objects.h"
#include "k8s/pod_jobs.h"
#include "k8s/team_namespaces.h"
#include "service/service.h"

namespace tessera {

class K8sScheduler;

class ApiJobRoom {
 public:
  explicit ApiJobRoom(K8sScheduler* scheduler);

  // Every active API job with a container has its objects; those of jobs no longer active are forgotten
  // (deleted when the job was cancelled; a finished job's pods stay, as a Job's do).
  void Sync();
  // Job id -> the key each of its loop replicas binds through, for the jobs whose objects were made.
  std::map<int64_t, std::vector<JobKey>> Keys() const;
  std::vector<JobKey> KeysOf(int64_t id) const;
  // The key each loop replica of `job` binds through (ServiceConfig::external_keys; any thread; those already
  // made as they were made): a job from pods, its pod's or PodGroup's; an API job, its pods' (none when it
  // has no container or its team no namespace).
  std::vector<std::string> KeysFor(const JobRecord& job) const;

 private:
  void Materialize(const JobRecord& job);
  void Forget(int64_t id, bool cancelled);
  bool EnsureNamespace(const std::string& ns);
  // The explicit --team-namespaces mapping; without one, a team's own namespace when it may hold API jobs
  // (not default, kube-* or the scheduler's own).
  TeamNamespaces TeamNamespacesFor(const std::string& team) const;

  K8sScheduler* const s_;
  // Loop thread.
  std::map<int64_t, JobObjects> jobs_;           // active API jobs with a container, by id
  std::set<std::string> namespaces_;             // namespaces known to exist
  std::set<std::string> missing_namespaces_;     // namespaces found missing (logged once)
  std::set<int64_t> without_container_;          // API jobs that run nowhere but in the loop
  mutable std::mutex mu_;                        // guards keys_ (the backend's and filters' threads read it)
  std::map<int64_t, std::vector<JobKey>> keys_;  // job id -> the key of each of its loop replicas
};

}  // namespace tessera
