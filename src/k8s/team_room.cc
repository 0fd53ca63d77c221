// TeamRoom (team_room.h): the teams of the Service that pods' jobs go to, Volcano and KAI Queues among them.
#include "k8s/team_room.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "k8s/scheduler.h"

namespace tessera {

using json = nlohmann::json;

TeamRoom::TeamRoom(K8sScheduler* scheduler) : s_(scheduler) {}

void TeamRoom::Load() {
  for (const TeamView& t : s_->service_->Teams(s_->admin_)) known_.insert(t.name);
}

void TeamRoom::Ensure(const std::string& name) {
  if (known_.count(name)) return;
  TeamRow row;
  row.name = name;
  auto t = s_->service_->CreateTeam(s_->admin_, row);
  if (t.ok() || t.error().code == ErrorCode::kAlreadyExists) known_.insert(name);
}

void TeamRoom::Sync() {
  std::map<std::string, std::string> errors;
  queues_ = ReadQueues(s_->volcano_queues_->Objects(), s_->kai_queues_->Objects(), &errors);
  for (const auto& [name, q] : queues_)
    if (!QueueNameFitsTeam(name))
      errors[name] = fmt::format("queue '{}': a Tessera team name is 1-63 of a-z, 0-9, '-', '_'", name);
  for (const auto& [name, message] : errors) {
    auto was = queue_errors_.find(name);
    if (was == queue_errors_.end() || was->second != message) s_->Log("queue " + name + ": " + message);
  }
  queue_errors_ = std::move(errors);
  if (queues_.empty()) return;  // no Queue kind served, or none listed
  std::map<std::string, TeamView> teams;
  for (TeamView& t : s_->service_->Teams(s_->admin_)) teams[t.name] = std::move(t);
  for (const auto& [name, q] : queues_) {
    if (queue_errors_.count(name) || !q.leaf) continue;
    Service::TeamChange change;
    change.guaranteed_milli = q.guaranteed_milli;
    change.limit_milli = q.limit_milli;
    change.over_quota_weight = q.over_quota_weight;
    auto now = teams.find(name);
    if (now == teams.end()) {
      TeamRow row;
      row.name = name;
      row.guaranteed_milli = q.guaranteed_milli;
      row.limit_milli = q.limit_milli;
      row.over_quota_weight = q.over_quota_weight;
      auto t = s_->service_->CreateTeam(s_->admin_, row);
      if (!t.ok() && t.error().code != ErrorCode::kAlreadyExists)
        s_->Log("queue " + name + ": " + t.error().message);
      known_.insert(name);
      continue;
    }
    if (now->second.guaranteed_milli == q.guaranteed_milli && now->second.limit_milli == q.limit_milli &&
        now->second.over_quota_weight == q.over_quota_weight)
      continue;
    auto t = s_->service_->UpdateTeam(s_->admin_, name, change);
    s_->Log(t.ok()
                ? fmt::format(
                      "queue {}: {} GPUs guaranteed, limit {}, weight {}", name, q.guaranteed_milli / 1000.0,
                      q.limit_milli < 0 ? std::string("none") : fmt::format("{}", q.limit_milli / 1000.0),
                      q.over_quota_weight)
                : "queue " + name + ": " + t.error().message);
  }
}

std::string TeamRoom::TeamOf(const JobKey& key, const json& pod, const json* group, std::string* reason,
                             std::string* why) {
  const std::string queue = QueueOfPod(pod, group);
  if (queue.empty()) return key.ns;
  if (auto bad = queue_errors_.find(queue); bad != queue_errors_.end()) {
    *reason = "InvalidQueue";
    *why = fmt::format("tessera: queue '{}' cannot be used: {}", queue, bad->second);
    return "";
  }
  auto it = queues_.find(queue);
  if (it == queues_.end()) {
    *reason = "QueueNotFound";
    *why = fmt::format(
        "tessera: queue '{}' does not exist (scheduling.volcano.sh/v1beta1 or scheduling.run.ai/v2 "
        "Queue); the pods wait for it",
        queue);
    return "";
  }
  if (!it->second.leaf) {
    *reason = "QueueNotLeaf";
    *why = fmt::format("tessera: queue '{}' is a parent queue; only leaf queues take jobs", queue);
    return "";
  }
  return queue;
}

}  // namespace tessera
