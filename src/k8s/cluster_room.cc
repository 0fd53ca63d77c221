// ClusterRoom (cluster_room.h): the API's nodes into the Service's cluster, the MIG ConfigMaps their
// nvidia.com/mig.config names are resolved in, what cannot be read or modelled about a node (reported on the
// node), and what pods outside the loop use there.
#include "k8s/cluster_room.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>

#include "k8s/api/events.h"
#include "k8s/api/objects.h"
#include "k8s/pod_jobs.h"
#include "k8s/scheduler.h"

namespace tessera {

using json = nlohmann::json;

namespace {

constexpr int64_t kMigSourcesEveryS = 30;
constexpr const char* kOperatorNamespace = "gpu-operator";
constexpr const char* kDefaultMigConfigMap = "default-mig-parted-config";

int64_t SteadySeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The GPU Operator's MIG ConfigMap (NS/NAME) from its ClusterPolicies: the first one's
// spec.migManager.config.name in status.namespace. Without a ClusterPolicy (404: the kind is not served, or
// none exists) the operator's default; *said gets a line when the ClusterPolicies could not be read.
std::string OperatorMigConfigMap(const ApiClient& api, std::string* said) {
  const ApiResponse r = api.Get("/apis/nvidia.com/v1/clusterpolicies");
  std::string ns = kOperatorNamespace, name = kDefaultMigConfigMap;
  if (!r.ok() && r.status != 404)
    *said +=
        fmt::format("; ClusterPolicies not read ({} {}), so {}/{} is assumed", r.status, r.error, ns, name);
  const json* items = r.ok() ? Field(r.body, "items") : nullptr;
  if (items == nullptr || !items->is_array() || items->empty()) return ns + "/" + name;
  const json& policy = items->front();
  const json* spec = Field(policy, "spec");
  const json* manager = spec != nullptr ? Field(*spec, "migManager") : nullptr;
  const json* config = manager != nullptr ? Field(*manager, "config") : nullptr;
  if (config != nullptr && !StringField(*config, "name").empty()) name = StringField(*config, "name");
  if (const json* status = Field(policy, "status");
      status != nullptr && !StringField(*status, "namespace").empty())
    ns = StringField(*status, "namespace");
  return ns + "/" + name;
}

// The configs of ConfigMap NS/NAME (key config.yaml); an error line when it cannot be read. What of its
// content does not read (the key missing, not a mig-parted file, configs skipped) goes to *content, and the
// object to *object, so that it can be reported on the ConfigMap.
Result<MigConfigSource> ReadMigSource(const ApiClient& api, const std::string& config_map,
                                      std::string* content, json* object) {
  const size_t slash = config_map.find('/');
  const ApiResponse r = api.Get(fmt::format("/api/v1/namespaces/{}/configmaps/{}",
                                            config_map.substr(0, slash), config_map.substr(slash + 1)));
  if (!r.ok()) return Status::Error(fmt::format("{}: {} {}", config_map, r.status, r.error));
  *object = r.body;
  const json* data = Field(r.body, "data");
  const json* text = data != nullptr ? Field(*data, "config.yaml") : nullptr;
  if (text == nullptr || !text->is_string()) *content = config_map + ": no key config.yaml";
  std::vector<std::string> skipped;
  auto configs = content->empty() ? ReadMigPartedConfigs(text->get<std::string>(), &skipped)
                                  : Result<std::vector<MigPartedConfig>>(Status::Error(*content));
  if (!configs.ok() && content->empty())
    *content = fmt::format("{}, key config.yaml: {}", config_map, configs.error());
  if (!configs.ok()) return Status::Error(*content);
  for (const std::string& s : skipped)
    *content += (content->empty() ? config_map + ": configs left out: " : "; ") + s;
  return MigConfigSource{config_map, std::move(configs).value()};
}

// The MIG config a node spec of the cluster YAML names ("" = MIG off).
std::string SpecMigConfig(const json& spec) {
  const json* mig = Field(spec, "mig");
  const json* config = mig != nullptr ? Field(*mig, "config") : nullptr;
  const std::string c = config != nullptr && config->is_string() ? config->get<std::string>() : "";
  return c == "all-disabled" ? "" : c;
}

// The per-GPU MIG layouts a node spec gives (null when none).
json SpecMigLayouts(const json& spec) {
  const json* mig = Field(spec, "mig");
  const json* layouts = mig != nullptr ? Field(*mig, "layouts") : nullptr;
  return layouts != nullptr ? *layouts : json();
}

std::string Label(const json& node, const char* key) {
  const json* meta = Field(node, "metadata");
  const json* labels = meta != nullptr ? Field(*meta, "labels") : nullptr;
  const json* v = labels != nullptr ? Field(*labels, key) : nullptr;
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

// Whether a node spec's capacity (GPUs, CPU, memory) differs from the Service's view of it.
bool CapacityChanged(const json& spec, const json& view) {
  for (const char* k : {"gpus", "cpu_milli", "memory_mib"})
    if (spec.value(k, int64_t{-1}) != view.value(k, int64_t{-1})) return true;
  return false;
}

}  // namespace

ClusterRoom::ClusterRoom(K8sScheduler* scheduler) : s_(scheduler) {}

void ClusterRoom::LoadMigSources(bool now) {
  const int64_t t = SteadySeconds();
  if (!now && t - mig_sources_at_ < kMigSourcesEveryS) return;
  mig_sources_at_ = t;
  std::string said;
  std::vector<std::string> names;
  if (!s_->options_.mig_config_map.empty()) names.push_back(s_->options_.mig_config_map);
  const std::string operator_map = OperatorMigConfigMap(s_->api_, &said);
  if (operator_map != s_->options_.mig_config_map) names.push_back(operator_map);
  std::vector<MigConfigSource> sources;
  std::string read;
  for (const std::string& name : names) {
    std::string content;
    json object;
    auto src = ReadMigSource(s_->api_, name, &content, &object);
    if (!content.empty() && mig_sources_said_.find(content) == std::string::npos) {
      object["kind"] = "ConfigMap";  // its content is reported on it, once per change
      const ApiResponse r =
          PostEvent(s_->api_, object, "Warning", "MigConfigNotRead", "tessera: " + content, "tessera");
      if (!r.ok())
        s_->Log(fmt::format("writing an Event about ConfigMap {} failed ({} {})", name, r.status, r.error));
    }
    if (!content.empty() && src.ok()) said += "; " + content;
    if (src.ok()) {
      read += fmt::format("{}{} from {}", read.empty() ? "" : ", ", src->configs.size(), name);
      sources.push_back(std::move(src).value());
    } else {
      said += "; not read: " + src.error();
    }
  }
  node_reads_.clear();  // specs read from the old sources are read again
  mig_sources_ = std::move(sources);
  said = fmt::format(
      "MIG configs for nodes' nvidia.com/mig.config: {}, then Tessera's names, then what a node "
      "advertises{}",
      read.empty() ? "none from ConfigMaps" : read, said);
  if (said != mig_sources_said_) s_->Log(said);
  mig_sources_said_ = said;
}

Result<json> ClusterRoom::NodeSpecOf(const json& node, const std::map<std::string, NodeUse>& used,
                                     NodeModel* model) {
  auto m = ReadNodeModel(node, Catalog::Default(), s_->options_.leaf_label, s_->options_.spine_label);
  if (!m.ok()) {
    ReportNode(node, "NodeNotModelled", fmt::format("tessera: {}; Tessera places nothing there", m.error()));
    return m.status();
  }
  *model = *m;
  std::string note;
  auto spec = NodeSpecFor(*m, used.count(m->name) ? used.at(m->name) : NodeUse{}, Catalog::Default(),
                          mig_sources_, &note);
  if (!spec.ok())
    if (auto dra = s_->dra_->NodeSpec(*m, used.count(m->name) ? used.at(m->name) : NodeUse{}))
      spec = std::move(*dra);
  const bool names_mig = m->kind != kNone && !m->mig_config.empty() && m->mig_config != "all-disabled";
  if (!spec.ok() && names_mig)
    ReportNode(node, "MigLayoutNotModelled",
               fmt::format("tessera: {}; Tessera places nothing there", spec.error()));
  else if (spec.ok() && !note.empty())
    ReportNode(node, "MigLayoutFromGfd",
               fmt::format("tessera: node {}: nvidia.com/mig.config={}: {}", m->name, m->mig_config, note));
  else
    ReportNode(node, "", "");
  return spec;
}

void ClusterRoom::ReportNode(const json& node, const std::string& reason, const std::string& message) {
  const std::string name = Meta(node, "name");
  auto it = node_said_.find(name);
  if (message.empty() || (it != node_said_.end() && it->second == message)) {
    if (message.empty() && it != node_said_.end()) node_said_.erase(it);
    return;
  }
  node_said_[name] = message;
  s_->Log(message);
  const json regarding = {{"kind", "Node"}, {"metadata", {{"name", name}, {"uid", Meta(node, "uid")}}}};
  const ApiResponse r = PostEvent(s_->api_, regarding, "Warning", reason, message, "tessera");
  if (!r.ok()) s_->Log(fmt::format("writing an Event about node {} failed ({} {})", name, r.status, r.error));
}

void ClusterRoom::Sync() {
  // Every node is read when a node changed, else once per kNodesEveryUs (what pods outside the loop use
  // changes with them; reading 1,000 nodes each pass would delay every waiting pod).
  constexpr int64_t kNodesEveryUs = 1'000'000;
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  // (With a MIG repartitioner or DRA nodes, every pass: their drains and claims change what a node offers.)
  if (!s_->mig_ && s_->dra_->loop_nodes().empty() && s_->nodes_->version() == nodes_seen_ &&
      now_us - nodes_synced_us_ < kNodesEveryUs)
    return;
  nodes_seen_ = s_->nodes_->version();
  nodes_synced_us_ = now_us;
  auto views = s_->service_->ListNodes(s_->admin_);
  if (!views.ok()) return;
  std::map<std::string, NodeView> known;
  for (NodeView& v : views.value()) known[v.name] = std::move(v);
  const std::map<std::string, NodeUse> used = UsageByNode(ForeignPods());
  const auto nodes_snap = s_->nodes_->Snapshot();
  const auto& nodes = *nodes_snap;
  std::set<std::string> read_now;
  for (auto node_it = nodes.begin(); node_it != nodes.end(); ++node_it) {
    const auto [name, node] = *node_it;
    NodeUse use = used.count(name) ? used.at(name) : NodeUse{};
    int64_t outside_gpus = use.gpus;
    if (auto dra = s_->dra_->loop_nodes().find(name);
        dra != s_->dra_->loop_nodes().end())  // GPUs DRA-path claims use
      outside_gpus += dra->second.total - dra->second.free;
    use.gpus = 0;  // held GPU by GPU (HoldForeignGpus): their coming and going never re-reads the node
    const int64_t outside_cpu = use.cpu_milli, outside_mib = (use.memory_bytes + (1 << 20) - 1) >> 20;
    use.cpu_milli = use.memory_bytes = 0;  // held as well (HoldForeignHost): the node keeps its place
    // A node object read before is not read again (its spec depends on it and the MIG sources alone: what
    // others use there is held apart; a DRA node's spec also on its claims: read each time).
    auto was = node_reads_.find(name);
    if (was == node_reads_.end() || was->second.node != node_it.ptr() || s_->dra_->loop_nodes().count(name)) {
      NodeRead r{node_it.ptr(), Status::Error(""), {}};
      r.spec = NodeSpecOf(node, {{name, use}}, &r.model);
      was = node_reads_.insert_or_assign(name, std::move(r)).first;
    }
    read_now.insert(name);
    const NodeModel& model = was->second.model;
    const Result<json>& spec = was->second.spec;
    if (model.name.empty()) continue;  // not read (reported on the node)
    const bool want_cordon =
        model.unschedulable || !model.ready || (s_->mig_ && s_->mig_->Holds(name)) || !spec.ok();
    auto it = known.find(name);
    if (it == known.end() && spec.ok())
      AddNode(name, *spec, want_cordon);
    else if (it != known.end())
      SyncNode(it->second, node, spec.ok() ? *spec : it->second.spec, want_cordon);
    if (spec.ok()) HoldForeignGpus(name, *spec, outside_gpus);
    if (spec.ok()) HoldForeignHost(name, outside_cpu, outside_mib);
  }
  std::erase_if(node_reads_, [&](const auto& e) { return !read_now.count(e.first); });  // nodes gone leave
  for (const auto& [name, v] : known)
    if (!nodes.count(name)) {
      if (v.state == "ready") (void)s_->service_->CordonNode(s_->admin_, name);
      auto removed = s_->service_->RemoveNode(s_->admin_, name);
      if (removed.ok()) s_->Log("node " + name + " removed");
    }
}

void ClusterRoom::AddNode(const std::string& name, const json& spec, bool want_cordon) {
  held_gpus_.erase(name);  // a node added anew holds nothing yet
  held_host_.erase(name);
  auto added = s_->service_->AddNode(s_->admin_, spec.dump());
  s_->Log(added.ok() ? "node " + name + " added" : "node " + name + " not added: " + added.error().message);
  if (added.ok() && want_cordon) (void)s_->service_->CordonNode(s_->admin_, name);
}

void ClusterRoom::SyncNode(const NodeView& view, const json& node, const json& spec, bool want_cordon) {
  const std::string& name = view.name;
  // A new MIG layout (applied and advertised: the repartitioner no longer holds the node) is a new node of
  // the cluster: removed once nothing runs there, added with its new config.
  if ((SpecMigConfig(spec) != SpecMigConfig(view.spec) ||
       SpecMigLayouts(spec) != SpecMigLayouts(view.spec)) &&
      !(s_->mig_ && s_->mig_->Holds(name)) && Label(node, "nvidia.com/mig.config.state") == "success") {
    if (view.state == "ready") (void)s_->service_->CordonNode(s_->admin_, name);
    auto removed = s_->service_->RemoveNode(s_->admin_, name);
    if (!removed.ok())
      return s_->Log(fmt::format("node {}: MIG config now {}, not yet re-read: {}", name, SpecMigConfig(spec),
                                 removed.error().message));
    s_->Log(fmt::format("node {}: MIG config now '{}'", name, SpecMigConfig(spec)));
    return AddNode(name, spec, want_cordon);
  }
  if (CapacityChanged(spec, view.spec) && !(s_->mig_ && s_->mig_->Holds(name)) && view.state != "removed" &&
      view.tasks == 0) {
    // Allocatable changed: re-read once none of our tasks runs there (until then the filters keep placements
    // within what the API shows). What other pods use is held in place (HoldForeignGpus, HoldForeignHost).
    if (view.state == "ready") (void)s_->service_->CordonNode(s_->admin_, name);
    if (s_->service_->RemoveNode(s_->admin_, name).ok()) {
      s_->Log(fmt::format("node {}: {} GPUs, {} mCPU, {} MiB for Tessera now", name, spec.value("gpus", 0),
                          spec.value("cpu_milli", 0), spec.value("memory_mib", 0)));
      return AddNode(name, spec, want_cordon);
    }
    if (!want_cordon) (void)s_->service_->UncordonNode(s_->admin_, name);
    return;
  }
  if (want_cordon && view.state == "ready") (void)s_->service_->CordonNode(s_->admin_, name);
  if (!want_cordon && view.state == "cordoned") (void)s_->service_->UncordonNode(s_->admin_, name);
}

void ClusterRoom::HoldForeignGpus(const std::string& name, const json& spec, int64_t gpus) {
  const int64_t total = spec.value("gpus", int64_t{0});
  const int want = spec.contains("mig") ? 0 : static_cast<int>(std::clamp<int64_t>(gpus, 0, total));
  auto it = held_gpus_.find(name);
  const int was = it == held_gpus_.end() ? 0 : it->second;
  if (want == was) return;
  auto held = s_->service_->HoldGpus(s_->admin_, name, want);
  if (!held.ok()) return;  // not in the Service's cluster (yet)
  held_gpus_[name] = held.value();
  s_->Log(fmt::format("node {}: {} of its {} GPUs held for pods outside the loop (was {}): {}", name,
                      held.value(), total, was,
                      held.value() > was ? "taken off what Tessera places there" : "given back to Tessera"));
}

void ClusterRoom::HoldForeignHost(const std::string& name, int64_t cpu_milli, int64_t memory_mib) {
  const std::pair<int64_t, int64_t> want{cpu_milli, memory_mib};
  auto it = held_host_.find(name);
  if (it != held_host_.end() && it->second == want) return;  // held in full already
  auto held = s_->service_->HoldHost(s_->admin_, name, cpu_milli, memory_mib);
  if (!held.ok()) return;  // not in the Service's cluster (yet)
  // Held in part (our tasks use the rest): asked again next sync, until it is all held.
  if (held.value() == want)
    held_host_[name] = want;
  else
    held_host_.erase(name);
}

std::vector<WaitingPod> MigWaitingOf(const Snapshot& snap, const std::vector<PriorityClass>& classes,
                                     const std::function<std::vector<std::string>(const JobRecord&)>& keys) {
  // Verdicts of a policy hold: no new layout would start the job.
  static const std::set<std::string_view> kHolds = {
      "ExceedsQueueLimit", "BorrowLimit", "Held", "QueueNotLeaf", "Invalid", "RequestExceedsCluster"};
  std::vector<WaitingPod> out;
  for (const QueueEntry& e : snap.queue) {
    const JobRecord& j = *e.job;
    const Request& r = j.request;
    const bool whole = r.gpus_per_task > 0 && j.mig_profile.empty();
    if (!whole && j.mig_profile.empty()) continue;  // a fractional share: no MIG layout is made for it
    if (kHolds.count(e.info.code)) continue;
    Devices asks;
    if (whole)
      asks[std::string(kGpuResource)] = r.gpus_per_task;
    else
      asks[std::string(kMigResourcePrefix) + j.mig_profile] = 1;
    auto pc = std::find_if(classes.begin(), classes.end(),
                           [&](const PriorityClass& c) { return c.name == j.priority_class; });
    const std::vector<std::string> names = keys(j);
    for (int replica = 0; replica < j.replicas; ++replica) {
      const std::optional<JobKey> key =
          replica < static_cast<int>(names.size()) ? ParseJobKey(names[replica]) : std::nullopt;
      for (int task = 0; task < r.tasks; ++task) {
        WaitingPod w;
        w.ns = key ? key->ns : j.team;
        w.name = key ? key->name : fmt::format("{}-{}", j.name, replica);
        w.priority = pc != classes.end() ? pc->value : 0;
        w.requests = asks;
        w.job = j.id;
        out.push_back(std::move(w));
      }
    }
  }
  return out;
}

std::vector<WaitingPod> ClusterRoom::MigWaiting() const {
  auto snap = s_->service_->snapshot();
  if (!snap) return {};
  return MigWaitingOf(*snap, s_->service_->priority_classes(),
                      [this](const JobRecord& j) { return s_->api_jobs_->KeysFor(j); });
}

// Pods whose requests the Service's cluster does not hold: other schedulers' pods, and ours that no running
// job of this Service holds (bound by an earlier replica or store, left from an ended job, or still
// terminating after their run was stopped).
std::vector<const json*> ClusterRoom::ForeignPods() {
  foreign_pods_ = s_->pods_->Snapshot();
  auto snap = s_->service_->snapshot();
  std::set<std::string> running;
  for (const auto& [key, id] : s_->job_of_key_)
    if (snap && !snap->pending.count(id)) running.insert(key);
  for (const auto& [id, keys] : s_->api_jobs_->Keys())
    if (snap && !snap->pending.count(id))
      for (const JobKey& k : keys) running.insert(k.str());
  std::vector<const json*> out;
  for (const auto& [k, p] : *foreign_pods_) {
    if (PodIsOurs(p, s_->options_.scheduler_name)) {
      const auto run = s_->backend_ ? s_->backend_->RunOfPod(Meta(p, "uid")) : std::nullopt;
      if (run && !run->stopping) continue;  // a run of the loop holds it
      if (!run && running.count(JobKeyOf(p).str())) continue;
    }
    out.push_back(&p);
  }
  return out;
}

}  // namespace tessera
