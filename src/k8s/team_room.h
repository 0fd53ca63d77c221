#pragma once
// TeamRoom: the Service's teams that pods' jobs go to, a room of K8sScheduler (scheduler.h). A job's team is
// the Volcano or KAI Queue its first pod names (through its PodGroup or its own labels), else its namespace;
// each leaf Queue is a team whose guarantee, limit and over-quota weight follow the Queue (queues.h); a team
// is created the first time a job goes to it. A Queue that cannot be a team (its name, a parent queue, a
// field that does not read) is logged once per change and its pods are told why they wait.
//
// Threads: the scheduler's loop thread (and StartService before the loop starts).

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "k8s/pod_jobs.h"
#include "k8s/queues.h"

namespace tessera {

class K8sScheduler;

class TeamRoom {
 public:
  explicit TeamRoom(K8sScheduler* scheduler);

  // The teams the Service has (after a restart).
  void Load();
  // The Queues as teams: created, and their quota and weight followed.
  void Sync();
  // The job's team: the queue `pod` names (through `group` or its own labels), else the key's namespace;
  // empty with `reason` and `why` set when the named queue cannot take it.
  std::string TeamOf(const JobKey& key, const nlohmann::json& pod, const nlohmann::json* group,
                     std::string* reason, std::string* why);
  // Creates team `name` unless it exists.
  void Ensure(const std::string& name);

 private:
  K8sScheduler* const s_;
  std::set<std::string> known_;                      // teams known to exist
  std::map<std::string, QueueQuota> queues_;         // the queues as last read (name -> quota)
  std::map<std::string, std::string> queue_errors_;  // queue -> the error last logged for it
};

}  // namespace tessera
