#include "k8s/queues.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "k8s/api/objects.h"
#include "k8s/api/quantity.h"

namespace tessera {

using json = nlohmann::json;

namespace {

constexpr std::string_view kGpu = "nvidia.com/gpu";
constexpr double kMaxGpus = 1e9;

// resourceList[nvidia.com/gpu] in thousandths; `absent` when the list or the key is missing.
Result<int64_t> GpusOfList(const json* list, std::string_view field, int64_t absent) {
  if (list == nullptr || list->is_null()) return absent;
  if (!list->is_object()) return Status::Error(fmt::format("field '{}': not an object", field));
  auto it = list->find(std::string(kGpu));
  if (it == list->end() || it->is_null()) return absent;
  std::string text;
  if (it->is_string()) {
    text = it->get<std::string>();
  } else if (it->is_number_integer()) {
    text = std::to_string(it->get<int64_t>());
  } else {
    return Status::Error(fmt::format("field '{}[{}]': not a quantity", field, kGpu));
  }
  auto q = ParseQuantityMilli(text);
  if (!q.ok()) return Status::Error(fmt::format("field '{}[{}]': {}", field, kGpu, q.error()));
  if (*q < 0) return Status::Error(fmt::format("field '{}[{}]': negative", field, kGpu));
  return *q;
}

// A KAI float64 GPU figure in thousandths; -1 stays -1 (unlimited), absent gives `absent`.
Result<int64_t> KaiGpus(const json* gpu, std::string_view key, int64_t absent) {
  const json* v = gpu != nullptr ? Field(*gpu, key) : nullptr;
  if (v == nullptr || v->is_null()) return absent;
  if (!v->is_number()) return Status::Error(fmt::format("field 'spec.resources.gpu.{}': not a number", key));
  const double d = v->get<double>();
  if (d == -1) return -1;
  if (!std::isfinite(d) || d < 0 || d > kMaxGpus)
    return Status::Error(
        fmt::format("field 'spec.resources.gpu.{}': {} is not a GPU count (0 or more, or -1)", key, d));
  return static_cast<int64_t>(std::llround(d * 1000));
}

// The quota a Queue object starts as: its name and source, nothing guaranteed, no cap, weight 1.
Result<QueueQuota> NamedQueue(const json& queue, std::string_view kind, std::string source) {
  if (!queue.is_object()) return Status::Error(fmt::format("{} Queue: not an object", kind));
  QueueQuota q;
  q.name = Meta(queue, "name");
  if (q.name.empty()) return Status::Error(fmt::format("{} Queue: field 'metadata.name' missing", kind));
  q.source = std::move(source);
  return q;
}

Status CheckCap(const QueueQuota& q, std::string_view field) {
  if (q.limit_milli >= 0 && q.limit_milli < q.guaranteed_milli)
    return Status::Error(fmt::format("queue '{}': field '{}' ({} GPUs) is below its guarantee ({} GPUs)",
                                     q.name, field, q.limit_milli / 1000.0, q.guaranteed_milli / 1000.0));
  return Status::Ok();
}

}  // namespace

Result<QueueQuota> ReadVolcanoQueue(const json& queue) {
  auto named = NamedQueue(queue, "Volcano", "volcano");
  if (!named.ok()) return named;
  QueueQuota q = std::move(named).value();
  const json* spec = Field(queue, "spec");
  if (spec == nullptr || !spec->is_object()) return q;
  const json* guarantee = Field(*spec, "guarantee");
  auto deserved = GpusOfList(Field(*spec, "deserved"), "spec.deserved", 0);
  if (!deserved.ok()) return deserved.status();
  auto floor =
      GpusOfList(guarantee != nullptr && guarantee->is_object() ? Field(*guarantee, "resource") : nullptr,
                 "spec.guarantee.resource", *deserved);
  if (!floor.ok()) return floor.status();
  auto cap = GpusOfList(Field(*spec, "capability"), "spec.capability", -1);
  if (!cap.ok()) return cap.status();
  q.guaranteed_milli = *floor;
  q.limit_milli = *cap;
  if (const json* w = Field(*spec, "weight"); w != nullptr && !w->is_null()) {
    if (!w->is_number_integer() || w->get<int64_t>() < 1 || w->get<int64_t>() > 65535)
      return Status::Error(fmt::format("queue '{}': field 'spec.weight': an integer 1..65535", q.name));
    q.over_quota_weight = static_cast<int>(w->get<int64_t>());
  }
  if (Status st = CheckCap(q, "spec.capability"); !st.ok()) return st;
  return q;
}

Result<QueueQuota> ReadKaiQueue(const json& queue) {
  auto named = NamedQueue(queue, "KAI", "kai");
  if (!named.ok()) return named;
  QueueQuota q = std::move(named).value();
  const json* spec = Field(queue, "spec");
  const json* res = spec != nullptr && spec->is_object() ? Field(*spec, "resources") : nullptr;
  const json* gpu = res != nullptr && res->is_object() ? Field(*res, "gpu") : nullptr;
  if (gpu != nullptr && !gpu->is_object())
    return Status::Error(fmt::format("queue '{}': field 'spec.resources.gpu': not an object", q.name));
  auto quota = KaiGpus(gpu, "quota", 0);
  if (!quota.ok()) return Status::Error(fmt::format("queue '{}': {}", q.name, quota.error()));
  // quota -1 means "unlimited": the whole cluster is this queue's guarantee; Tessera's teams have none
  // beyond the cluster, so it is read as no cap and no floor of its own (the fair share still applies).
  q.guaranteed_milli = *quota < 0 ? 0 : *quota;
  auto limit = KaiGpus(gpu, "limit", -1);
  if (!limit.ok()) return Status::Error(fmt::format("queue '{}': {}", q.name, limit.error()));
  q.limit_milli = *limit;
  if (const json* w = gpu != nullptr ? Field(*gpu, "overQuotaWeight") : nullptr;
      w != nullptr && !w->is_null()) {
    if (!w->is_number() || !std::isfinite(w->get<double>()) || w->get<double>() < 0 ||
        w->get<double>() > 65535)
      return Status::Error(
          fmt::format("queue '{}': field 'spec.resources.gpu.overQuotaWeight': 0..65535", q.name));
    q.over_quota_weight = static_cast<int>(std::llround(w->get<double>()));
  }
  if (Status st = CheckCap(q, "spec.resources.gpu.limit"); !st.ok()) return st;
  return q;
}

std::map<std::string, QueueQuota> ReadQueues(const ObjectMap& volcano,
                                             const ObjectMap& kai,
                                             std::map<std::string, std::string>* errors) {
  std::map<std::string, QueueQuota> out;
  for (const auto& [name, obj] : volcano) {
    auto q = ReadVolcanoQueue(obj);
    if (q.ok()) {
      out[q->name] = *q;
    } else {
      (*errors)[name] = q.error();
    }
  }
  for (const auto& [name, obj] : kai) {
    auto q = ReadKaiQueue(obj);
    if (!q.ok()) {
      (*errors)[name] = q.error();
      continue;
    }
    if (out.count(q->name) && out[q->name].source == "volcano") {
      (*errors)[name] =
          fmt::format("queue '{}' is both a Volcano and a KAI queue; the Volcano one is used", name);
      continue;
    }
    out[q->name] = *q;
  }
  for (const auto& [name, obj] : kai) {
    const json* spec = Field(obj, "spec");
    const json* parent = spec != nullptr && spec->is_object() ? Field(*spec, "parentQueue") : nullptr;
    if (parent == nullptr || !parent->is_string()) continue;
    auto it = out.find(parent->get<std::string>());
    if (it != out.end() && it->second.source == "kai") it->second.leaf = false;
  }
  return out;
}

std::string QueueOfPod(const json& pod, const json* group) {
  const json* meta = Field(pod, "metadata");
  for (const char* map : {"labels", "annotations"}) {
    const json* m = meta != nullptr ? Field(*meta, map) : nullptr;
    if (m == nullptr || !m->is_object()) continue;
    const std::string_view key = std::string_view(map) == "labels" ? kKaiQueueLabel : kVolcanoQueueAnnotation;
    auto it = m->find(std::string(key));
    if (it != m->end() && it->is_string() && !it->get<std::string>().empty()) return it->get<std::string>();
  }
  if (group == nullptr) return "";
  const json* spec = Field(*group, "spec");
  const json* q = spec != nullptr && spec->is_object() ? Field(*spec, "queue") : nullptr;
  return q != nullptr && q->is_string() ? q->get<std::string>() : "";
}

bool QueueNameFitsTeam(std::string_view name) {
  return !name.empty() && name.size() <= 63 &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_") == std::string_view::npos;
}

}  // namespace tessera
