// The scheduler's node filters (filter_room.h, filters.h): which nodes each pending job may go to, judged on
// the informer cache of nodes and bound pods (any scheduler's) and the bindings not yet seen there.
#include "k8s/filter_room.h"

#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "k8s/cluster_view.h"
#include "k8s/dra/dra_binder.h"
#include "k8s/scheduler.h"

namespace tessera {

using json = nlohmann::json;

namespace {

// Pods are judged once per distinct signature: namespace, requests and the spec fields the filters read
// (node selector, affinity, tolerations, topology spread, host ports: the API server's default tolerations
// make nearly every pod carry some), and labels when they can change a verdict (some counted pod's
// anti-affinity, or the pod's own spread or pod affinity terms selecting pods like it). Pods with claims are
// judged one by one ("" = no signature).
std::string FilterSignature(const json& pod, bool labels_matter) {
  if (PodUsesDra(pod)) return "";
  const json* spec = Field(pod, "spec");
  auto requests =
      spec != nullptr ? PodResources(*spec) : Result<std::map<std::string, int64_t>>(Status::Error(""));
  if (!requests.ok()) return "";
  std::string sig = Meta(pod, "namespace");
  for (const auto& [r, v] : *requests) sig += fmt::format("|{}={}", r, v);
  bool own_terms = false;
  for (const char* k : {"nodeSelector", "affinity", "tolerations", "topologySpreadConstraints", "containers",
                        "initContainers"}) {
    const json* f = Field(*spec, k);
    if (f == nullptr) continue;
    if (std::string_view(k).ends_with("ontainers")) {  // their host ports only
      for (const json& c : *f)
        if (const json* ports = c.is_object() ? Field(c, "ports") : nullptr; ports != nullptr)
          sig += "|ports=" + ports->dump();
      continue;
    }
    sig += fmt::format("|{}={}", k, f->dump());
    own_terms |=
        std::string_view(k) == "topologySpreadConstraints" ||
        (std::string_view(k) == "affinity" && (f->contains("podAffinity") || f->contains("podAntiAffinity")));
  }
  const json* meta = Field(pod, "metadata");
  const json* labels = meta != nullptr ? Field(*meta, "labels") : nullptr;
  if (labels != nullptr && (labels_matter || own_terms)) sig += "|labels=" + labels->dump();
  return sig;
}

}  // namespace

FilterRoom::FilterRoom(K8sScheduler* scheduler) : s_(scheduler) {}

FilterWorld& FilterRoom::PassWorld() {
  if (!world_) world_ = std::make_unique<FilterWorld>(MakeWorld(&world_cache_));
  return *world_;
}

void FilterRoom::RefreshPassWorld(int64_t now_us) {
  if (now_us - world_us_ <= kPassWorldUs) return;
  world_.reset();
  world_us_ = now_us;
}

const std::string* FilterRoom::UnschedulableOf(const std::string& key) const {
  auto it = unschedulable_.find(key);
  return it == unschedulable_.end() ? nullptr : &it->second;
}

std::optional<size_t> FilterRoom::PassingOf(const std::string& key) const {
  auto it = passing_.find(key);
  return it == passing_.end() ? std::nullopt : std::optional<size_t>(it->second);
}

FilterWorld FilterRoom::MakeWorld(FilterCache* cache) const {
  const auto pods_snap = s_->pods_->Snapshot();
  const auto& pods = *pods_snap;
  FilterWorld world(*s_->nodes_->Snapshot(), pods, cache);
  std::lock_guard<std::mutex> l(assumed_mu_);
  for (const auto& [uid, entry] : assumed_) world.Assume(entry.first, entry.second);
  return world;
}

std::string FilterRoom::NoNodeMessage(const json& pod) {
  std::map<std::string, int> rejected;
  if (!PassWorld().Passing(pod, &rejected).empty()) return "";
  return UnschedulableMessage(world_->num_nodes(), rejected);
}

void FilterRoom::Sync() {
  {  // bindings the cache now shows (or pods gone) need no assuming
    std::lock_guard<std::mutex> l(assumed_mu_);
    for (auto it = assumed_.begin(); it != assumed_.end();) {
      const json& pod = it->second.first;
      const ObjectMap::Ptr now = s_->pods_->Get(Meta(pod, "namespace") + "/" + Meta(pod, "name"));
      const bool settled = now == nullptr || Meta(*now, "uid") != it->first || !PodNode(*now).empty();
      it = settled ? assumed_.erase(it) : std::next(it);
    }
  }
  // One world for up to kPassWorldUs (Reconcile keeps it): building it reads every pod. Our own bindings
  // since are the Service's model's to count; pods others bound meanwhile are seen at the next one.
  const FilterWorld& world = PassWorld();
  std::map<int64_t, Service::NodeNames> masks;
  std::map<std::string, std::pair<Service::NodeNames, std::string>> by_signature;
  std::map<std::string, std::string> unschedulable;
  std::map<std::string, size_t> passing;
  std::map<std::set<std::string>, Service::NodeNames> interned;
  auto judge = [&](const std::string& key, const json& pod) -> Service::NodeNames {
    const std::string sig = FilterSignature(pod, world.LabelsMatter());
    if (auto it = by_signature.find(sig); !sig.empty() && it != by_signature.end()) {
      if (!it->second.second.empty()) unschedulable[key] = it->second.second;
      passing[key] = it->second.first->size();  // (an upper bound; the message is what counts)
      return it->second.first;
    }
    // The job may go where the pod passes, or would once the loop frees (preempts) what it holds there.
    std::map<std::string, int> rejected;
    std::set<std::string> allowed;
    std::set<std::string> pass = world.Passing(pod, &rejected, &allowed);
    if (PodUsesDra(pod)) {  // only DRA nodes with whole GPUs, and the node its allocated claims name
      const DraJobDemand* d = s_->dra_->DemandOf(Meta(pod, "uid"));
      const std::string fixed = d != nullptr ? d->node : "";
      auto off = [&](const std::string& n) {
        return !s_->dra_->loop_nodes().count(n) || (!fixed.empty() && fixed != n);
      };
      for (const std::string& n : pass)
        if (off(n))
          ++rejected[fixed.empty() ? "node(s) publish no whole GPU through DRA"
                                   : "node(s) are not the node of the pod's allocated claims"];
      std::erase_if(pass, off);
      std::erase_if(allowed, off);
    } else {  // a DRA node's GPUs are no device-plugin resources, however much the loop frees there
      std::erase_if(allowed,
                    [&](const std::string& n) { return s_->dra_->loop_nodes().count(n) && !pass.count(n); });
    }
    allowed.insert(pass.begin(), pass.end());
    // Equal sets are one shared set: the loop builds one node mask per distinct set.
    auto [at, fresh] = interned.try_emplace(std::move(allowed));
    if (fresh) at->second = std::make_shared<const std::set<std::string>>(at->first);
    const Service::NodeNames nodes = at->second;
    const std::string message = pass.empty() ? UnschedulableMessage(world.num_nodes(), rejected) : "";
    if (!message.empty()) unschedulable[key] = message;
    passing[key] = pass.size();
    if (!sig.empty()) by_signature[sig] = {nodes, message};
    return nodes;
  };
  std::map<std::string, std::vector<json>> waiting;
  std::set<std::string> with_pods;  // keys with pods, waiting or not
  {
    std::lock_guard<std::mutex> l(s_->pods_mu_);
    for (const auto& [key, m] : s_->pods_by_key_)
      for (const auto& [name, p] : m) {
        with_pods.insert(key);
        if (PodWaiting(p)) {
          waiting[key].push_back(p);
          if (key.rfind("podgroup/", 0) == 0)
            waiting[JobKey{"pod", Meta(p, "namespace"), name}.str()].push_back(p);
        }
      }
  }
  std::map<int64_t, std::string> key_of_job;
  for (const auto& [key, id] : s_->job_of_key_) key_of_job[id] = key;
  for (const auto& [id, keys] : s_->api_jobs_->Keys())
    if (!keys.empty()) key_of_job.emplace(id, keys.front().str());
  // Every pending job (not the last cycle's: a job not judged yet sits cycles out, SetJobNodes).
  const auto nowhere = std::make_shared<const std::set<std::string>>();
  bool more = false;
  for (const JobView& v : s_->service_->List(s_->admin_, "Pending", "", "", 0, 1 << 30, &more)) {
    const int64_t id = v.job->id;
    // A job whose pods are there but none waits (a preempted run's pods still terminating) goes nowhere
    // until one waits; a job whose pods are not seen (yet) anywhere, as before.
    auto key = key_of_job.find(id);
    auto pods = key == key_of_job.end() ? waiting.end() : waiting.find(key->second);
    masks[id] = pods != waiting.end() ? judge(key->second, pods->second.front())
                : key != key_of_job.end() && with_pods.count(key->second) ? nowhere
                                                                          : nullptr;
  }
  s_->service_->SetJobNodes(std::move(masks), /*absent_nowhere=*/true);
  unschedulable_ = std::move(unschedulable);
  passing_ = std::move(passing);
}

std::string FilterRoom::Admit(const PodRef& ref, const std::string& node) {
  const ObjectMap::Ptr cached = s_->pods_->Get(ref.ns + "/" + ref.name);
  if (cached == nullptr || Meta(*cached, "uid") != ref.uid)
    return "";  // not in the cache: the API server judges the binding (UID precondition)
  const json& pod = *cached;
  // One world for a while (kAdmitWorldS), with every binding admitted since assumed on it: a binding costs a
  // judgement, not a copy of the cluster. Pods other schedulers bound meanwhile are seen at the next one (the
  // loop's own placements never overlap: the Service's model holds them).
  constexpr int64_t kAdmitWorldUs = 2'000'000;
  std::lock_guard<std::mutex> admit(admit_mu_);
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  if (!admit_world_ || now_us - admit_world_us_ > kAdmitWorldUs) {
    admit_world_ = std::make_unique<FilterWorld>(MakeWorld());
    admit_world_us_ = now_us;
  }
  FilterVerdict v = admit_world_->Judge(pod, node);
  if (!v.ok()) return fmt::format("{} ({})", v.reasons.front(), v.plugin);
  admit_world_->Assume(pod, node);
  std::lock_guard<std::mutex> l(assumed_mu_);
  assumed_[ref.uid] = {pod, node};
  return "";
}

void FilterRoom::Forget(const PodRef& ref) {
  std::lock_guard<std::mutex> l(assumed_mu_);
  assumed_.erase(ref.uid);
}

}  // namespace tessera
