#include "k8s/dra/dra_nvidia.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>

#include "k8s/dra/dra_model.h"

namespace tessera {
namespace {

using json = nlohmann::json;

std::string ProductName(const GpuKind& kind) {
  for (const std::string& a : kind.aliases)
    if (a.rfind("NVIDIA-", 0) == 0) return "NVIDIA " + a.substr(7);
  return kind.id;
}

// Counters a placement of `p` at `start` consumes (or the set's totals when p is null: the full GPU).
json ConsumedCounters(const GpuKind& kind, const MigProfile* p, int start) {
  json c = json::object();
  int sms = 0, ce = 0, ofa = 1;
  int64_t mib = 0;
  for (const MigProfile& q : kind.profiles) {
    sms = std::max(sms, q.sms);
    ce = std::max(ce, q.compute_slices);
    mib = std::max(mib, q.usable_mib);
  }
  int first = 0, slices = kind.mig_memory_slices;
  if (p != nullptr) {
    sms = p->sms;
    ce = p->compute_slices;
    mib = p->usable_mib;
    ofa = p->media || p->memory_slices == kind.mig_memory_slices ? 1 : 0;
    first = start;
    slices = p->memory_slices;
  }
  c["multiprocessors"] = {{"value", std::to_string(sms)}};
  c["copy-engines"] = {{"value", std::to_string(ce)}};
  if (ofa > 0) c["ofa-engines"] = {{"value", std::to_string(ofa)}};
  c["memory"] = {{"value", fmt::format("{}Mi", mib)}};
  for (int i = first; i < first + slices; ++i) c[fmt::format("memory-slice-{}", i)] = {{"value", "1"}};
  return c;
}

json Capacity(const json& counters) {
  json cap = json::object();
  for (const char* k : {"multiprocessors", "memory"}) cap[k] = counters[k];
  cap["copyEngines"] = counters["copy-engines"];
  return cap;
}

json Attr(const std::string& s) { return {{"string", s}}; }

std::vector<json> GpuDevices(const GpuKind& kind, int minor, const NvidiaSliceOptions& o) {
  const std::string set = fmt::format("gpu-{}-counter-set", minor);
  const std::string uuid =
      fmt::format("GPU-{:08x}-0000-4000-8000-{:012x}", 0x7e55e7a0u + static_cast<unsigned>(minor),
                  static_cast<unsigned>(minor));
  json common = {{"productName", Attr(ProductName(kind))},
                 {"brand", Attr("Nvidia")},
                 {"architecture", Attr(kind.family)}};
  std::vector<json> devs;
  if (o.full_gpu) {
    json attrs = common;
    attrs["type"] = Attr("gpu");
    attrs["uuid"] = Attr(uuid);
    const json c = ConsumedCounters(kind, nullptr, 0);
    devs.push_back({{"name", fmt::format("gpu-{}", minor)},
                    {"attributes", attrs},
                    {"capacity", Capacity(c)},
                    {"consumesCounters", json::array({{{"counterSet", set}, {"counters", c}}})}});
  }
  for (const MigProfile& p : kind.profiles) {
    for (int s = 0; s < kind.mig_memory_slices; ++s) {
      if (!p.AllowedStart(s)) continue;
      json attrs = common;
      attrs["type"] = Attr("mig");
      attrs["parentUUID"] = Attr(uuid);
      attrs["profile"] = Attr(p.name);
      const json c = ConsumedCounters(kind, &p, s);
      devs.push_back(
          {{"name", fmt::format("gpu-{}-mig-{}-{}-{}", minor, NvidiaProfileToken(p.name), p.profile_id, s)},
           {"attributes", attrs},
           {"capacity", Capacity(c)},
           {"consumesCounters", json::array({{{"counterSet", set}, {"counters", c}}})}});
    }
  }
  std::sort(devs.begin(), devs.end(), [](const json& a, const json& b) { return a["name"] < b["name"]; });
  return devs;
}

json SliceObject(const std::string& node, int index, int count, int64_t generation, json extra) {
  json spec = {{"driver", kNvidiaDraDriver},
               {"nodeName", node},
               {"pool", {{"name", node}, {"generation", generation}, {"resourceSliceCount", count}}}};
  spec.update(extra);
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", fmt::format("{}-{}-g{}-{}", node, kNvidiaDraDriver, generation, index)}}},
          {"spec", spec}};
}

}  // namespace

std::string NvidiaProfileToken(const std::string& profile) {
  std::string out;
  for (char c : profile) {
    if (c == '.') continue;
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out += std::isalnum(static_cast<unsigned char>(l)) || l == '-' ? l : '-';
  }
  return out;
}

std::vector<json> NvidiaDynamicMigSlices(const GpuKind& kind, const std::string& node,
                                         const NvidiaSliceOptions& o) {
  std::vector<int> minors = o.minors;
  if (minors.empty())
    for (int i = 0; i < o.gpus; ++i) minors.push_back(i);
  if (minors.empty()) return {};
  std::vector<json> sets, per_gpu;
  for (int m : minors) {
    sets.push_back(
        {{"name", fmt::format("gpu-{}-counter-set", m)}, {"counters", ConsumedCounters(kind, nullptr, 0)}});
    per_gpu.push_back(GpuDevices(kind, m, o));
  }
  std::vector<json> out;
  const int count = static_cast<int>(minors.size()) + (o.split_layout ? 1 : 0);
  if (o.split_layout) out.push_back(SliceObject(node, 0, count, o.generation, {{"sharedCounters", sets}}));
  for (size_t i = 0; i < per_gpu.size(); ++i) {
    json extra = {{"devices", per_gpu[i]}};
    if (!o.split_layout) extra["sharedCounters"] = json::array({sets[i]});
    out.push_back(SliceObject(node, static_cast<int>(out.size()), count, o.generation, extra));
  }
  return out;
}

std::vector<json> NvidiaDeviceClasses() {
  auto cls = [](const char* name, const char* type) {
    const std::string expr = fmt::format(
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{}'", type);
    return json{{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "DeviceClass"},
                {"metadata", {{"name", name}}},
                {"spec", {{"selectors", json::array({{{"cel", {{"expression", expr}}}}})}}}};
  };
  return {cls("gpu.nvidia.com", "gpu"), cls("mig.nvidia.com", "mig")};
}

}  // namespace tessera
