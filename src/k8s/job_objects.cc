#include "k8s/job_objects.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "k8s/api/objects.h"
#include "service/service.h"
#include "service/workload_json.h"

namespace tessera {

using json = nlohmann::json;

namespace {

// limits (= requests) of one task.
Result<json> TaskResources(const JobRecord& job, const Workload& w) {
  json limits = json::object();
  if (!job.mig_profile.empty()) {
    std::string profile = job.mig_profile;
    std::replace(profile.begin(), profile.end(), '+', '.');
    limits["nvidia.com/mig-" + profile] = "1";
  } else if (w.gpus_per_worker >= 1) {
    limits["nvidia.com/gpu"] = std::to_string(w.gpus_per_worker);
  } else {
    return Status::Error(
        "a fractional GPU without a MIG profile has no Kubernetes resource: give mig_profile or whole GPUs");
  }
  json requests = limits;
  if (w.cpu_milli > 0) requests["cpu"] = fmt::format("{}m", w.cpu_milli);
  if (w.host_memory_mib > 0) requests["memory"] = fmt::format("{}Mi", w.host_memory_mib);
  return json{{"limits", limits}, {"requests", requests}};
}

json Container(const json& spec, const json& resources) {
  json c = {{"name", "main"}, {"image", spec.at("image")}, {"resources", resources}};
  if (spec.contains("command")) c["command"] = spec["command"];
  if (spec.contains("args")) c["args"] = spec["args"];
  if (spec.contains("env")) {
    json env = json::array();
    for (const auto& [k, v] : spec["env"].items()) env.push_back({{"name", k}, {"value", v}});
    c["env"] = env;
  }
  return c;
}

}  // namespace

bool HasContainer(const JobRecord& job) {
  const json body = json::parse(job.spec_json, nullptr, false);
  return body.is_object() && body.contains("container");
}

namespace {

// What a job's objects are made from: its namespace, its accepted spec, and whether it is a gang.
struct ApiJobShape {
  std::string ns;
  json body;
  Workload workload;
  bool gang = false;
  int tasks = 1;
};

Result<ApiJobShape> ShapeOf(const JobRecord& job, const TeamNamespaces& namespaces) {
  auto ns = NamespaceOfTeam(namespaces, job.team);
  if (!ns.ok()) return ns.status();
  ApiJobShape shape{*ns, json::parse(job.spec_json, nullptr, false), {}, false, 1};
  auto parsed = ParseJobSpec(shape.body);
  if (!parsed.ok()) return Status::Error("its spec does not parse: " + parsed.error().message);
  if (!shape.body.contains("container")) return Status::Error("it has no container");
  shape.workload = parsed->workload;
  shape.gang = job.cls == WorkloadClass::kTraining && shape.workload.workers > 1;
  shape.tasks = shape.gang ? shape.workload.workers : job.replicas;
  return shape;
}

std::string BaseName(const JobRecord& job) { return fmt::format("tessera-{}", job.id); }

std::vector<JobKey> KeysOf(const JobRecord& job, const ApiJobShape& shape) {
  if (shape.gang) return {{"podgroup", shape.ns, BaseName(job)}};
  std::vector<JobKey> keys;
  for (int i = 0; i < shape.tasks; ++i)
    keys.push_back({"pod", shape.ns, fmt::format("{}-{}", BaseName(job), i)});
  return keys;
}

}  // namespace

Result<std::vector<JobKey>> ApiJobKeys(const JobRecord& job, const TeamNamespaces& namespaces) {
  auto shape = ShapeOf(job, namespaces);
  if (!shape.ok()) return shape.status();
  return KeysOf(job, *shape);
}

Result<JobObjects> ObjectsForJob(const JobRecord& job, const std::string& scheduler_name,
                                 const std::string& priority_class, const TeamNamespaces& namespaces) {
  auto shape = ShapeOf(job, namespaces);
  if (!shape.ok()) return shape.status();
  const json& body = shape->body;
  const Workload& w = shape->workload;
  auto resources = TaskResources(job, w);
  if (!resources.ok()) return resources.status();
  const bool gang = shape->gang;
  const int tasks = shape->tasks;
  JobObjects out;
  out.ns = shape->ns;
  out.keys = KeysOf(job, *shape);
  const std::string base = BaseName(job);
  if (gang) {
    out.pod_group = json{{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                         {"kind", "PodGroup"},
                         {"metadata",
                          {{"name", base},
                           {"namespace", out.ns},
                           {"labels", {{std::string(kJobIdLabel), std::to_string(job.id)}}}}},
                         {"spec", {{"minMember", tasks}}}};
  }
  for (int i = 0; i < tasks; ++i) {
    const std::string name = fmt::format("{}-{}", base, i);
    json labels = {{std::string(kJobIdLabel), std::to_string(job.id)},
                   {std::string(kReplicaLabel), std::to_string(i)},
                   {"tessera.io/team", job.team}};
    if (gang) labels[std::string(kCoschedulingLabel)] = base;
    json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"name", name},
                  {"namespace", out.ns},
                  {"labels", labels},
                  {"annotations", {{"tessera.io/job-name", job.name}, {"tessera.io/project", job.project}}}}},
                {"spec",
                 {{"schedulerName", scheduler_name},
                  {"restartPolicy", "Never"},
                  {"containers", {Container(body["container"], *resources)}}}}};
    if (!priority_class.empty()) pod["spec"]["priorityClassName"] = priority_class;
    out.pods.push_back(std::move(pod));
  }
  return out;
}

int64_t JobIdOfPod(const json& pod) {
  const json* meta = Field(pod, "metadata");
  const json* labels = meta != nullptr ? Field(*meta, "labels") : nullptr;
  const json* id = labels != nullptr && labels->is_object() ? Field(*labels, kJobIdLabel) : nullptr;
  if (id == nullptr || !id->is_string()) return -1;
  const std::string& s = id->get_ref<const std::string&>();
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(s);
}

}  // namespace tessera
