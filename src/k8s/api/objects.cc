#include "k8s/api/objects.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "k8s/api/quantity.h"

namespace tessera {
namespace {

using json = nlohmann::json;

bool SameIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Resources of one container: requests, with limits where a request is missing (device plugins take
// limits; a request must then equal the limit).
Status AddContainer(const json& c, const std::string& where, std::map<std::string, int64_t>* out) {
  if (!c.is_object()) return Status::Error(where + ": not an object");
  const json* res = Field(c, "resources");
  if (res == nullptr) return Status::Ok();
  if (!res->is_object()) return Status::Error(where + ".resources: not an object");
  std::map<std::string, int64_t> mine;
  for (const char* part : {"limits", "requests"}) {
    const json* m = Field(*res, part);
    if (m == nullptr) continue;
    if (!m->is_object()) return Status::Error(fmt::format("{}.resources.{}: not an object", where, part));
    for (const auto& [name, value] : m->items()) {
      if (!value.is_string() && !value.is_number())
        return Status::Error(fmt::format("{}.resources.{}.{}: not a quantity", where, part, name));
      auto q = ParseQuantityMilli(value.is_string() ? value.get<std::string>() : value.dump());
      if (!q.ok()) return Status::Error(fmt::format("{}.resources.{}.{}: {}", where, part, name, q.error()));
      mine[name] = *q;  // requests (read second) win over limits
    }
  }
  for (const auto& [name, v] : mine) (*out)[name] += v;
  return Status::Ok();
}

}  // namespace

Result<std::map<std::string, int64_t>> PodResources(const json& spec) {
  std::map<std::string, int64_t> sum, init;
  for (const char* list : {"containers", "initContainers"}) {
    const json* cs = Field(spec, list);
    if (cs == nullptr) continue;
    if (!cs->is_array()) return Status::Error(fmt::format("spec.{}: not a list", list));
    for (size_t i = 0; i < cs->size(); ++i) {
      std::map<std::string, int64_t> one;
      const std::string where = fmt::format("spec.{}[{}]", list, i);
      if (Status st = AddContainer((*cs)[i], where, list == std::string("containers") ? &sum : &one);
          !st.ok())
        return st;
      for (const auto& [name, v] : one) init[name] = std::max(init[name], v);
    }
  }
  for (const auto& [name, v] : init) sum[name] = std::max(sum[name], v);
  return sum;
}

namespace {

Status WholeDevices(const std::string& name, int64_t milli) {
  if (milli < 0 || milli % 1000 != 0)
    return Status::Error(
        fmt::format("resource {}: {} is not a whole number of devices", name, milli / 1000.0));
  return Status::Ok();
}

}  // namespace

const json* Field(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(std::string(key));
  if (it != object.end()) return it->is_null() ? nullptr : &*it;
  for (auto i = object.begin(); i != object.end(); ++i)
    if (SameIgnoringCase(i.key(), key)) return i->is_null() ? nullptr : &*i;
  return nullptr;
}

std::string StringField(const json& object, std::string_view key) {
  const json* v = Field(object, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

std::string Meta(const json& object, std::string_view key) {
  const json* meta = Field(object, "metadata");
  const json* v = meta != nullptr ? Field(*meta, key) : nullptr;
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

Result<PodDemand> ReadPodDemand(const json& pod) {
  if (!pod.is_object()) return Status::Error("pod: not an object");
  PodDemand d;
  const json* meta = Field(pod, "metadata");
  if (meta != nullptr && meta->is_object()) {
    d.name = StringField(*meta, "name");
    d.ns = StringField(*meta, "namespace");
    d.uid = StringField(*meta, "uid");
  }
  const json* spec = Field(pod, "spec");
  if (spec == nullptr || !spec->is_object()) return Status::Error("pod " + d.name + ": no spec");
  if (const json* p = Field(*spec, "priority"); p != nullptr && p->is_number_integer())
    d.priority = p->get<int>();
  auto res = PodResources(*spec);
  if (!res.ok()) return Status::Error(fmt::format("pod {}: {}", d.name, res.error()));
  for (const auto& [name, milli] : *res) {
    if (name == kGpuResource || name.rfind(kMigResourcePrefix, 0) == 0) {
      if (Status st = WholeDevices(name, milli); !st.ok())
        return Status::Error(fmt::format("pod {}: {}", d.name, st.message()));
      if (name == kGpuResource)
        d.gpus = milli / 1000;
      else if (milli > 0)
        d.mig[name.substr(kMigResourcePrefix.size())] = milli / 1000;
    } else if (name == "cpu") {
      d.cpu_milli = milli;
    } else if (name == "memory") {
      d.memory_bytes = milli / 1000;
    }
  }
  return d;
}

json BindingObject(const std::string& ns, const std::string& name, const std::string& uid,
                   const std::string& node) {
  return {{"apiVersion", "v1"},
          {"kind", "Binding"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
          {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
}

int64_t NodeModel::Allocatable(std::string_view resource) const {
  auto it = allocatable_milli.find(std::string(resource));
  return it == allocatable_milli.end() ? 0 : it->second / 1000;
}

Result<NodeModel> ReadNodeModel(const json& node, const Catalog& catalog, std::string_view leaf_label,
                                std::string_view spine_label) {
  if (!node.is_object()) return Status::Error("node: not an object");
  NodeModel n;
  const json* meta = Field(node, "metadata");
  if (meta == nullptr || !meta->is_object()) return Status::Error("node: no metadata");
  n.name = StringField(*meta, "name");
  if (n.name.empty()) return Status::Error("node: no metadata.name");
  const json* labels = Field(*meta, "labels");
  const json empty = json::object();
  const json& l = labels != nullptr && labels->is_object() ? *labels : empty;
  n.product = StringField(l, "nvidia.com/gpu.product");
  n.kind = n.product.empty() ? kNone : catalog.Find(n.product);
  n.mig_config = StringField(l, "nvidia.com/mig.config");
  for (const auto& [key, value] : l.items()) {
    constexpr std::string_view kCount = ".count";
    if (key.rfind(kMigResourcePrefix, 0) != 0 || key.size() <= kMigResourcePrefix.size() + kCount.size() ||
        key.compare(key.size() - kCount.size(), kCount.size(), kCount) != 0 || !value.is_string())
      continue;
    const std::string v = value.get<std::string>();
    if (!v.empty() && v.size() < 6 && std::all_of(v.begin(), v.end(), ::isdigit))
      n.gfd_mig_counts[key.substr(kMigResourcePrefix.size(),
                                  key.size() - kMigResourcePrefix.size() - kCount.size())] = std::stoi(v);
  }
  if (!leaf_label.empty()) n.leaf = StringField(l, leaf_label);
  if (!spine_label.empty()) n.spine = StringField(l, spine_label);
  n.zone = StringField(l, "topology.kubernetes.io/zone");
  const std::string count = StringField(l, "nvidia.com/gpu.count");
  if (!count.empty() && std::all_of(count.begin(), count.end(), ::isdigit) && count.size() < 6)
    n.gpu_count = std::stoi(count);
  if (const json* spec = Field(node, "spec"); spec != nullptr)
    if (const json* u = Field(*spec, "unschedulable"); u != nullptr && u->is_boolean())
      n.unschedulable = u->get<bool>();
  const json* status = Field(node, "status");
  const json* alloc = status != nullptr ? Field(*status, "allocatable") : nullptr;
  if (alloc != nullptr && alloc->is_object())
    for (const auto& [name, value] : alloc->items()) {
      if (!value.is_string()) continue;
      auto q = ParseQuantityMilli(value.get<std::string>());
      if (!q.ok())
        return Status::Error(fmt::format("node {}: status.allocatable.{}: {}", n.name, name, q.error()));
      n.allocatable_milli[name] = *q;
    }
  if (const json* conds = status != nullptr ? Field(*status, "conditions") : nullptr;
      conds != nullptr && conds->is_array())
    for (const json& c : *conds)
      if (StringField(c, "type") == "Ready") n.ready = StringField(c, "status") == "True";
  return n;
}

std::string WhyNotFits(const PodDemand& d, const NodeModel& n) {
  if (n.unschedulable) return fmt::format("node {} is cordoned", n.name);
  if (!n.ready) return fmt::format("node {} is not Ready", n.name);
  if (d.gpus > 0 && n.Allocatable(kGpuResource) < d.gpus)
    return fmt::format("needs {} nvidia.com/gpu; node {} has {} allocatable{}", d.gpus, n.name,
                       n.Allocatable(kGpuResource), n.product.empty() ? "" : " (" + n.product + ")");
  for (const auto& [profile, count] : d.mig) {
    const std::string res = std::string(kMigResourcePrefix) + profile;
    if (n.Allocatable(res) < count)
      return fmt::format("needs {} MIG {} slice{}; node {} offers {} ({})", count, profile,
                         count == 1 ? "" : "s", n.name, n.Allocatable(res),
                         n.mig_config.empty() ? "no MIG layout" : "layout " + n.mig_config);
  }
  auto cpu = n.allocatable_milli.find("cpu");
  if (d.cpu_milli > 0 && cpu != n.allocatable_milli.end() && cpu->second < d.cpu_milli)
    return fmt::format("needs {} CPU; node {} has {} allocatable", d.cpu_milli / 1000.0, n.name,
                       cpu->second / 1000.0);
  auto mem = n.allocatable_milli.find("memory");
  if (d.memory_bytes > 0 && mem != n.allocatable_milli.end() && mem->second / 1000 < d.memory_bytes)
    return fmt::format("needs {} GiB of memory; node {} has {:.1f} GiB allocatable", d.memory_bytes >> 30,
                       n.name, mem->second / 1000.0 / (1 << 30));
  return "";
}

}  // namespace tessera
