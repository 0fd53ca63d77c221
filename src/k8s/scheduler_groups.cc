// PodGroup status (scheduler.h): written from the member pods, as coscheduling and Volcano keep it.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "k8s/api/events.h"
#include "k8s/cluster_view.h"
#include "k8s/scheduler.h"

namespace tessera {

using json = nlohmann::json;

void K8sScheduler::BindCompanions(const PodRefs& members) {
  std::set<std::string> gang_nodes;
  std::vector<const json*> companions;
  for (const json& p : members) {
    if (!PodNode(p).empty() && !PodTerminal(p)) gang_nodes.insert(PodNode(p));
    if (PodWaiting(p) && !PodAsksGpu(p)) companions.push_back(&p);
  }
  if (companions.empty() || gang_nodes.empty()) return;
  FilterWorld& world = filters_->PassWorld();
  for (const json* p : companions) {
    const std::set<std::string> pass = world.Passing(*p);
    if (pass.empty()) continue;  // its reason comes with the next refusal pass
    // Beside the gang when a node of it passes, else the first that does.
    std::string node = *pass.begin();
    for (const std::string& n : gang_nodes)
      if (pass.count(n)) node = n;
    if (BindOutsideLoop(*p, node)) Log(fmt::format("companion {}/{} (no GPU) bound beside its gang on {}",
                                                  Meta(*p, "namespace"), Meta(*p, "name"), node));
  }
}

void K8sScheduler::BindCpuOnly(const json& pod) {
  FilterWorld& world = filters_->PassWorld();
  std::map<std::string, int> rejected;
  const std::set<std::string> pass = world.Passing(pod, &rejected);
  if (pass.empty()) return SetReason(pod, "Unschedulable", UnschedulableMessage(world.num_nodes(), rejected));
  // A node without GPUs first (GPU nodes keep their CPU and memory for GPU work), else the first that passes.
  std::set<std::string> gpu_nodes;
  if (auto views = service_->ListNodes(admin_); views.ok())
    for (const NodeView& v : views.value()) gpu_nodes.insert(v.name);
  std::string node = *pass.begin();
  for (auto it = pass.rbegin(); it != pass.rend(); ++it)
    if (!gpu_nodes.count(*it)) node = *it;
  if (BindOutsideLoop(pod, node))
    Log(fmt::format("pod {}/{} (no GPU: not a job of the loop) bound to {}", Meta(pod, "namespace"), Meta(pod, "name"),
                    node));
}

bool K8sScheduler::BindOutsideLoop(const json& pod, const std::string& node) {
  const PodRef ref{Meta(pod, "namespace"), Meta(pod, "name"), Meta(pod, "uid")};
  if (!filters_->Admit(ref, node).empty()) return false;  // judged again on the next pass
  const json binding = BindingObject(ref.ns, ref.name, ref.uid, node);
  const ApiResponse r = api_.Post(fmt::format("/api/v1/namespaces/{}/pods/{}/binding", ref.ns, ref.name), binding);
  if (!r.ok()) {
    filters_->Forget(ref);
    Log(fmt::format("binding pod {}/{} to {} failed ({} {})", ref.ns, ref.name, node, r.status, r.error));
    return false;
  }
  filters_->PassWorld().Assume(pod, node);
  if (events_) events_->Record(pod, "Normal", "Scheduled", fmt::format("Successfully assigned {}/{} to {}", ref.ns, ref.name, node));
  return true;
}

void K8sScheduler::SyncGroupStatus() {
  struct Kind {
    Informer* informer;
    const char* api;  // group/version
    bool volcano;
  };
  const Kind kinds[] = {{groups_.get(), "scheduling.x-k8s.io/v1alpha1", false},
                        {volcano_groups_.get(), "scheduling.volcano.sh/v1beta1", true},
                        {kai_groups_.get(), "scheduling.run.ai/v2alpha2", true}};
  for (const Kind& k : kinds) {
    for (const auto& [id, group] : k.informer->Objects()) {
      const JobKey key{"podgroup", Meta(group, "namespace"), Meta(group, "name")};
      const std::vector<json> members = PodsOf(key);
      if (members.empty()) continue;
      json status = PodGroupStatus(MinMemberOf(group), members, k.volcano, Rfc3339Now());
      json compare = status;
      compare["conditions"][0].erase("lastTransitionTime");
      const std::string cache_key = fmt::format("{}/{}", k.api, key.str());
      auto was = group_status_.find(cache_key);
      if (was != group_status_.end() && was->second == compare) continue;
      const ApiResponse r =
          api_.Patch(fmt::format("/apis/{}/namespaces/{}/podgroups/{}/status", k.api, key.ns, key.name),
                     json{{"status", status}}, "application/merge-patch+json");
      if (r.ok()) group_status_[cache_key] = compare;
      else if (was == group_status_.end() || r.status != 404)
        Log(fmt::format("PodGroup {}/{}: writing its status failed ({} {})", key.ns, key.name, r.status, r.error));
    }
  }
}

}  // namespace tessera
