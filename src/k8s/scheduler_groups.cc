// PodGroup status (scheduler.h): written from the member pods, as coscheduling and Volcano keep it.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "k8s/cluster_view.h"
#include "k8s/events.h"
#include "k8s/scheduler.h"

namespace tessera {

using json = nlohmann::json;

void K8sScheduler::BindCompanions(const std::vector<json>& members) {
  std::set<std::string> gang_nodes;
  std::vector<const json*> companions;
  for (const json& p : members) {
    if (!PodNode(p).empty() && !PodTerminal(p)) gang_nodes.insert(PodNode(p));
    if (PodWaiting(p) && !PodAsksGpu(p)) companions.push_back(&p);
  }
  if (companions.empty() || gang_nodes.empty()) return;
  if (!world_) world_ = std::make_unique<FilterWorld>(MakeFilterWorld());
  for (const json* p : companions) {
    const std::set<std::string> pass = world_->Passing(*p);
    if (pass.empty()) continue;  // its reason comes with the next refusal pass
    // Beside the gang when a node of it passes, else the first that does.
    std::string node = *pass.begin();
    for (const std::string& n : gang_nodes)
      if (pass.count(n)) node = n;
    const PodRef ref{Meta(*p, "namespace"), Meta(*p, "name"), Meta(*p, "uid")};
    if (!AdmitBinding(ref, node).empty()) continue;
    const json binding = BindingObject(ref.ns, ref.name, ref.uid, node);
    const ApiResponse r = api_.Post(fmt::format("/api/v1/namespaces/{}/pods/{}/binding", ref.ns, ref.name), binding);
    if (!r.ok()) {
      ForgetBinding(ref);
      Log(fmt::format("binding companion {}/{} to {} failed ({} {})", ref.ns, ref.name, node, r.status, r.error));
      continue;
    }
    world_->Assume(*p, node);
    Log(fmt::format("companion {}/{} (no GPU) bound beside its gang on {}", ref.ns, ref.name, node));
  }
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
