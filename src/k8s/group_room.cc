// GroupRoom (group_room.h): PodGroups (their gangs' readiness and the status written from their members)
// and the pods of ours bound outside the loop (a gang's CPU-only companions, lone CPU-only pods).
#include "k8s/group_room.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "k8s/api/events.h"
#include "k8s/cluster_view.h"
#include "k8s/scheduler.h"

namespace tessera {

using json = nlohmann::json;

GroupRoom::GroupRoom(K8sScheduler* scheduler) : s_(scheduler) {}

bool GroupRoom::GangBound(const std::string& key, const ObjectMap& members) const {
  int bound_gpu = 0, companions = 0;
  for (const auto& [name, p] : members) {
    const bool gpu = PodAsksGpu(p);
    companions += !gpu;
    bound_gpu += gpu && !PodNode(p).empty() && !PodTerminal(p);
  }
  int min_member = -1;
  const std::string ns_name = key.substr(std::string("podgroup/").size());
  const size_t slash = ns_name.find('/');
  if (slash != std::string::npos)
    if (auto group = PodGroupOf({"podgroup", ns_name.substr(0, slash), ns_name.substr(slash + 1)}))
      min_member = MinMemberOf(*group);
  return bound_gpu > 0 && bound_gpu >= std::max(1, min_member - companions);
}

std::optional<json> GroupRoom::PodGroupOf(const JobKey& key) const {
  for (Informer* g : {s_->groups_.get(), s_->volcano_groups_.get(), s_->kai_groups_.get()}) {
    const auto groups = g->Objects();
    if (auto it = groups.find(key.ns + "/" + key.name); it != groups.end()) return it->second;
  }
  return std::nullopt;
}

void GroupRoom::BindCompanions(const std::vector<std::reference_wrapper<const json>>& members) {
  std::set<std::string> gang_nodes;
  std::vector<const json*> companions;
  for (const json& p : members) {
    if (!PodNode(p).empty() && !PodTerminal(p)) gang_nodes.insert(PodNode(p));
    if (PodWaiting(p) && !PodAsksGpu(p)) companions.push_back(&p);
  }
  if (companions.empty() || gang_nodes.empty()) return;
  FilterWorld& world = s_->filters_->PassWorld();
  for (const json* p : companions) {
    const std::set<std::string> pass = world.Passing(*p);
    if (pass.empty()) continue;  // its reason comes with the next refusal pass
    // Beside the gang when a node of it passes, else the first that does.
    std::string node = *pass.begin();
    for (const std::string& n : gang_nodes)
      if (pass.count(n)) node = n;
    if (BindOutsideLoop(*p, node))
      s_->Log(fmt::format("companion {}/{} (no GPU) bound beside its gang on {}", Meta(*p, "namespace"),
                          Meta(*p, "name"), node));
  }
}

void GroupRoom::BindCpuOnly(const json& pod) {
  FilterWorld& world = s_->filters_->PassWorld();
  std::map<std::string, int> rejected;
  const std::set<std::string> pass = world.Passing(pod, &rejected);
  if (pass.empty())
    return s_->SetReason(pod, "Unschedulable", UnschedulableMessage(world.num_nodes(), rejected));
  // A node without GPUs first (GPU nodes keep their CPU and memory for GPU work), else the first that passes.
  std::set<std::string> gpu_nodes;
  if (auto views = s_->service_->ListNodes(s_->admin_); views.ok())
    for (const NodeView& v : views.value()) gpu_nodes.insert(v.name);
  std::string node = *pass.begin();
  for (auto it = pass.rbegin(); it != pass.rend(); ++it)
    if (!gpu_nodes.count(*it)) node = *it;
  if (BindOutsideLoop(pod, node))
    s_->Log(fmt::format("pod {}/{} (no GPU: not a job of the loop) bound to {}", Meta(pod, "namespace"),
                        Meta(pod, "name"), node));
}

bool GroupRoom::BindOutsideLoop(const json& pod, const std::string& node) {
  const PodRef ref{Meta(pod, "namespace"), Meta(pod, "name"), Meta(pod, "uid")};
  if (!s_->filters_->Admit(ref, node).empty()) return false;  // judged again on the next pass
  const json binding = BindingObject(ref.ns, ref.name, ref.uid, node);
  const ApiResponse r =
      s_->api_.Post(fmt::format("/api/v1/namespaces/{}/pods/{}/binding", ref.ns, ref.name), binding);
  if (!r.ok()) {
    s_->filters_->Forget(ref);
    s_->Log(fmt::format("binding pod {}/{} to {} failed ({} {})", ref.ns, ref.name, node, r.status, r.error));
    return false;
  }
  s_->filters_->PassWorld().Assume(pod, node);
  if (s_->events_)
    s_->events_->Record(pod, "Normal", "Scheduled",
                        fmt::format("Successfully assigned {}/{} to {}", ref.ns, ref.name, node));
  return true;
}

void GroupRoom::SyncStatus() {
  struct Kind {
    Informer* informer;
    const char* api;  // group/version
    bool volcano;
  };
  const Kind kinds[] = {{s_->groups_.get(), "scheduling.x-k8s.io/v1alpha1", false},
                        {s_->volcano_groups_.get(), "scheduling.volcano.sh/v1beta1", true},
                        {s_->kai_groups_.get(), "scheduling.run.ai/v2alpha2", true}};
  for (const Kind& k : kinds) {
    for (const auto& [id, group] : k.informer->Objects()) {
      const JobKey key{"podgroup", Meta(group, "namespace"), Meta(group, "name")};
      const std::vector<json> members = s_->PodsOf(key);
      if (members.empty()) continue;
      json status = PodGroupStatus(MinMemberOf(group), members, k.volcano, Rfc3339Now());
      json compare = status;
      compare["conditions"][0].erase("lastTransitionTime");
      const std::string cache_key = fmt::format("{}/{}", k.api, key.str());
      auto was = status_.find(cache_key);
      if (was != status_.end() && was->second == compare) continue;
      const ApiResponse r =
          s_->api_.Patch(fmt::format("/apis/{}/namespaces/{}/podgroups/{}/status", k.api, key.ns, key.name),
                         json{{"status", status}}, "application/merge-patch+json");
      if (r.ok())
        status_[cache_key] = compare;
      else if (was == status_.end() || r.status != 404)
        s_->Log(fmt::format("PodGroup {}/{}: writing its status failed ({} {})", key.ns, key.name, r.status,
                            r.error));
    }
  }
}

}  // namespace tessera
