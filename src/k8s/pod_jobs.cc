#include "k8s/pod_jobs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "k8s/cluster_view.h"

namespace tessera {

using json = nlohmann::json;

namespace {

std::string MetaString(const json& o, const char* map, std::string_view key) {
  const json* meta = Field(o, "metadata");
  const json* m = meta != nullptr ? Field(*meta, map) : nullptr;
  if (m == nullptr || !m->is_object()) return "";
  auto it = m->find(std::string(key));
  return it != m->end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

std::optional<JobKey> ParseJobKey(std::string_view text) {
  const size_t a = text.find('/');
  const size_t b = a == std::string_view::npos ? a : text.find('/', a + 1);
  if (b == std::string_view::npos || text.find('/', b + 1) != std::string_view::npos) return std::nullopt;
  JobKey k{std::string(text.substr(0, a)), std::string(text.substr(a + 1, b - a - 1)),
           std::string(text.substr(b + 1))};
  if ((k.kind != "pod" && k.kind != "podgroup") || k.ns.empty() || k.name.empty()) return std::nullopt;
  return k;
}

std::string ProjectOfKey(const JobKey& key) { return key.kind + "/" + key.ns; }

std::optional<JobKey> KeyOfJob(const std::string& project, const std::string& team, const std::string& name) {
  const size_t slash = project.find('/');
  const std::string kind = project.substr(0, slash);
  if (kind != "pod" && kind != "podgroup") return std::nullopt;
  if (slash == std::string::npos) return JobKey{kind, team, name};
  const std::string ns = project.substr(slash + 1);
  if (ns.empty()) return std::nullopt;
  return JobKey{kind, ns, name};
}

bool PodIsOurs(const json& pod, const std::string& scheduler_name) {
  const json* spec = Field(pod, "spec");
  const json* s = spec != nullptr ? Field(*spec, "schedulerName") : nullptr;
  return s != nullptr && s->is_string() && s->get<std::string>() == scheduler_name;
}

bool PodGated(const json& pod) {
  const json* spec = Field(pod, "spec");
  const json* gates = spec != nullptr && spec->is_object() ? Field(*spec, "schedulingGates") : nullptr;
  return gates != nullptr && gates->is_array() && !gates->empty();
}

bool PodWaiting(const json& pod) {
  const json* meta = Field(pod, "metadata");
  if (meta != nullptr && Field(*meta, "deletionTimestamp") != nullptr) return false;
  return PodNode(pod).empty() && !PodTerminal(pod) && !PodGated(pod);
}

JobKey JobKeyOf(const json& pod) {
  const std::string ns = Meta(pod, "namespace");
  std::string group = MetaString(pod, "labels", kCoschedulingLabel);
  if (group.empty()) group = MetaString(pod, "annotations", kVolcanoGroupAnnotation);
  if (group.empty()) group = MetaString(pod, "annotations", kKaiGroupAnnotation);
  if (!group.empty()) return {"podgroup", ns, group};
  return {"pod", ns, Meta(pod, "name")};
}

GangReadiness ReadinessOf(const JobKey& key, const json* group, size_t waiting) {
  GangReadiness r;
  r.tasks = waiting;
  if (key.kind != "podgroup") {
    r.tasks = 1;
    r.ready = waiting >= 1;
    return r;
  }
  if (group == nullptr) {
    r.reason = "PodGroupNotFound";
    r.message = fmt::format(
        "tessera: PodGroup {}/{} does not exist (scheduling.x-k8s.io/v1alpha1, scheduling.volcano.sh/v1beta1 "
        "or scheduling.run.ai/v2alpha2); the pods wait for it",
        key.ns, key.name);
    return r;
  }
  const int min_member = MinMemberOf(*group);
  if (min_member > 0) r.tasks = static_cast<size_t>(min_member);
  r.ready = waiting >= r.tasks && r.tasks > 0;
  if (!r.ready) {
    r.reason = "GangIncomplete";
    r.message = fmt::format(
        "tessera: PodGroup {} has {} of its {} members (minMember) waiting; it is placed once all are there",
        key.name, waiting, r.tasks);
  }
  return r;
}

int MinMemberOf(const json& pod_group) {
  const json* spec = Field(pod_group, "spec");
  const json* m = spec != nullptr ? Field(*spec, "minMember") : nullptr;
  return m != nullptr && m->is_number_integer() && m->get<int64_t>() > 0 && m->get<int64_t>() <= 4096
             ? static_cast<int>(m->get<int64_t>())
             : -1;
}

json PodGroupStatus(int min_member, const std::vector<json>& members, bool volcano, const std::string& now) {
  int scheduled = 0, running = 0, succeeded = 0, failed = 0;
  for (const json& p : members) {
    const json* st = Field(p, "status");
    const std::string phase = st != nullptr ? StringField(*st, "phase") : "";
    const json* spec = Field(p, "spec");
    const bool bound = spec != nullptr && !StringField(*spec, "nodeName").empty();
    succeeded += phase == "Succeeded";
    failed += phase == "Failed";
    running += bound && phase == "Running";
    scheduled += bound && phase != "Succeeded" && phase != "Failed";
  }
  const int need = std::max(min_member, 1);
  std::string phase = "Pending";
  if (failed > 0 && scheduled + succeeded < need) phase = "Failed";
  else if (succeeded >= need && running == 0) phase = volcano ? "Completed" : "Finished";
  else if (running >= need) phase = "Running";
  else if (scheduled >= need) phase = volcano ? "Running" : "Scheduled";
  const bool placed = scheduled + succeeded >= need;
  return {{"phase", phase},
          {"scheduled", scheduled},
          {"running", running},
          {"succeeded", succeeded},
          {"failed", failed},
          {"conditions",
           {{{"type", "Scheduled"},
             {"status", placed ? "True" : "False"},
             {"reason", placed ? "Scheduled" : "Unschedulable"},
             {"message", fmt::format("{} of {} member(s) bound (minMember {})", scheduled, members.size(), min_member)},
             {"lastTransitionTime", now}}}}};
}

Result<JobSpec> JobSpecFor(const JobKey& key, const std::vector<PodDemand>& members, int tasks,
                           const std::string& priority_class, const std::string& team) {
  if (members.empty()) return Status::Error("no pods");
  PodDemand top = members.front();
  for (const PodDemand& d : members) {
    if (d.gpus != top.gpus || d.mig != top.mig)
      return Status::Error(fmt::format("the members of {} ask for different GPUs ({} asks for {} nvidia.com/gpu, {} "
                                       "for {}): a Tessera gang has the same GPUs per member",
                                       key.name, top.name, top.gpus, d.name, d.gpus));
    top.cpu_milli = std::max(top.cpu_milli, d.cpu_milli);
    top.memory_bytes = std::max(top.memory_bytes, d.memory_bytes);
  }
  if (!top.AnyGpu()) return Status::Error("asks for no GPU (nvidia.com/gpu or nvidia.com/mig-*): Tessera places GPU pods");
  if (top.gpus > 0 && !top.mig.empty()) return Status::Error("asks for whole GPUs and MIG slices at once");
  if (top.mig.size() > 1 || (!top.mig.empty() && top.mig.begin()->second != 1))
    return Status::Error("asks for more than one MIG slice: Tessera places one MIG instance per pod");
  if (!top.mig.empty() && tasks > 1) return Status::Error("a gang of MIG pods: a Tessera gang needs whole GPUs");
  if (key.name.size() > kMaxLabelBytes)  // as a submission's name (workload_json.h)
    return Status::Error(fmt::format("its name has {} bytes; a Tessera job's name at most {}",
                                     key.name.size(), kMaxLabelBytes));
  if (tasks < 1 || tasks > 4096)
    return Status::Error(fmt::format("{} members: a Tessera gang has 1 to 4096", tasks));
  // The CPU and host memory as the stored body says them, read back as a submission's are
  // (workload_fields.h).
  const double cpu = top.cpu_milli / 1000.0, host_gib = static_cast<double>(top.memory_bytes) / (1 << 30);
  JobSpec spec;
  Workload& w = spec.workload;
  w.name = key.name;
  w.team = team;
  w.project = ProjectOfKey(key);
  w.priority_class = priority_class;
  w.cpu_milli = static_cast<int64_t>(std::lround(cpu * 1000));
  w.host_memory_mib = static_cast<int64_t>(std::ceil(host_gib * 1024));
  spec.body = {{"name", w.name},       {"team", w.team},
               {"project", w.project}, {"priority_class", priority_class},
               {"cpu", cpu},           {"host_memory_gib", host_gib}};
  if (!top.mig.empty()) {
    w.cls = WorkloadClass::kInference;
    spec.mig_profile = top.mig.begin()->first;
    spec.body["class"] = "inference";
    spec.body["mig_profile"] = spec.mig_profile;
  } else {
    w.cls = WorkloadClass::kTraining;
    w.workers = tasks;
    w.gpus_per_worker = static_cast<int>(top.gpus);
    spec.body["class"] = "training";
    spec.body["workers"] = tasks;
    spec.body["gpus_per_worker"] = top.gpus;
  }
  return spec;
}

}  // namespace tessera
