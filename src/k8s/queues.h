#pragma once
// The queues of the gang schedulers a cluster already runs, as Tessera teams. A Volcano Queue
// (scheduling.volcano.sh/v1beta1) or a KAI-Scheduler Queue (scheduling.run.ai/v2) is the team of the jobs
// that name it; its GPU guarantee, hard cap and over-quota weight become the team's:
//
//   Volcano: guarantee.resource[nvidia.com/gpu] (else deserved[nvidia.com/gpu]) -> guarantee,
//            capability[nvidia.com/gpu] -> limit, weight -> over-quota weight.
//   KAI:     resources.gpu.quota -> guarantee, resources.gpu.limit -> limit (-1: none),
//            resources.gpu.overQuotaWeight -> over-quota weight. Only leaf queues take jobs.
//
// A pod names its queue with the KAI label kai.scheduler/queue, Volcano's annotation
// scheduling.volcano.sh/queue-name, or through its PodGroup's spec.queue. Pure functions.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"
#include "k8s/api/object_map.h"

namespace tessera {

inline constexpr std::string_view kKaiQueueLabel = "kai.scheduler/queue";
inline constexpr std::string_view kVolcanoQueueAnnotation = "scheduling.volcano.sh/queue-name";

struct QueueQuota {
  std::string name;
  std::string source;            // "volcano" or "kai"
  int64_t guaranteed_milli = 0;  // GPUs in thousandths
  int64_t limit_milli = -1;      // -1 = no cap
  int over_quota_weight = 1;
  bool leaf = true;  // KAI: false when another queue names it as parentQueue
  bool operator==(const QueueQuota&) const = default;
};

// One queue object; errors name the field and the problem.
Result<QueueQuota> ReadVolcanoQueue(const nlohmann::json& queue);
Result<QueueQuota> ReadKaiQueue(const nlohmann::json& queue);

// Every queue of one listing (name -> object), KAI parents marked as not leaf. Objects that do not read are
// left out and reported in `errors` (queue name -> message).
std::map<std::string, QueueQuota> ReadQueues(const ObjectMap& volcano,
                                             const ObjectMap& kai,
                                             std::map<std::string, std::string>* errors);

// The queue a pod names (label, annotation, then `group`'s spec.queue when `group` is not null); empty for
// none.
std::string QueueOfPod(const nlohmann::json& pod, const nlohmann::json* group);

// Whether a queue name is usable as a Tessera team name (1-63 of a-z, 0-9, '-', '_').
bool QueueNameFitsTeam(std::string_view name);

}  // namespace tessera
